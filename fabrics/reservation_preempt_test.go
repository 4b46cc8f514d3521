package fabrics

import (
	"fmt"
	"slices"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// Preempt where PRKEY is the preemptor's own key, or a holder names
// another key or 0, and PRKEY 0 on the all-registrants types (NVMe Base
// 2.0, 8.19.7): each case's registrants, type, holder, notices and
// fenced hosts. Registrants A 0xa, B 0xb, C 0xc, and D sharing A's key.
func TestResvPreemptOwnKeyAndZero(t *testing.T) {
	A, B, C, D := [16]byte{0xa}, [16]byte{0xb}, [16]byte{0xc}, [16]byte{0xd}
	none := [16]byte{}
	type want struct {
		st      nvme.Status
		rtype   uint8
		holder  [16]byte // of types 1-4
		left    [][16]byte
		noticed map[[16]byte]uint8
		fenced  [][16]byte // with abort
	}
	cases := []struct {
		name    string
		rtype   uint8 // held before, by A for types 1-4
		by      [16]byte
		newType uint8
		prkey   uint64
		want    want
	}{
		{"holder, own key: keeps its registration, the type changes, D sharing the key goes",
			nvme.ResvWriteExclusiveRegOnly, A, nvme.ResvExclusiveAccess, 0xa,
			want{0, nvme.ResvExclusiveAccess, A, [][16]byte{A, B, C},
				map[[16]byte]uint8{B: nvme.ResvNoticeReleased, C: nvme.ResvNoticeReleased, D: nvme.ResvNoticeRegPreempted}, [][16]byte{D}}},
		{"holder, own key, same type: only D goes",
			nvme.ResvWriteExclusive, A, nvme.ResvWriteExclusive, 0xa,
			want{0, nvme.ResvWriteExclusive, A, [][16]byte{A, B, C}, map[[16]byte]uint8{D: nvme.ResvNoticeRegPreempted}, [][16]byte{D}}},
		{"holder, another's key: that registrant goes, the reservation and its type stay",
			nvme.ResvWriteExclusive, A, nvme.ResvExclusiveAccess, 0xc,
			want{0, nvme.ResvWriteExclusive, A, [][16]byte{A, B, D}, map[[16]byte]uint8{C: nvme.ResvNoticeRegPreempted}, [][16]byte{C}}},
		{"holder, PRKEY 0: invalid", nvme.ResvWriteExclusive, A, nvme.ResvExclusiveAccess, 0,
			want{st: nvme.StatusInvalidField | nvme.DNR}},
		{"non-holder, own key: it is unregistered, untold; the reservation stays",
			nvme.ResvWriteExclusive, B, nvme.ResvExclusiveAccess, 0xb,
			want{0, nvme.ResvWriteExclusive, A, [][16]byte{A, C, D}, map[[16]byte]uint8{}, nil}},
		{"no reservation, own key: the preemptor and D, who shares it, go",
			0, D, nvme.ResvWriteExclusive, 0xa,
			want{0, 0, none, [][16]byte{B, C}, map[[16]byte]uint8{A: nvme.ResvNoticeRegPreempted}, [][16]byte{A}}},
		{"all registrants, own key: the preemptor and D go, the reservation stays",
			nvme.ResvWriteExclusiveAllRegs, A, nvme.ResvWriteExclusive, 0xa,
			want{0, nvme.ResvWriteExclusiveAllRegs, none, [][16]byte{B, C}, map[[16]byte]uint8{D: nvme.ResvNoticeRegPreempted}, [][16]byte{D}}},
		{"all registrants, PRKEY 0, new all-registrants type: the others go",
			nvme.ResvWriteExclusiveAllRegs, C, nvme.ResvExclusiveAccessAllRegs, 0,
			want{0, nvme.ResvExclusiveAccessAllRegs, none, [][16]byte{C},
				map[[16]byte]uint8{A: nvme.ResvNoticeRegPreempted, B: nvme.ResvNoticeRegPreempted, D: nvme.ResvNoticeRegPreempted}, [][16]byte{A, B, D}}},
		{"all registrants, PRKEY 0, registrants-only type: the preemptor holds it",
			nvme.ResvExclusiveAccessAllRegs, B, nvme.ResvWriteExclusiveRegOnly, 0,
			want{0, nvme.ResvWriteExclusiveRegOnly, B, [][16]byte{B},
				map[[16]byte]uint8{A: nvme.ResvNoticeRegPreempted, C: nvme.ResvNoticeRegPreempted, D: nvme.ResvNoticeRegPreempted}, [][16]byte{A, C, D}}},
	}
	for _, tc := range cases {
		for _, abort := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/abort=%t", tc.name, abort), func(t *testing.T) {
				regs := []Registrant{{A, 0xa}, {B, 0xb}, {C, 0xc}, {D, 0xa}}
				cur := resvSnapshot{ReservationState: ReservationState{Generation: 4, Type: tc.rtype, Registrants: regs}}
				if tc.rtype != 0 && !nvme.ResvAllRegistrants(tc.rtype) {
					cur.Holder = A
				}
				own := regs[slices.IndexFunc(regs, func(r Registrant) bool { return r.HostID == tc.by })].Key
				action := uint8(nvme.ResvPreempt)
				if abort {
					action = nvme.ResvPreemptAndAbort
				}
				ch, st := resvAcquire(cur, &tc.by, action, tc.newType, nvme.ResvKeys{Current: own, Other: tc.prkey})
				if st != tc.want.st {
					t.Fatalf("status %v, want %v", st, tc.want.st)
				}
				if st != 0 {
					return
				}
				n := ch.next
				var left [][16]byte
				for _, r := range n.Registrants {
					left = append(left, r.HostID)
				}
				if n.Type != tc.want.rtype || !slices.Equal(left, tc.want.left) || n.Generation != 5 {
					t.Fatalf("type %d registrants %v gen %d, want type %d registrants %v gen 5", n.Type, left, n.Generation, tc.want.rtype, tc.want.left)
				}
				if !nvme.ResvAllRegistrants(n.Type) && n.Type != 0 && n.Holder != tc.want.holder {
					t.Fatalf("holder %v, want %v", n.Holder, tc.want.holder)
				}
				got := map[[16]byte]uint8{}
				for _, no := range ch.notices {
					got[no.host] = no.typ
				}
				if fmt.Sprint(got) != fmt.Sprint(tc.want.noticed) {
					t.Fatalf("notices %v, want %v", got, tc.want.noticed)
				}
				fenced := slices.Clone(ch.abort)
				slices.SortFunc(fenced, func(a, b [16]byte) int { return int(a[0]) - int(b[0]) })
				if want := tc.want.fenced; !abort && len(fenced) != 0 || abort && !slices.Equal(fenced, want) {
					t.Fatalf("fenced %v, want %v (abort %t)", fenced, want, abort)
				}
			})
		}
	}
}

// An all-registrants reservation whose last registrant preempts its own
// key ends with it.
func TestResvPreemptOwnKeyLastRegistrant(t *testing.T) {
	A := [16]byte{0xa}
	cur := resvSnapshot{ReservationState: ReservationState{Type: nvme.ResvExclusiveAccessAllRegs, Registrants: []Registrant{{A, 0xa}}}}
	ch, st := resvAcquire(cur, &A, nvme.ResvPreempt, nvme.ResvExclusiveAccess, nvme.ResvKeys{Current: 0xa, Other: 0xa})
	if st != 0 {
		t.Fatalf("status %v", st)
	}
	if n := ch.next; n.Type != nvme.ResvNone || len(n.Registrants) != 0 || len(ch.notices) != 0 {
		t.Fatalf("type %d, registrants %v, notices %v: want no reservation, nobody, no notice", n.Type, n.Registrants, ch.notices)
	}
}
