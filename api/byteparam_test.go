package api

import (
	"encoding/json"
	"testing"
)

// A size and a bandwidth take a byte count or a string, leave the value
// alone for null, and refuse a fraction or a bad string naming the
// parameter.
func TestByteParams(t *testing.T) {
	for _, tc := range []struct {
		in         string
		size, rate int64
		sizeErr    string
		rateErr    string
	}{
		{in: `4096`, size: 4096, rate: 4096},
		{in: `"64MiB"`, size: 64 << 20, rate: 64 << 20},
		{in: `null`, size: -1, rate: -1},
		{in: `1.5`, size: -1, rate: -1,
			sizeErr: `invalid params: size 1.5: want a byte count or a string such as "1GiB"`,
			rateErr: `invalid params: qos bandwidth 1.5: want bytes per second or a string such as "100MiB"`},
		{in: `"lots"`, size: -1, rate: -1,
			sizeErr: `invalid params: size: invalid size "lots" (want a byte count such as 4096, 512MiB or 1GiB)`,
			rateErr: `invalid params: qos: invalid rate "lots" (want bytes per second such as 100MiB or 100MiB/s)`},
	} {
		size, rate := ByteSize(-1), ByteRate(-1)
		serr := json.Unmarshal([]byte(tc.in), &size)
		rerr := json.Unmarshal([]byte(tc.in), &rate)
		checkByteParam(t, tc.in, "size", int64(size), serr, tc.size, tc.sizeErr)
		checkByteParam(t, tc.in, "qos", int64(rate), rerr, tc.rate, tc.rateErr)
	}
}

// checkByteParam checks the value v and the error err read from in: none
// if wantErr is "", else an invalid params error naming field.
func checkByteParam(t *testing.T, in, field string, v int64, err error, want int64, wantErr string) {
	t.Helper()
	if wantErr == "" {
		if err != nil || v != want {
			t.Errorf("%s %s: %d, %v; want %d", field, in, v, err, want)
		}
		return
	}
	e, ok := err.(*Error)
	if !ok || e.Code != CodeInvalidParams || e.Data == nil || e.Data.Field != field || v != want || e.Message != wantErr {
		t.Errorf("%s %s: %d, %#v; want %q on field %s", field, in, v, err, wantErr, field)
	}
}
