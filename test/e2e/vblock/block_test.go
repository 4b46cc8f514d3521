package vblock

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestEncodeDecode(t *testing.T) {
	for _, bs := range []int{512, 4096} {
		b := make([]byte, bs)
		Encode(b, 7, 42)
		block, counter, err := Decode(b)
		if err != nil || block != 7 || counter != 42 {
			t.Fatalf("%d-byte block: Decode = %d, %d, %v; want 7, 42, nil", bs, block, counter, err)
		}
	}
	a, b := make([]byte, 4096), make([]byte, 4096)
	Encode(a, 7, 42)
	Encode(b, 7, 43)
	if bytes.Equal(a[offFill:], b[offFill:]) {
		t.Fatal("two versions of a block have the same fill: a torn mix would pass")
	}
}

func TestDecodeRefuses(t *testing.T) {
	whole := func() []byte { b := make([]byte, 4096); Encode(b, 3, 9); return b }
	newer := make([]byte, 4096)
	Encode(newer, 3, 10)
	for name, b := range map[string][]byte{
		"torn: first half of one write, second of the next": append(whole()[:2048:2048], newer[2048:]...),
		"a flipped fill byte":                               func() []byte { b := whole(); b[100] ^= 1; return b }(),
		"a flipped counter byte":                            func() []byte { b := whole(); b[offCounter] ^= 1; return b }(),
		"a flipped checksum byte":                           func() []byte { b := whole(); b[4095] ^= 1; return b }(),
		"no magic":                                          func() []byte { b := whole(); b[0] = 'x'; return b }(),
		"one byte that is not 0":                            func() []byte { b := make([]byte, 4096); b[4000] = 1; return b }(),
	} {
		if _, _, err := Decode(b); !errors.Is(err, ErrForeign) {
			t.Errorf("%s: Decode error %v, want ErrForeign", name, err)
		}
	}
	if _, c, err := Decode(make([]byte, 4096)); c != 0 || err != nil {
		t.Fatalf("zeros: Decode = counter %d, %v; want 0, nil", c, err)
	}
}

func TestCheckBlock(t *testing.T) {
	version := func(block, counter uint64) []byte { b := make([]byte, 4096); Encode(b, block, counter); return b }
	for _, tc := range []struct {
		name string
		b    []byte
		e    Entry
		want string // "" for a pass, else a part of the error
	}{
		{"never written", make([]byte, 4096), Entry{}, ""},
		{"newest acknowledged", version(5, 8), Entry{Acked: 8}, ""},
		{"the in-flight write landed", version(5, 9), Entry{Acked: 8, Pending: 9}, ""},
		{"the in-flight write did not land", version(5, 8), Entry{Acked: 8, Pending: 9}, ""},
		{"first write in flight, not landed", make([]byte, 4096), Entry{Pending: 1}, ""},
		{"an older version over the newest", version(5, 7), Entry{Acked: 8}, "older than the newest acknowledged 8"},
		{"older, with a write in flight", version(5, 7), Entry{Acked: 8, Pending: 9}, "older"},
		{"an acknowledged write lost", make([]byte, 4096), Entry{Acked: 8}, "zeros, but version 8"},
		{"a version never written", version(5, 10), Entry{Acked: 8, Pending: 9}, "never written"},
		{"a newer version with nothing in flight", version(5, 9), Entry{Acked: 8}, "never written"},
		{"another block's data", version(6, 8), Entry{Acked: 8}, "block 6's version 8"},
		{"torn", append(version(5, 8)[:512:512], version(5, 9)[512:]...), Entry{Acked: 8, Pending: 9}, "torn"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckBlock(tc.b, 5, tc.e)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("CheckBlock: %v, want a pass", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("CheckBlock: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestLedgerSaveLoad(t *testing.T) {
	l, err := NewLedger(10, 4096)
	if err != nil {
		t.Fatal(err)
	}
	l.Entries[0] = Entry{Acked: 3}
	l.Entries[9] = Entry{Acked: 5, Pending: 6}
	var buf bytes.Buffer
	if err := l.Save(&buf); err != nil {
		t.Fatal(err)
	}
	got, err := LoadLedger(&buf)
	if err != nil {
		t.Fatalf("LoadLedger: %v", err)
	}
	if got.BlockSize != 4096 || len(got.Entries) != 10 || got.Entries[0] != l.Entries[0] ||
		got.Entries[9] != l.Entries[9] || got.Entries[5] != (Entry{}) {
		t.Fatalf("loaded %+v, saved %+v", got, l)
	}
	if n := got.Entries[9].Next(); n != 7 {
		t.Fatalf("Next after acked 5, pending 6 = %d, want 7", n)
	}
	for name, text := range map[string]string{
		"no header":          "0 1 0\n",
		"block out of range": "vblock ledger v1 blocks 2 block_size 4096\n2 1 0\n",
		"odd block size":     "vblock ledger v1 blocks 2 block_size 1000\n",
		"short line":         "vblock ledger v1 blocks 2 block_size 4096\n1 1\n",
	} {
		if _, err := LoadLedger(strings.NewReader(text)); err == nil {
			t.Errorf("%s: LoadLedger accepted %q", name, text)
		}
	}
}
