package gateway

import (
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
)

func TestAssignSpreadsTheGroups(t *testing.T) {
	groups := []uint32{1, 2, 3, 4, 5, 6, 7}
	for _, members := range [][]string{{"a"}, {"a", "b"}, {"a", "b", "c"}, {"c", "a", "b", "d"}} {
		got := Assign(members, groups)
		load := map[string]int{}
		for _, g := range groups {
			if !slices.Contains(members, got[g]) {
				t.Fatalf("%v: group %d assigned to %q", members, g, got[g])
			}
			load[got[g]]++
		}
		limit := (len(groups) + len(members) - 1) / len(members)
		for _, m := range members {
			if load[m] > limit || load[m] < len(groups)/len(members) {
				t.Errorf("%v: %s has %d groups, want %d..%d", members, m, load[m], len(groups)/len(members), limit)
			}
		}
	}
}

func TestAssignIsTheSameOnEveryGateway(t *testing.T) {
	groups := []uint32{3, 1, 2}
	a := Assign([]string{"gw-a", "gw-b", "gw-c"}, groups)
	b := Assign([]string{"gw-c", "gw-a", "gw-b", "gw-a"}, []uint32{1, 2, 3})
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("%v and %v", a, b)
	}
	seen := map[string]bool{}
	for _, m := range a {
		seen[m] = true
	}
	if len(seen) != 3 {
		t.Fatalf("3 groups over 3 gateways: %v", a)
	}
	if len(Assign(nil, groups)) != 0 {
		t.Fatal("an assignment without members")
	}
}

// A gateway leaving moves its groups; the others' stay, as long as no
// one is over the new limit.
func TestAssignMovesLittleWhenAMemberLeaves(t *testing.T) {
	groups := []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	before := Assign([]string{"a", "b", "c", "d"}, groups)
	after := Assign([]string{"a", "b", "c"}, groups)
	moved := 0
	for _, g := range groups {
		if before[g] != after[g] {
			moved++
			if before[g] != "d" && after[g] == "d" {
				t.Fatalf("group %d moved to the gateway gone", g)
			}
		}
	}
	if moved > 6 {
		t.Errorf("%d of 12 groups moved when one of 4 gateways left (%v -> %v)", moved, before, after)
	}
}

// balancedSet is K groups over N gateways: one fake cluster per group on
// one clock, each gateway's leases sharing its Moves, their preferred
// gateways assigned over the gateways up, as Members does.
type balancedSet struct {
	groups []uint32
	cs     []*fakeCluster
	gws    [][]*gw // [group][gateway]
	up     []bool
	moves  []*Moves
}

func newBalanced(groups []uint32, names []string, period time.Duration) *balancedSet {
	b := &balancedSet{groups: groups, up: make([]bool, len(names))}
	for range names {
		b.moves = append(b.moves, &Moves{Period: period})
	}
	for i := range names {
		b.up[i] = true
	}
	for _, grp := range groups {
		c := newCluster(timing.Lease)
		var row []*gw
		for j, n := range names {
			g := newGW(c, n, fmt.Sprintf("10.0.0.%d:0/%d", j+1, grp))
			g.l.Group, g.l.Failback, g.l.Moves = grp, failback, b.moves[j]
			g.store = notifyingClient{g.client}
			c.watchers = append(c.watchers, g.l)
			row = append(row, g)
		}
		b.cs = append(b.cs, c)
		b.gws = append(b.gws, row)
	}
	return b
}

// sim runs every group for d, with the safety checks of sim.
func (b *balancedSet) sim(t *testing.T, d time.Duration) {
	t.Helper()
	for end := b.cs[0].now + d; b.cs[0].now < end; {
		var names []string
		for j, g := range b.gws[0] {
			if b.up[j] {
				names = append(names, g.name)
			}
		}
		assigned := Assign(names, b.groups)
		for i, c := range b.cs {
			for j, g := range b.gws[i] {
				if b.up[j] {
					g.l.SetPreferred(assigned[b.groups[i]])
				}
			}
			sim(t, c, 100*time.Millisecond, b.gws[i]...)
		}
	}
}

// owners lists each group's owner, "" where none or several.
func (b *balancedSet) owners() []string {
	var out []string
	for i := range b.groups {
		out = append(out, owner(b.gws[i]...))
	}
	return out
}

// oneEach: every gateway up owns exactly one group.
func (b *balancedSet) oneEach() bool {
	count := map[string]int{}
	for _, o := range b.owners() {
		count[o]++
	}
	for j, g := range b.gws[0] {
		if b.up[j] && count[g.name] != 1 {
			return false
		}
	}
	return len(count) == len(b.groups)
}

// Three gateways and three groups: whoever takes the groups first, each
// gateway ends up owning one; one stops, its group moves to another;
// it comes back, a group comes back to it. Never two owners (sim).
func TestBalancedGroupsOneOwnerEach(t *testing.T) {
	b := newBalanced([]uint32{1, 2, 3}, []string{"gw-a", "gw-b", "gw-c"}, 5*time.Second)
	// a starts first and takes every group.
	b.up[1], b.up[2] = false, false
	for i := range b.groups {
		b.gws[i][1].paused, b.gws[i][2].paused = true, true
	}
	b.sim(t, time.Second)
	if got := b.owners(); !slices.Equal(got, []string{"gw-a", "gw-a", "gw-a"}) {
		t.Fatalf("a alone: owners %v", got)
	}
	b.up[1], b.up[2] = true, true
	for i := range b.groups {
		b.gws[i][1].paused, b.gws[i][2].paused = false, false
	}
	// Two groups move, 5 s apart at least; each after the failback delay.
	b.sim(t, failback+3*timing.Renew+5*time.Second)
	if !b.oneEach() {
		t.Fatalf("all three up: owners %v, want one each", b.owners())
	}
	// c stops cleanly: it releases its group, which a or b takes.
	var cGroup int
	for i := range b.groups {
		if b.gws[i][2].l.State() == Owner {
			cGroup = i
		}
		b.gws[i][2].l.Release(b.cs[i].now)
	}
	b.sim(t, timing.Renew+timing.Holdoff)
	for i := range b.groups {
		b.gws[i][2].paused = true
	}
	b.up[2] = false
	b.sim(t, failback+3*timing.Renew+5*time.Second)
	if o := b.owners()[cGroup]; o != "gw-a" && o != "gw-b" {
		t.Fatalf("c stopped: its group %d owned by %q", b.groups[cGroup], o)
	}
	count := map[string]int{}
	for _, o := range b.owners() {
		count[o]++
	}
	if count["gw-a"] < 1 || count["gw-b"] < 1 || count["gw-a"]+count["gw-b"] != 3 {
		t.Fatalf("c stopped: owners %v, want a and b holding the three", b.owners())
	}
	// c comes back (a new run): one group each again.
	for i := range b.groups {
		n := newGW(b.cs[i], "gw-c", fmt.Sprintf("10.0.0.3:0/%d", 10+i))
		n.l.Group, n.l.Failback, n.l.Moves = b.groups[i], failback, b.moves[2]
		n.store = notifyingClient{n.client}
		b.cs[i].watchers = append(b.cs[i].watchers, n.l)
		b.gws[i][2] = n
	}
	b.up[2] = true
	b.sim(t, failback+3*timing.Renew+5*time.Second)
	if !b.oneEach() {
		t.Fatalf("c back: owners %v, want one each", b.owners())
	}
	for i := range b.groups {
		for _, g := range b.gws[i] {
			if g.l.Fencings != 0 {
				t.Errorf("group %d: %s fenced %d times: balancing moves by planned releases", b.groups[i], g.name, g.l.Fencings)
			}
		}
	}
}

// A gateway joining a group of many is handed its groups one per Moves
// period, not all at once.
func TestBalancingMovesOneGroupPerPeriod(t *testing.T) {
	groups := []uint32{1, 2, 3, 4, 5, 6}
	const period = 8 * time.Second
	b := newBalanced(groups, []string{"gw-a", "gw-b"}, period)
	b.up[1] = false
	for i := range groups {
		b.gws[i][1].paused = true
	}
	b.sim(t, time.Second)
	b.up[1] = true
	for i := range groups {
		b.gws[i][1].paused = false
	}
	var handed []time.Duration // when a's failbacks happened
	last := uint64(0)
	for range 600 {
		b.sim(t, 100*time.Millisecond)
		var n uint64
		for i := range groups {
			n += b.gws[i][0].l.Failbacks
		}
		for ; last < n; last++ {
			handed = append(handed, b.cs[0].now)
		}
	}
	if len(handed) != 3 {
		t.Fatalf("a handed %d groups over (at %v), want 3 of 6; owners %v", len(handed), handed, b.owners())
	}
	for k := 1; k < len(handed); k++ {
		if gap := handed[k] - handed[k-1]; gap < period {
			t.Errorf("failbacks %v apart (at %v), want at least %v", gap, handed, period)
		}
	}
}

// fakeMembers is the members object: the shares held, and whether the
// cluster answers.
type fakeMembers struct {
	held []string
	down bool
}

func (f *fakeMembers) Join() error {
	if f.down {
		return errTimeout
	}
	return nil
}
func (f *fakeMembers) Leave() error { return nil }
func (f *fakeMembers) Members() ([]string, error) {
	if f.down {
		return nil, errTimeout
	}
	return f.held, nil
}

// Members counts itself, follows the shares held, and keeps its last
// list while the cluster does not answer: no failback on an unknown.
func TestMembersFollowTheShares(t *testing.T) {
	store := &fakeMembers{}
	m := &Members{Store: store, Name: "gw-b", Groups: []uint32{1, 2}, Log: quietLog()}
	if m.Preferred(1) != "" {
		t.Fatal("a preferred gateway before the members were read")
	}
	store.down = true
	m.Refresh()
	if m.Preferred(1) != "" || m.List() != nil {
		t.Fatalf("members %v read from a cluster that does not answer", m.List())
	}
	store.down = false
	store.held = []string{"gw-a"}
	m.Refresh()
	if got := m.List(); !slices.Equal(got, []string{"gw-a", "gw-b"}) {
		t.Fatalf("members %v, want gw-a and itself", got)
	}
	want := Assign([]string{"gw-a", "gw-b"}, []uint32{1, 2})
	if m.Preferred(1) != want[1] || m.Preferred(2) != want[2] || want[1] == want[2] {
		t.Fatalf("preferred %q %q, want %v", m.Preferred(1), m.Preferred(2), want)
	}
	store.down = true
	m.Refresh()
	if got := m.List(); !slices.Equal(got, []string{"gw-a", "gw-b"}) || m.Preferred(1) != want[1] {
		t.Fatalf("the cluster not answering changed the members: %v", got)
	}
	store.down = false
	store.held = []string{"gw-b"}
	m.Refresh()
	if m.Preferred(1) != "gw-b" || m.Preferred(2) != "gw-b" {
		t.Fatalf("alone: preferred %q %q", m.Preferred(1), m.Preferred(2))
	}
}

func quietLog() *logrus.Entry {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return logrus.NewEntry(l)
}
