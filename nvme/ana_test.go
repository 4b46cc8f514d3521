package nvme

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"
)

func TestANALogLayout(t *testing.T) {
	l := ANALog{ChangeCount: 7, Groups: []ANAGroup{
		{ID: 1, ChangeCount: 7, State: ANAOptimized, NSIDs: []uint32{1, 3}},
		{ID: 128, ChangeCount: 7, State: ANAChange},
	}}
	b := l.Append([]byte{0xee}) // after what is already there
	if len(b) != 1+16+32+8+32 || l.Size() != len(b)-1 {
		t.Fatalf("%d bytes, Size %d", len(b), l.Size())
	}
	b = b[1:]
	le := binary.LittleEndian
	checks := []struct {
		name      string
		got, want uint64
	}{
		{"header change count", le.Uint64(b[0:]), 7},
		{"number of groups", uint64(le.Uint16(b[8:])), 2},
		{"group 1 ID", uint64(le.Uint32(b[16:])), 1},
		{"group 1 NNSIDS", uint64(le.Uint32(b[20:])), 2},
		{"group 1 change count", le.Uint64(b[24:]), 7},
		{"group 1 state", uint64(b[32]), 0x01},
		{"group 1 NSID 0", uint64(le.Uint32(b[48:])), 1},
		{"group 1 NSID 1", uint64(le.Uint32(b[52:])), 3},
		{"group 128 ID", uint64(le.Uint32(b[56:])), 128},
		{"group 128 NNSIDS", uint64(le.Uint32(b[60:])), 0},
		{"group 128 state", uint64(b[72]), 0x0f},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %#x, want %#x", c.name, c.got, c.want)
		}
	}
	if !bytes.Equal(b[10:16], make([]byte, 6)) || !bytes.Equal(b[33:48], make([]byte, 15)) {
		t.Errorf("reserved bytes not zero: %x", b)
	}
	got, err := ParseANALog(b)
	if err != nil || !reflect.DeepEqual(got, l) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
}

func TestParseANALogTruncated(t *testing.T) {
	l := ANALog{Groups: []ANAGroup{{ID: 1, State: ANAOptimized, NSIDs: []uint32{1, 2, 3}}}}
	b := l.Append(nil)
	for _, n := range []int{0, 15, 16 + 31, len(b) - 1} {
		if _, err := ParseANALog(b[:n]); !errors.Is(err, ErrANALog) {
			t.Errorf("%d of %d bytes: %v", n, len(b), err)
		}
	}
}

func TestANAStates(t *testing.T) {
	want := map[ANAState]Status{ANAOptimized: 0, ANANonOptimized: 0, ANAInaccessible: 0x302,
		ANAPersistentLoss: 0x301, ANAChange: 0x303}
	for _, s := range ANAStates {
		if st := s.IOStatus(); st != want[s] || st&DNR != 0 || (st != 0 && st.Type() != SCTPath) {
			t.Errorf("%v: I/O status %v", s, st)
		}
		if p, ok := ParseANAState(s.String()); !ok || p != s || !s.Valid() {
			t.Errorf("%v does not round-trip its name", s)
		}
	}
	if ANAState(0).Valid() || ANAState(5).Valid() {
		t.Error("undefined states valid")
	}
}

func TestIdentifyANAFields(t *testing.T) {
	b := make([]byte, IdentifySize)
	id := IdentifyController{CMIC: CMICANA | CMICMultiController, ANATT: 10, ANACAP: 0x1f, ANAGRPMAX: 128, NANAGRPID: 128}
	id.Encode(b)
	le := binary.LittleEndian
	if b[76] != 0x0a || b[342] != 10 || b[343] != 0x1f || le.Uint32(b[344:]) != 128 || le.Uint32(b[348:]) != 128 {
		t.Fatalf("cmic %#x anatt %d anacap %#x anagrpmax %d nanagrpid %d", b[76], b[342], b[343], le.Uint32(b[344:]), le.Uint32(b[348:]))
	}
	ns := IdentifyNamespace{Blocks: 1, NMIC: NMICShared, ANAGroupID: 0x01020304}
	ns.Encode(b)
	if b[30] != 1 || le.Uint32(b[92:]) != 0x01020304 {
		t.Fatalf("nmic %d anagrpid %#x", b[30], le.Uint32(b[92:]))
	}
}
