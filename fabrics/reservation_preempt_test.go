package fabrics

import (
	"fmt"
	"slices"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// Preempt where PRKEY is the preemptor's own key, or a holder names
// another key or 0 (a type change, as on the Linux target), a non-holder
// names 0, and PRKEY 0 on the all-registrants types (NVMe Base 2.0,
// 8.19.7): each case's registrants, type, holder, notices and
// fenced hosts. Registrants A 0xa, B 0xb, C 0xc, and D sharing A's key.
func TestResvPreemptOwnKeyAndZero(t *testing.T) {
	A, B, C, D := [16]byte{0xa}, [16]byte{0xb}, [16]byte{0xc}, [16]byte{0xd}
	none := [16]byte{}
	cases := []preemptCase{
		{"holder, own key: keeps its registration, the type changes, D sharing the key goes",
			nvme.ResvWriteExclusiveRegOnly, A, 0, nvme.ResvExclusiveAccess, 0xa,
			preemptWant{0, nvme.ResvExclusiveAccess, A, [][16]byte{A, B, C},
				map[[16]byte]uint8{B: nvme.ResvNoticeReleased, C: nvme.ResvNoticeReleased, D: nvme.ResvNoticeRegPreempted}, [][16]byte{D}}},
		{"holder, own key, same type: only D goes",
			nvme.ResvWriteExclusive, A, 0, nvme.ResvWriteExclusive, 0xa,
			preemptWant{0, nvme.ResvWriteExclusive, A, [][16]byte{A, B, C}, map[[16]byte]uint8{D: nvme.ResvNoticeRegPreempted}, [][16]byte{D}}},
		{"holder, another's key: that registrant goes, the reservation and its type stay",
			nvme.ResvWriteExclusive, A, 0, nvme.ResvExclusiveAccess, 0xc,
			preemptWant{0, nvme.ResvWriteExclusive, A, [][16]byte{A, B, D}, map[[16]byte]uint8{C: nvme.ResvNoticeRegPreempted}, [][16]byte{C}}},
		{"holder, PRKEY 0: the type changes and nobody goes, as on the Linux target (blktests nvme/054)",
			nvme.ResvWriteExclusive, A, 0, nvme.ResvExclusiveAccess, 0,
			preemptWant{0, nvme.ResvExclusiveAccess, A, [][16]byte{A, B, C, D},
				map[[16]byte]uint8{B: nvme.ResvNoticeReleased, C: nvme.ResvNoticeReleased, D: nvme.ResvNoticeReleased}, nil}},
		{"non-holder, PRKEY 0: invalid", nvme.ResvWriteExclusive, B, 0, nvme.ResvExclusiveAccess, 0,
			preemptWant{st: nvme.StatusInvalidField | nvme.DNR}},
		{"non-holder, own key: it is unregistered, untold; the reservation stays",
			nvme.ResvWriteExclusive, B, 0, nvme.ResvExclusiveAccess, 0xb,
			preemptWant{0, nvme.ResvWriteExclusive, A, [][16]byte{A, C, D}, map[[16]byte]uint8{}, nil}},
		{"no reservation, own key: the preemptor and D, who shares it, go",
			0, D, 0, nvme.ResvWriteExclusive, 0xa,
			preemptWant{0, 0, none, [][16]byte{B, C}, map[[16]byte]uint8{A: nvme.ResvNoticeRegPreempted}, [][16]byte{A}}},
		{"all registrants, own key: the preemptor and D go, the reservation stays",
			nvme.ResvWriteExclusiveAllRegs, A, 0, nvme.ResvWriteExclusive, 0xa,
			preemptWant{0, nvme.ResvWriteExclusiveAllRegs, none, [][16]byte{B, C}, map[[16]byte]uint8{D: nvme.ResvNoticeRegPreempted}, [][16]byte{D}}},
		{"all registrants, PRKEY 0, new all-registrants type: the others go",
			nvme.ResvWriteExclusiveAllRegs, C, 0, nvme.ResvExclusiveAccessAllRegs, 0,
			preemptWant{0, nvme.ResvExclusiveAccessAllRegs, none, [][16]byte{C},
				map[[16]byte]uint8{A: nvme.ResvNoticeRegPreempted, B: nvme.ResvNoticeRegPreempted, D: nvme.ResvNoticeRegPreempted}, [][16]byte{A, B, D}}},
		{"all registrants, PRKEY 0, registrants-only type: the preemptor holds it",
			nvme.ResvExclusiveAccessAllRegs, B, 0, nvme.ResvWriteExclusiveRegOnly, 0,
			preemptWant{0, nvme.ResvWriteExclusiveRegOnly, B, [][16]byte{B},
				map[[16]byte]uint8{A: nvme.ResvNoticeRegPreempted, C: nvme.ResvNoticeRegPreempted, D: nvme.ResvNoticeRegPreempted}, [][16]byte{A, C, D}}},
	}
	runPreemptCases(t, []Registrant{{A, 0xa}, {B, 0xb}, {C, 0xc}, {D, 0xa}}, cases)
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

// preemptWant is what a Preempt leaves: its status, the type, the holder
// (of types 1-4), the registrants in order, the notice each host gets,
// and the hosts fenced with abort (nil: those noticed Registration
// Preempted).
type preemptWant struct {
	st      nvme.Status
	rtype   uint8
	holder  [16]byte
	left    [][16]byte
	noticed map[[16]byte]uint8
	fenced  [][16]byte
}

// preemptCase is one Preempt, with and without abort, from the state
// where the first registrant holds a reservation of types 1-4.
type preemptCase struct {
	name    string
	rtype   uint8 // held before; 0: none
	by      [16]byte
	key     uint64 // the preemptor's CRKEY; 0: its own key
	newType uint8
	prkey   uint64
	want    preemptWant
}

func runPreemptCases(t *testing.T, regs []Registrant, cases []preemptCase) {
	t.Helper()
	for _, tc := range cases {
		for _, abort := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/abort=%t", tc.name, abort), func(t *testing.T) {
				cur := resvSnapshot{ReservationState: ReservationState{Generation: 4, Type: tc.rtype, Registrants: slices.Clone(regs)}}
				if tc.rtype != 0 && !nvme.ResvAllRegistrants(tc.rtype) {
					cur.Holder = regs[0].HostID
				}
				key := tc.key
				if i := slices.IndexFunc(regs, func(r Registrant) bool { return r.HostID == tc.by }); key == 0 && i >= 0 {
					key = regs[i].Key
				}
				action := uint8(nvme.ResvPreempt)
				if abort {
					action = nvme.ResvPreemptAndAbort
				}
				ch, st := resvAcquire(cur, &tc.by, action, tc.newType, nvme.ResvKeys{Current: key, Other: tc.prkey})
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
				want := tc.want.fenced
				if want == nil {
					for h, typ := range tc.want.noticed {
						if typ == nvme.ResvNoticeRegPreempted {
							want = append(want, h)
						}
					}
				}
				byID := func(a, b [16]byte) int { return int(a[0]) - int(b[0]) }
				slices.SortFunc(want, byID)
				fenced := slices.Clone(ch.abort)
				slices.SortFunc(fenced, byID)
				if !abort && len(fenced) != 0 || abort && !slices.Equal(fenced, want) {
					t.Fatalf("fenced %v, want %v (abort %t)", fenced, want, abort)
				}
			})
		}
	}
}
