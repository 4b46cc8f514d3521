//go:build !norbd

package backend

import (
	"bytes"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	cephtest "github.com/nvmeof-tgt/nvmeof-tgt/test/ceph"
)

// The tests below run against a real single-node cluster with cephx on
// (test/ceph), as root.

func TestMain(m *testing.M) {
	code := m.Run()
	cephtest.Stop()
	os.Exit(code)
}

// run sets this test binary's images and objects apart from those of other
// runs and packages on a cluster that NVMEOF_CEPH_ENV names.
var run = strconv.FormatInt(time.Now().UnixNano(), 36)

// rbdOpts names this run's image in the test cluster as its RBD user.
func rbdOpts(env map[string]string, image string) RBDOptions {
	return RBDOptions{Pool: env["CEPH_POOL"], Image: run + "." + image, Conf: env["CEPH_CONF"],
		User: env["CEPH_USER"], Keyring: env["CEPH_KEYRING"]}
}

// rbdCLI runs the rbd command as the test cluster's administrator.
func rbdCLI(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	return adminCLI(t, env, "rbd", args...)
}

// adminCLI runs a Ceph command line tool (rbd, ceph) as the test
// cluster's administrator and returns its output; it fails the test if
// the tool fails.
func adminCLI(t *testing.T, env map[string]string, tool string, args ...string) string {
	t.Helper()
	args = append([]string{"--conf", env["CEPH_CONF"], "--id", "admin", "--keyring", env["CEPH_ADMIN_KEYRING"]}, args...)
	out, err := exec.Command(tool, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", tool, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func openTestImage(t testing.TB, env map[string]string, image string, size int64) Backend {
	t.Helper()
	o := rbdOpts(env, image)
	o.Create = true
	b, err := Open("rbd", Options{Size: size, BlockSize: 512, RBD: o})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func rbdPattern(n int, seed byte) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*31) ^ seed
	}
	return p
}

func TestRBDReadWriteAcrossObjects(t *testing.T) {
	env := cephtest.Use(t)
	b := openTestImage(t, env, "rw", 64<<20)
	if b.Size() != 64<<20 {
		t.Fatalf("size %d, want the created image's %d", b.Size(), 64<<20)
	}
	// 4 MiB objects: this write spans two.
	off := int64(4<<20 - 64<<10)
	want := rbdPattern(256<<10, 1)
	if err := b.WriteAt(want, off); err != nil {
		t.Fatal(err)
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(want))
	if err := b.ReadAt(got, off); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read back: err %v, equal %v", err, bytes.Equal(got, want))
	}
	// Never written: zeros.
	if err := b.ReadAt(got[:4096], 32<<20); err != nil || !bytes.Equal(got[:4096], make([]byte, 4096)) {
		t.Fatalf("unwritten range: err %v, not zeros", err)
	}
	if tr := TraitsOf(b); tr.VolatileCache || tr.DiscardZeroes {
		t.Fatalf("traits %+v: the cache is off, and a discard may leave data", tr)
	}
}

// Write Zeroes must read back zeros exactly over its range, partial
// objects and sectors included, and leave its neighbours alone.
func TestRBDWriteZeroesReadsZeros(t *testing.T) {
	env := cephtest.Use(t)
	b := openTestImage(t, env, "zeroes", 16<<20)
	data := rbdPattern(12<<20, 7)
	if err := b.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	zOff, zLen := int64(3<<20+512), int64(5<<20+1536) // inside object 0 to inside object 2
	if err := b.(Zeroer).WriteZeroes(zOff, zLen); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(data))
	if err := b.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	want := append([]byte(nil), data...)
	clear(want[zOff : zOff+zLen])
	if i := firstDiff(got, want); i >= 0 {
		t.Fatalf("byte %d after write zeroes: %#x, want %#x", i, got[i], want[i])
	}
	// A discard is allowed to leave data, but must not fail or touch
	// anything outside its range.
	if err := b.(Discarder).Discard(8<<20, 4<<20); err != nil {
		t.Fatal(err)
	}
	if err := b.ReadAt(got[:4096], 8<<20-4096); err != nil || !bytes.Equal(got[:4096], want[8<<20-4096:8<<20]) {
		t.Fatalf("the block before a discarded range changed (err %v)", err)
	}
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// `rbd resize` and a Resize reach the namespace, as for a block device.
func TestRBDResizeRereadsImage(t *testing.T) {
	env := cephtest.Use(t)
	b := openTestImage(t, env, "grow", 8<<20)
	rbdCLI(t, env, "resize", "--size", "24M", env["CEPH_POOL"]+"/"+run+".grow")
	n, err := b.(Resizer).Resize(1 << 40) // the size asked for is ignored
	if err != nil || n != 24<<20 {
		t.Fatalf("Resize: %d, %v; want %d", n, err, 24<<20)
	}
	if err := b.WriteAt(rbdPattern(4096, 3), 20<<20); err != nil {
		t.Fatalf("write in the grown part: %v", err)
	}
}

func TestRBDReadOnly(t *testing.T) {
	env := cephtest.Use(t)
	openTestImage(t, env, "ro", 4<<20)
	b, err := Open("rbd", Options{BlockSize: 512, ReadOnly: true, RBD: rbdOpts(env, "ro")})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.WriteAt(rbdPattern(512, 0), 0); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("write to a read-only image: %v, want ErrReadOnly", err)
	}
}

// Start-up errors name what is wrong.
func TestRBDOpenErrors(t *testing.T) {
	env := cephtest.Use(t)
	cases := []struct {
		name string
		edit func(*RBDOptions)
		want string
	}{
		{"missing image", func(o *RBDOptions) { o.Image = "nosuch" }, "create: true"},
		{"missing pool", func(o *RBDOptions) { o.Pool = "nosuchpool" }, `pool "nosuchpool" does not exist`},
		{"wrong user", func(o *RBDOptions) { o.User = "nobody" }, "client.nobody"},
		{"missing conf", func(o *RBDOptions) { o.Conf = "/nonexistent/ceph.conf" }, "/nonexistent/ceph.conf"},
	}
	for _, c := range cases {
		o := rbdOpts(env, "x")
		c.edit(&o)
		b, err := Open("rbd", Options{BlockSize: 512, RBD: o})
		if err == nil {
			b.Close()
			t.Errorf("%s: opened", c.name)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want it to mention %q", c.name, err, c.want)
		}
	}
}

// An unreachable cluster fails the open within client_mount_timeout,
// naming the cause, instead of Ceph's default of 5 minutes.
func TestRBDUnreachableClusterFailsFast(t *testing.T) {
	env := cephtest.Use(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	conf := filepath.Join(t.TempDir(), "ceph.conf")
	if err := os.WriteFile(conf, []byte("[global]\nmon host = [v1:"+dead+"]\nclient mount timeout = 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := rbdOpts(env, "x")
	o.Conf = conf
	start := time.Now()
	b, err := Open("rbd", Options{BlockSize: 512, RBD: o})
	if err == nil {
		b.Close()
		t.Fatal("opened an image on a cluster that is not there")
	}
	if el := time.Since(start); el > 8*time.Second {
		t.Errorf("took %v; client_mount_timeout was 2 s", el)
	}
	if !strings.Contains(err.Error(), "cannot reach the Ceph monitors") || !errors.Is(err, syscall.ETIMEDOUT) {
		t.Errorf("error %q: want the monitors named and ETIMEDOUT", err)
	}
}

// With the OSD gone, I/O fails within rados_osd_op_timeout with
// ETIMEDOUT (which the target answers with a retryable status), and works
// again once the OSD is back.
func TestRBDOSDLossTimesOutAndRecovers(t *testing.T) {
	// The OSD goes down: no other test may use the cluster meanwhile.
	env := cephtest.Exclusive(t)
	// A client conf with a short operation timeout.
	base, err := os.ReadFile(env["CEPH_CONF"])
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(t.TempDir(), "ceph.conf")
	short := strings.Replace(string(base), "[global]\n", "[global]\nrados osd op timeout = 3\n", 1)
	if err := os.WriteFile(conf, []byte(short), 0o644); err != nil {
		t.Fatal(err)
	}
	o := rbdOpts(env, "osdloss")
	o.Conf, o.Create = conf, true
	b, err := Open("rbd", Options{Size: 8 << 20, BlockSize: 512, RBD: o})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.WriteAt(rbdPattern(4096, 1), 0); err != nil {
		t.Fatal(err)
	}
	cephtest.OSD(t, "stop-osd")
	restarted := false
	defer func() {
		if !restarted {
			cephtest.OSD(t, "start-osd")
		}
	}()
	start := time.Now()
	err = b.WriteAt(rbdPattern(4096, 2), 4096)
	if !errors.Is(err, syscall.ETIMEDOUT) {
		t.Fatalf("write with the OSD down: %v, want ETIMEDOUT", err)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("the write failed after %v; rados_osd_op_timeout was 3 s", el)
	}
	cephtest.OSD(t, "start-osd")
	restarted = true
	want := rbdPattern(4096, 3)
	if err := b.WriteAt(want, 4096); err != nil {
		t.Fatalf("write after the OSD came back: %v", err)
	}
	got := make([]byte, 4096)
	if err := b.ReadAt(got, 4096); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read after the OSD came back: %v, equal %v", err, bytes.Equal(got, want))
	}
}

// The asynchronous calls complete through the sink with the tag they were
// given, many in flight at once.
func TestRBDAsync(t *testing.T) {
	env := cephtest.Use(t)
	b := openTestImage(t, env, "async", 16<<20)
	type result struct {
		tag uint32
		res int64
	}
	done := make(chan result, 64)
	sink, err := NewAsyncSink(func(tag uint32, res int64) { done <- result{tag, res} })
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	a := b.(AsyncIO)
	const n = 32
	bufs := make([][]byte, n)
	for i := range bufs {
		bufs[i] = rbdPattern(64<<10, byte(i))
		if err := a.WriteAsync(bufs[i], int64(i)*(256<<10), sink, uint32(i)); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[uint32]bool{}
	for range n {
		r := <-done
		if r.res < 0 || seen[r.tag] || r.tag >= n {
			t.Fatalf("write completion tag %d res %d (seen before: %v)", r.tag, r.res, seen[r.tag])
		}
		seen[r.tag] = true
	}
	if err := a.FlushAsync(sink, 99); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.tag != 99 || r.res < 0 {
		t.Fatalf("flush completion %+v", r)
	}
	got := make([][]byte, n)
	for i := range got {
		got[i] = make([]byte, 64<<10)
		if err := a.ReadAsync(got[i], int64(i)*(256<<10), sink, uint32(i)); err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		if r := <-done; r.res != 64<<10 {
			t.Fatalf("read completion tag %d: res %d, want %d", r.tag, r.res, 64<<10)
		}
	}
	for i := range got {
		if !bytes.Equal(got[i], bufs[i]) {
			t.Fatalf("read %d differs from what was written", i)
		}
	}
	// Past the end: a short read, the caller zeroes the rest.
	if err := a.ReadAsync(got[0], 16<<20-4096, sink, 7); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.res != 4096 {
		t.Fatalf("read across the end: res %d, want 4096", r.res)
	}
}

// benchRBDAsync keeps depth 4 KiB random writes or reads in flight through
// the asynchronous calls, as a queue pair does, for comparison with
// `rbd bench --io-size 4K --io-threads 32 --io-pattern rand` on the same
// cluster.
func benchRBDAsync(b *testing.B, write bool) {
	env := cephtest.Use(b)
	img := openTestImage(b, env, "bench", 64<<20)
	a := img.(AsyncIO)
	// Every object written first, as rbd bench's image is in docs/ceph.md.
	fill := make([]byte, 4<<20)
	for off := int64(0); off < 64<<20; off += int64(len(fill)) {
		if err := img.WriteAt(fill, off); err != nil {
			b.Fatal(err)
		}
	}
	const depth = 32
	done := make(chan uint32, depth)
	var failed atomic.Int64
	sink, err := NewAsyncSink(func(tag uint32, res int64) {
		if res < 0 {
			failed.Store(res)
		}
		done <- tag
	})
	if err != nil {
		b.Fatal(err)
	}
	defer sink.Close()
	bufs := make([][]byte, depth)
	for i := range bufs {
		bufs[i] = rbdPattern(4096, byte(i))
	}
	rng := uint64(1)
	start := func(tag uint32) {
		rng = rng*6364136223846793005 + 1442695040888963407
		off := int64(rng>>40) % (64 << 20 / 4096) * 4096
		var err error
		if write {
			err = a.WriteAsync(bufs[tag], off, sink, tag)
		} else {
			err = a.ReadAsync(bufs[tag], off, sink, tag)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(4096)
	inFlight := 0
	for b.Loop() {
		if inFlight < depth {
			start(uint32(inFlight))
			inFlight++
			continue
		}
		start(<-done)
	}
	for ; inFlight > 0; inFlight-- {
		<-done
	}
	if res := failed.Load(); res < 0 {
		b.Fatalf("an I/O failed: %v", syscall.Errno(-res))
	}
}

func BenchmarkRBDAsyncWrite4kQD32(b *testing.B) { benchRBDAsync(b, true) }
func BenchmarkRBDAsyncRead4kQD32(b *testing.B)  { benchRBDAsync(b, false) }

// An image in a gateway group must have the exclusive-lock feature: one
// without it is refused, naming the feature and how to enable it.
func TestRBDExclusiveLockRequired(t *testing.T) {
	env := cephtest.Use(t)
	o := rbdOpts(env, "nolock")
	rbdCLI(t, env, "create", "--size", "4M", "--image-feature", "layering", o.Pool+"/"+o.Image)
	o.ExclusiveLock = true
	b, err := Open("rbd", Options{BlockSize: 512, RBD: o})
	if err == nil {
		b.Close()
		t.Fatal("an image without exclusive-lock opened for a gateway group")
	}
	if !strings.Contains(err.Error(), "exclusive-lock") {
		t.Fatalf("error %q does not name the feature", err)
	}
	rbdCLI(t, env, "feature", "enable", o.Pool+"/"+o.Image, "exclusive-lock")
	b, err = Open("rbd", Options{BlockSize: 512, RBD: o})
	if err != nil {
		t.Fatalf("with exclusive-lock enabled: %v", err)
	}
	b.Close()
}

// Reconnect swaps the image while a call outside the I/O path uses it
// (a reload's Resize, as after a blocklist while `ctl reload` runs; a
// Flush and the reservation metadata take the same lock): it waits for
// the call before it closes the old image, which librbd frees.
func TestRBDReconnectWaitsForControlCalls(t *testing.T) {
	env := cephtest.Use(t)
	rb := openTestImage(t, env, "reconnect", 8<<20).(*rbdBackend)
	entered, release := make(chan struct{}), make(chan struct{})
	resizeHook = func() {
		resizeHook = nil // this call only
		close(entered)
		<-release
	}
	t.Cleanup(func() { resizeHook = nil })
	resized, reconnected := make(chan error, 1), make(chan error, 1)
	go func() { _, err := rb.Resize(0); resized <- err }()
	<-entered
	RetireClient(rb.opts)
	go func() { reconnected <- rb.Reconnect() }()
	// TryRLock fails once Reconnect waits for the image.
	for rb.mu.TryRLock() {
		rb.mu.RUnlock()
		select {
		case err := <-reconnected:
			close(release)
			t.Fatalf("Reconnect (%v) swapped and closed the image while a Resize was using it", err)
		default:
			runtime.Gosched()
		}
	}
	close(release)
	if err := <-resized; err != nil {
		t.Fatal(err)
	}
	if err := <-reconnected; err != nil {
		t.Fatal(err)
	}
	if _, err := rb.Resize(0); err != nil {
		t.Fatalf("Resize on the new image: %v", err)
	}
}
