package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
)

func TestNamespaceValues(t *testing.T) {
	for v, want := range map[string]bool{
		"91fdba0d-f87b-4c25-b80f-db7be1418b9e": true, "91FDBA0D-F87B-4C25-B80F-DB7BE1418B9E": true,
		"91fdba0df87b4c25b80fdb7be1418b9e": false, "91fdba0d-f87b-4c25-b80f-db7be1418b9": false,
		"91fdba0d-f87b-4c25-b80f-db7be1418b9g": false, "": false,
	} {
		if got := validUUID(v); got != want {
			t.Errorf("validUUID(%q) = %v", v, got)
		}
	}
	if u := newNamespace().uuid; !validUUID(u) || u == newNamespace().uuid {
		t.Errorf("a new namespace's UUID %q: want a random one", u)
	}
	for v, want := range map[string]int{"1": 1, "0": 0, "y": 1, "N": 0, "on": 1, "off": 0, "": -1, "2": -1, "o": -1} {
		b, ok := parseBool(v)
		if got := map[bool]int{true: 1, false: 0}[b]; !ok && want != -1 || ok && got != want {
			t.Errorf("parseBool(%q) = %v, %v; want %d (-1: refused)", v, b, ok, want)
		}
	}
	for _, c := range []struct {
		name string
		ok   bool
	}{{"1", true}, {"128", true}, {"0", false}, {"129", false}, {"01", false}, {"+1", false}, {"x", false}} {
		if _, ok := parseID(c.name, 1, 128); ok != c.ok {
			t.Errorf("parseID(%q, 1, 128) ok = %v", c.name, ok)
		}
	}

	img := filepath.Join(t.TempDir(), "img")
	if err := os.WriteFile(img, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ns := &namespace{path: img, uuid: "u", grpid: 3, resv: true}
	args, err := ns.addArgs("S", 2)
	if want := "add namespace S -nsid 2 -backend file -path " + img + " -uuid u -ana-group 3 -reservations"; err != nil || strings.Join(args, " ") != want {
		t.Errorf("addArgs = %q, %v; want %q", strings.Join(args, " "), err, want)
	}
	ns = &namespace{backend: "nullblk", size: 1 << 20, blockSize: 4096, readOnly: true, uuid: "u", grpid: 1}
	args, err = ns.addArgs("S", 1)
	if want := "add namespace S -nsid 1 -backend nullblk -size 1048576 -block-size 4096 -read-only -uuid u"; err != nil || strings.Join(args, " ") != want {
		t.Errorf("addArgs of an adopted namespace = %q, %v; want %q", strings.Join(args, " "), err, want)
	}
	for _, p := range []string{"", filepath.Join(t.TempDir(), "missing"), "/dev/null", t.TempDir()} {
		if _, err := (&namespace{path: p, uuid: "u"}).addArgs("S", 1); err == nil {
			t.Errorf("addArgs with device_path %q: no error", p)
		}
	}
}

// shimAt mounts the shim on a daemon stub that keeps its state in
// testdata/stateful-ctl's state.json, starting from state.
func shimAt(t *testing.T, state string) (dir string, calls func() []string, ctlDir string) {
	t.Helper()
	needFUSE(t)
	tmp := t.TempDir()
	stub, err := os.ReadFile("testdata/stateful-ctl")
	if err != nil {
		t.Fatal(err)
	}
	tgt := filepath.Join(tmp, "nvmeof-tgt")
	if err := os.WriteFile(tgt, stub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "state.json"), []byte(state), 0o644); err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join(tmp, "nvmet")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	srv, err := mount(dir, &cfs{tgt: tgt})
	if err != nil {
		t.Fatalf("mount: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
		}
	})
	logf := filepath.Join(tmp, "log")
	// calls: the stub's calls that change something, since the last look.
	calls = func() []string {
		b, _ := os.ReadFile(logf)
		os.Remove(logf)
		var out []string
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if l != "" && l != "ctl list -json" {
				out = append(out, l)
			}
		}
		return out
	}
	return dir, calls, tmp
}

const twoPorts = `{"generation":1,
"ports":[{"id":1,"address":"10.0.0.1","port":4420},{"id":2,"address":"fd00::1","port":4421,"ana":{"1":"non_optimized"}}],
"subsystems":[
 {"nqn":"s1","hosts":["h1"],"ports":[],"namespaces":[{"nsid":1,"backend":"file","path":"IMG","size_bytes":1048576,"block_size":512,"read_only":false,"uuid":"91fdba0d-f87b-4c25-b80f-db7be1418b9e","ana_group":1}]},
 {"nqn":"s2","hosts":["h1"],"ports":[2],"namespaces":[]}]}`

func TestMountNamespaces(t *testing.T) {
	img := filepath.Join(t.TempDir(), "img")
	if err := os.WriteFile(img, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	dir, calls, ctlDir := shimAt(t, strings.ReplaceAll(twoPorts, "IMG", img))
	p := func(s string) string { return filepath.Join(dir, s) }
	read := func(s string) string {
		t.Helper()
		b, err := os.ReadFile(p(s))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSuffix(string(b), "\n")
	}
	write := func(s, v string) error { return os.WriteFile(p(s), []byte(v), 0o644) }
	expect := func(what string, err, wantErr error, wantCalls ...string) {
		t.Helper()
		if !errors.Is(err, wantErr) {
			t.Errorf("%s: error %v, want %v", what, err, wantErr)
		}
		if got := calls(); !slices.Equal(got, wantCalls) {
			t.Errorf("%s: calls\n%s\nwant\n%s", what, strings.Join(got, "\n"), strings.Join(wantCalls, "\n"))
		}
	}

	// setup's namespace, as the daemon has it (nvme/051).
	ns1 := "subsystems/s1/namespaces/1/"
	for f, want := range map[string]string{"enable": "1", "device_path": img, "device_uuid": "91fdba0d-f87b-4c25-b80f-db7be1418b9e",
		"device_nguid": zeroNGUID, "ana_grpid": "1", "resv_enable": "0"} {
		if got := read(ns1 + f); got != want {
			t.Errorf("%s reads %q, want %q", ns1+f, got, want)
		}
	}
	calls()
	readd := "ctl add namespace s1 -nsid 1 -backend file -path " + img + " -block-size 512 -uuid 91fdba0d-f87b-4c25-b80f-db7be1418b9e"
	expect("disable", write(ns1+"enable", "0\n"), nil, "ctl remove namespace s1 1")
	expect("disable again", write(ns1+"enable", "0\n"), nil)
	if got := read(ns1 + "enable"); got != "0" {
		t.Errorf("a disabled namespace's enable reads %q", got)
	}
	if _, err := os.Stat(p(ns1)); err != nil {
		t.Errorf("a disabled namespace's directory is gone: %v", err)
	}
	expect("enable", write(ns1+"enable", "1\n"), nil, readd)
	expect("enable again", write(ns1+"enable", "1\n"), nil)
	expect("a bad enable", write(ns1+"enable", "2\n"), syscall.EINVAL)
	expect("device_path while enabled", write(ns1+"device_path", img), syscall.EBUSY)
	expect("device_uuid while enabled", write(ns1+"device_uuid", "11111111-2222-3333-4444-555555555555"), syscall.EBUSY)
	expect("resv_enable while enabled", write(ns1+"resv_enable", "1"), syscall.EBUSY)
	expect("ana_grpid while enabled moves it", write(ns1+"ana_grpid", "2\n"), nil, "ctl set namespace s1 1 -ana-group 2")
	expect("ana_grpid out of range", write(ns1+"ana_grpid", "129\n"), syscall.EINVAL)
	if got := read(ns1 + "ana_grpid"); got != "2" {
		t.Errorf("ana_grpid reads %q after a move to 2", got)
	}

	// Both of nvme/051's loops at once: every write goes through whole,
	// and the namespace ends as the last write left it.
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				errs <- write(ns1+"enable", "0\n")
				errs <- write(ns1+"enable", "1\n")
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("concurrent enable/disable: %v", err)
		}
	}
	got := calls()
	if len(got) == 0 || got[len(got)-1] != readd+" -ana-group 2" {
		t.Errorf("concurrent enable/disable ended with %q", got)
	}
	for i, c := range got {
		want := "ctl remove namespace s1 1"
		if i%2 == 1 {
			want = readd + " -ana-group 2"
		}
		if c != want {
			t.Fatalf("concurrent enable/disable: call %d is %q, want %q (they must alternate)", i, c, want)
		}
	}

	// nvme/058's sequence on s2: mkdir, device_path, device_uuid,
	// ana_grpid, enable; then disable, a new UUID, enable.
	ns3 := "subsystems/s2/namespaces/3/"
	expect("mkdir of an existing namespace", os.Mkdir(p(ns1), 0o755), syscall.EEXIST)
	expect("mkdir of NSID 0", os.Mkdir(p("subsystems/s2/namespaces/0"), 0o755), syscall.EINVAL)
	expect("mkdir", os.Mkdir(p(ns3), 0o755), nil)
	if got := read(ns3 + "enable"); got != "0" {
		t.Errorf("a new namespace's enable reads %q", got)
	}
	if u := read(ns3 + "device_uuid"); !validUUID(u) {
		t.Errorf("a new namespace's device_uuid reads %q", u)
	}
	expect("enable without device_path", write(ns3+"enable", "1"), syscall.EINVAL)
	expect("device_path", write(ns3+"device_path", img), nil)
	expect("device_uuid", write(ns3+"device_uuid", "11111111-2222-3333-4444-555555555555"), nil)
	expect("a bad device_uuid", write(ns3+"device_uuid", "1111"), syscall.EINVAL)
	expect("device_nguid zero", write(ns3+"device_nguid", zeroNGUID), nil)
	expect("device_nguid the daemon cannot set", write(ns3+"device_nguid", "11111111-2222-3333-4444-555555555555"), syscall.EINVAL)
	expect("ana_grpid while disabled", write(ns3+"ana_grpid", "3"), nil)
	expect("enable", write(ns3+"enable", "1"), nil,
		"ctl add namespace s2 -nsid 3 -backend file -path "+img+" -uuid 11111111-2222-3333-4444-555555555555 -ana-group 3")
	expect("disable", write(ns3+"enable", "0"), nil, "ctl remove namespace s2 3")
	expect("new UUID", write(ns3+"device_uuid", "21111111-2222-3333-4444-555555555555"), nil)
	expect("remap", write(ns3+"enable", "1"), nil,
		"ctl add namespace s2 -nsid 3 -backend file -path "+img+" -block-size 512 -uuid 21111111-2222-3333-4444-555555555555 -ana-group 3")

	// resv_enable (nvme/054) goes with the next enable; a daemon without
	// reservations refuses it, and the namespace stays disabled.
	expect("disable", write(ns3+"enable", "0"), nil, "ctl remove namespace s2 3")
	expect("resv_enable", write(ns3+"resv_enable", "1"), nil)
	expect("a bad resv_enable", write(ns3+"resv_enable", "x"), syscall.EINVAL)
	withResv := "ctl add namespace s2 -nsid 3 -backend file -path " + img + " -block-size 512 -uuid 21111111-2222-3333-4444-555555555555 -ana-group 3 -reservations"
	if err := os.WriteFile(filepath.Join(ctlDir, "noresv"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	expect("enable with reservations, refused", write(ns3+"enable", "1"), syscall.EINVAL, withResv)
	if got := read(ns3 + "enable"); got != "0" {
		t.Errorf("a refused enable reads %q", got)
	}
	os.Remove(filepath.Join(ctlDir, "noresv"))
	expect("enable with reservations", write(ns3+"enable", "1"), nil, withResv)
	if got := read(ns3 + "resv_enable"); got != "1" {
		t.Errorf("resv_enable reads %q", got)
	}

	expect("rmdir an enabled namespace disables it", os.Remove(p(ns3)), nil, "ctl remove namespace s2 3")
	if ents, _ := os.ReadDir(p("subsystems/s2/namespaces")); len(ents) != 0 {
		t.Errorf("after rmdir, namespaces/ has %v", ents)
	}
	expect("mkdir of a subsystem", os.Mkdir(p("subsystems/s3"), 0o755), syscall.EPERM)
	if _, err := os.Stat(p("subsystems/s9")); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("a subsystem the daemon lacks: %v", err)
	}
}

func TestMountPorts(t *testing.T) {
	dir, calls, _ := shimAt(t, strings.ReplaceAll(twoPorts, "IMG", "/x"))
	p := func(s string) string { return filepath.Join(dir, s) }
	read := func(s string) string {
		t.Helper()
		b, err := os.ReadFile(p(s))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSuffix(string(b), "\n")
	}
	write := func(s, v string) error { return os.WriteFile(p(s), []byte(v), 0o644) }
	expect := func(what string, err, wantErr error, wantCalls ...string) {
		t.Helper()
		if !errors.Is(err, wantErr) {
			t.Errorf("%s: error %v, want %v", what, err, wantErr)
		}
		if got := calls(); !slices.Equal(got, wantCalls) {
			t.Errorf("%s: calls\n%s\nwant\n%s", what, strings.Join(got, "\n"), strings.Join(wantCalls, "\n"))
		}
	}
	names := func(s string) []string {
		t.Helper()
		ents, err := os.ReadDir(p(s))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range ents {
			out = append(out, e.Name())
		}
		return out
	}

	// What _get_nvmet_ports and _get_nvmet_port_params read.
	if got := names("ports"); !slices.Equal(got, []string{"1", "2"}) {
		t.Errorf("ports/ has %v", got)
	}
	for f, want := range map[string]string{"1/addr_trtype": "rdma", "1/addr_adrfam": "ipv4", "1/addr_traddr": "10.0.0.1",
		"1/addr_trsvcid": "4420", "2/addr_adrfam": "ipv6", "2/addr_traddr": "fd00::1", "2/addr_trsvcid": "4421"} {
		if got := read("ports/" + f); got != want {
			t.Errorf("ports/%s reads %q, want %q", f, got, want)
		}
	}
	if got := names("ports/1/subsystems"); !slices.Equal(got, []string{"s1"}) {
		t.Errorf("port 1 serves %v, want s1 (s2 is on port 2 only)", got)
	}
	if got := names("ports/2/subsystems"); !slices.Equal(got, []string{"s1", "s2"}) {
		t.Errorf("port 2 serves %v", got)
	}
	if _, err := os.Stat(p("ports/2/subsystems/s2/namespaces")); err != nil {
		t.Errorf("ports/2/subsystems/s2 does not lead to the subsystem: %v", err)
	}
	expect("an address write", write("ports/1/addr_traddr", "10.0.0.9"), syscall.EACCES)

	// ANA, as nvme/057 and 058 set it.
	if got := read("ports/1/ana_groups/1/ana_state"); got != "optimized" {
		t.Errorf("port 1 group 1 reads %q", got)
	}
	if got := read("ports/2/ana_groups/1/ana_state"); got != "non-optimized" {
		t.Errorf("port 2 group 1 reads %q, want nvmet's spelling", got)
	}
	expect("ana_state", write("ports/1/ana_groups/1/ana_state", "inaccessible\n"), nil, "ctl set ana 1 1 inaccessible")
	expect("ana_state non-optimized", write("ports/1/ana_groups/1/ana_state", "non-optimized\n"), nil, "ctl set ana 1 1 non_optimized")
	if got := read("ports/1/ana_groups/1/ana_state"); got != "non-optimized" {
		t.Errorf("group 1 reads %q after non-optimized", got)
	}
	expect("ana_state in the daemon's spelling", write("ports/1/ana_groups/1/ana_state", "non_optimized\n"), syscall.EINVAL)
	expect("mkdir group 2", os.Mkdir(p("ports/1/ana_groups/2"), 0o755), nil, "ctl set ana 1 2 inaccessible")
	if got := read("ports/1/ana_groups/2/ana_state"); got != "inaccessible" {
		t.Errorf("a new group reads %q, want inaccessible as in nvmet", got)
	}
	expect("group 2 optimized", write("ports/1/ana_groups/2/ana_state", "optimized"), nil, "ctl set ana 1 2 optimized")
	if got := names("ports/1/ana_groups"); !slices.Equal(got, []string{"1", "2"}) {
		t.Errorf("port 1's groups %v", got)
	}
	if got := names("ports/2/ana_groups"); !slices.Equal(got, []string{"1"}) {
		t.Errorf("port 2's groups %v: groups are per port", got)
	}
	expect("mkdir group 129", os.Mkdir(p("ports/1/ana_groups/129"), 0o755), syscall.EINVAL)
	expect("rmdir group 1", os.Remove(p("ports/1/ana_groups/1")), syscall.EPERM)
	expect("rmdir group 2", os.Remove(p("ports/1/ana_groups/2")), nil, "ctl set ana 1 2 inaccessible")
	if got := names("ports/1/ana_groups"); !slices.Equal(got, []string{"1"}) {
		t.Errorf("port 1's groups after rmdir %v", got)
	}
	expect("mkdir a port", os.Mkdir(p("ports/3"), 0o755), syscall.EPERM)
}
