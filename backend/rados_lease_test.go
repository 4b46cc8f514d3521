//go:build !norbd

package backend

import (
	"errors"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	cephtest "github.com/nvmeof-tgt/nvmeof-tgt/test/ceph"
)

// asDaemon gives o a cluster connection of its own, as a second daemon
// would have: connections are shared per conf path, and this one names
// the same file another way.
func asDaemon(o RBDOptions, n int) RBDOptions {
	o.Conf = filepath.Dir(o.Conf) + strings.Repeat("/.", n) + "/" + filepath.Base(o.Conf)
	return o
}

func openLease(t *testing.T, o RBDOptions, object, cookie string, d time.Duration) *RadosLease {
	t.Helper()
	l, err := OpenRadosLease(o, object, cookie, d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

// Two daemons' leases on one object, against the real cluster: one
// holds it, the other is refused until it expires; renewal needs the
// lock; the holder's record outlives the lock; fencing blocklists the old
// holder's client, whose lock calls and image writes the OSDs then refuse.
func TestRadosLeaseAndFencing(t *testing.T) {
	env := cephtest.Use(t)
	oa := rbdOpts(env, "gw")
	ob := asDaemon(oa, 1)
	const lease = 3 * time.Second
	// a's image writes go through a's connection, the lease's.
	img := openTestImage(t, env, "gw", 16<<20)
	a := openLease(t, oa, run+".lease", "a-1", lease)
	b := openLease(t, ob, run+".lease", "b-1", lease)
	if a.conn != img.(*rbdBackend).conn || a.conn == b.conn {
		t.Fatal("a's lease does not share the image's connection, or b shares a's")
	}

	addr := holdAndNotify(t, a, b)

	// a stops renewing: b gets the lock once it expired, not before.
	took := time.Now()
	lockOnceExpired(t, b, took.Add(3*lease))
	if d := time.Since(took); d < lease-time.Second {
		t.Fatalf("b took the lock %v after a's renewal; the lease is %v", d, lease)
	}
	if h, err := b.Holder(); err != nil || h != "a\na-1\n"+addr {
		t.Fatalf("recorded holder %q: %v", h, err)
	}
	if err := b.Fence(addr); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("ceph", "--conf", env["CEPH_CONF"], "--id", "admin", "--keyring", env["CEPH_ADMIN_KEYRING"], "osd", "blocklist", "ls").CombinedOutput()
	// The list prints the address without its messenger type ("v1:").
	bare := addr[strings.IndexByte(addr, ':')+1:]
	if err != nil || !strings.Contains(string(out), bare+" ") {
		t.Fatalf("osd blocklist ls: %v, no %q\n%s", err, addr, out)
	}
	// a's client is fenced: its lease calls and image writes are refused.
	if err := a.Lock(false); !errors.Is(err, syscall.ESHUTDOWN) {
		t.Fatalf("a's lock after fencing: %v, want ESHUTDOWN (blocklisted)", err)
	}
	if err := img.WriteAt(make([]byte, 4096), 0); !errors.Is(err, syscall.ESHUTDOWN) {
		t.Fatalf("a's image write after fencing: %v, want ESHUTDOWN (blocklisted)", err)
	}
	// b goes on: lock, record, release. (Taken or renewed: the checks
	// above run the ceph tool and may outlast the 3 s lease on a busy
	// machine, and then a renewal finds no lock to renew.)
	if err := b.Lock(false); err != nil {
		t.Fatal(err)
	}
	if err := b.SetHolder(""); err != nil {
		t.Fatal(err)
	}
	if h, err := b.Holder(); err != nil || h != "" {
		t.Fatalf("cleared record: %q, %v", h, err)
	}
	if err := b.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := b.Lock(true); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("renewal after unlock: %v", err)
	}
}

// lockOnceExpired takes b's lock once a, which stopped renewing, lets
// its lease expire: it fails on any error but EBUSY, or past deadline.
func lockOnceExpired(t *testing.T, b *RadosLease, deadline time.Time) {
	t.Helper()
	for {
		err := b.Lock(false)
		if err == nil {
			return
		}
		if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			t.Fatalf("b's lock after a stopped renewing: %v", err)
		}
		time.Sleep(200 * time.Millisecond) // polling the cluster, not ordering events
	}
}

// holdAndNotify has a take the lease, renew it and record itself as its
// holder, which b cannot do meanwhile, and b hear a's notification. It
// returns a's client address.
func holdAndNotify(t *testing.T, a, b *RadosLease) string {
	t.Helper()
	if err := a.Lock(true); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("renewing a lock nobody holds: %v, want ENOENT", err)
	}
	if err := a.Lock(false); err != nil {
		t.Fatal(err)
	}
	if err := b.Lock(false); !errors.Is(err, syscall.EBUSY) {
		t.Fatalf("b's lock while a holds it: %v, want EBUSY", err)
	}
	if err := b.Lock(true); err == nil {
		t.Fatal("b renewed a's lock")
	}
	if err := a.Lock(true); err != nil {
		t.Fatalf("a's renewal: %v", err)
	}
	addr, err := a.Self()
	if err != nil || !strings.Contains(addr, "/") {
		t.Fatalf("a's address %q: %v", addr, err)
	}
	if _, err := b.Self(); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("b's address while not holding: %v", err)
	}
	if err := a.SetHolder("a\na-1\n" + addr); err != nil {
		t.Fatal(err)
	}
	// b watches the object; a's notification (a release) reaches it.
	notified := make(chan struct{}, 1)
	if err := b.Watch(func() { notified <- struct{}{} }); err != nil {
		t.Fatal(err)
	}
	if err := b.WatchError(); err != nil {
		t.Fatalf("b's watch, just set up: %v", err)
	}
	if err := a.WatchError(); !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("a's watch, never set up: %v, want ENOTCONN", err)
	}
	if err := a.Notify(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-notified:
	case <-time.After(5 * time.Second):
		t.Fatal("b's watch did not hear a's notification")
	}
	return addr
}

// The holder's record changes only while the writer holds the lock: a
// peer's record is refused while another holds it, and a holder whose
// lock expired and was taken can neither clear the new owner's record
// (a late release) nor record itself over it (a slow takeover).
func TestRadosLeaseRecordNeedsTheLock(t *testing.T) {
	env := cephtest.Use(t)
	oa := rbdOpts(env, "rec")
	const lease = 3 * time.Second
	a := openLease(t, oa, run+".rec", "a-1", lease)
	b := openLease(t, asDaemon(oa, 1), run+".rec", "b-1", lease)
	if err := a.SetHolder("a"); err == nil {
		t.Fatal("a recorded itself without the lock")
	}
	if err := a.Lock(false); err != nil {
		t.Fatal(err)
	}
	if err := a.SetHolder("a"); err != nil {
		t.Fatal(err)
	}
	holder := func(want string) {
		t.Helper()
		if h, err := b.Holder(); err != nil || h != want {
			t.Fatalf("recorded holder %q (%v), want %q", h, err, want)
		}
	}
	if err := b.SetHolder("b"); !errors.Is(err, syscall.EBUSY) {
		t.Fatalf("b's record while a holds the lock: %v, want EBUSY", err)
	}
	holder("a")
	lockOnceExpired(t, b, time.Now().Add(3*lease))
	for _, v := range []string{"", "a"} {
		if err := a.SetHolder(v); err == nil {
			t.Fatalf("a changed the record to %q after b took its expired lock", v)
		}
		holder("a")
	}
	if err := b.SetHolder("b"); err != nil {
		t.Fatal(err)
	}
	holder("b")
	if err := b.SetHolder(""); err != nil {
		t.Fatal(err)
	}
	holder("")
	if err := b.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := b.SetHolder("b"); err == nil {
		t.Fatal("b recorded itself after unlocking")
	}
}

// A fenced client stays blocklisted for well past its operation timeout
// and the lease, whatever the cluster's default expiry: here the default
// is cut to a minute, and the entry still lasts an hour.
func TestRadosLeaseFenceOutlastsTheClient(t *testing.T) {
	env := cephtest.Use(t)
	ceph := func(args ...string) string {
		t.Helper()
		return adminCLI(t, env, "ceph", args...)
	}
	ceph("config", "set", "mon", "mon_osd_blocklist_default_expire", "60")
	t.Cleanup(func() { ceph("config", "rm", "mon", "mon_osd_blocklist_default_expire") })
	oa := rbdOpts(env, "exp")
	a := openLease(t, asDaemon(oa, 2), run+".exp", "a-1", 3*time.Second)
	b := openLease(t, asDaemon(oa, 3), run+".exp", "b-1", 3*time.Second)
	if err := a.Lock(false); err != nil {
		t.Fatal(err)
	}
	addr, err := a.Self()
	if err != nil {
		t.Fatal(err)
	}
	fenced := time.Now()
	if err := b.Fence(addr); err != nil {
		t.Fatal(err)
	}
	bare := addr[strings.IndexByte(addr, ':')+1:]
	for _, line := range strings.Split(ceph("osd", "blocklist", "ls"), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != bare {
			continue
		}
		until, err := time.Parse("2006-01-02T15:04:05.999999-0700", f[1])
		if err != nil {
			t.Fatalf("blocklist entry %q: %v", line, err)
		}
		if d := until.Sub(fenced); d < 55*time.Minute {
			t.Fatalf("blocklisted for %v, want an hour (10 s operation timeout, 3 s lease, default cut to 60 s)", d)
		}
		return
	}
	t.Fatalf("no blocklist entry for %s", bare)
}

func TestBlocklistExpiry(t *testing.T) {
	for _, tc := range []struct {
		timeout string
		lease   time.Duration
		want    time.Duration
	}{
		{"10", 10 * time.Second, time.Hour},
		{"10.000000", 300 * time.Second, time.Hour},
		{"600", 300 * time.Second, 9000 * time.Second},
		{"0", 10 * time.Second, 24 * time.Hour},
		{"", 10 * time.Second, 24 * time.Hour},
	} {
		if got := blocklistExpiry(tc.timeout, tc.lease); got != tc.want {
			t.Errorf("op timeout %q, lease %v: %v, want %v", tc.timeout, tc.lease, got, tc.want)
		}
	}
}

// The members of a gateway group, against the real cluster: each holds a
// share of the lock; one that leaves is gone at once, one that stops
// renewing once its share expired.
func TestRadosSharedLockMembers(t *testing.T) {
	env := cephtest.Use(t)
	oa := rbdOpts(env, "gw")
	const lease = 3 * time.Second
	a := openLease(t, asDaemon(oa, 4), run+".members", "gw-a", lease)
	b := openLease(t, asDaemon(oa, 5), run+".members", "gw-b", lease)
	if m, err := a.Lockers(); err != nil || len(m) != 0 {
		t.Fatalf("no object yet: members %v, %v", m, err)
	}
	for _, l := range []*RadosLease{a, b, a} { // a second Join renews
		if err := l.LockShared(); err != nil {
			t.Fatal(err)
		}
	}
	members := func() string {
		m, err := b.Lockers()
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(m)
		return strings.Join(m, " ")
	}
	if got := members(); got != "gw-a gw-b" {
		t.Fatalf("members %q, want gw-a gw-b", got)
	}
	if err := b.Unlock(); err != nil {
		t.Fatal(err)
	}
	if got := members(); got != "gw-a" {
		t.Fatalf("after b left: members %q", got)
	}
	renewed := time.Now()
	for members() != "" {
		if time.Since(renewed) > 3*lease {
			t.Fatalf("a's share still held %v after its last renewal; it lasts %v", time.Since(renewed), lease)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if d := time.Since(renewed); d < lease-time.Second {
		t.Fatalf("a's share gone %v after its renewal; it lasts %v", d, lease)
	}
}

// Replace is a compare-and-set on the object's version attribute: a
// writer that read an older version, or that creates an object that
// exists, is refused and changes nothing.
func TestRadosObjectReplace(t *testing.T) {
	env := cephtest.Use(t)
	o := openLease(t, rbdOpts(env, "gw"), run+".cfg", "x", time.Second)
	if _, err := o.ReadAll(); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("no object: %v", err)
	}
	const key = "version"
	if err := o.Replace(key, "", "1", []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := o.Replace(key, "", "1", []byte("other")); !errors.Is(err, syscall.EEXIST) {
		t.Fatalf("a second create: %v, want EEXIST", err)
	}
	if err := o.Replace(key, "1", "2", []byte("two")); err != nil {
		t.Fatal(err)
	}
	if err := o.Replace(key, "1", "2", []byte("stale")); !errors.Is(err, syscall.ECANCELED) {
		t.Fatalf("a write from version 1: %v, want ECANCELED", err)
	}
	if b, err := o.ReadAll(); err != nil || string(b) != "two" {
		t.Fatalf("read %q, %v; want two", b, err)
	}
}
