package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/test/blktests/nvmet-cfs/fakedaemon"
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
	params := func(ns *namespace) string {
		t.Helper()
		p, err := ns.addParams("S", 2)
		if err != nil {
			return "error: " + err.Error()
		}
		b, _ := json.Marshal(p)
		return string(b)
	}
	if got, want := params(&namespace{path: img, uuid: "u", grpid: 3, resv: true}),
		`{"nqn":"S","nsid":2,"backend":"file","path":"`+img+`","uuid":"u","ana_group":3,"reservations":true}`; got != want {
		t.Errorf("addParams = %s, want %s", got, want)
	}
	if got, want := params(&namespace{backend: "nullblk", size: 1 << 20, blockSize: 4096, readOnly: true, uuid: "u", grpid: 1}),
		`{"nqn":"S","nsid":2,"backend":"nullblk","size":1048576,"block_size":4096,"read_only":true,"uuid":"u"}`; got != want {
		t.Errorf("addParams of an adopted namespace = %s, want %s", got, want)
	}
	for _, p := range []string{"", filepath.Join(t.TempDir(), "missing"), "/dev/null", t.TempDir()} {
		if _, err := (&namespace{path: p, uuid: "u"}).addParams("S", 1); err == nil {
			t.Errorf("addParams with device_path %q: no error", p)
		}
	}
}

// shimAt mounts the shim on a fake daemon that starts from state.
func shimAt(t *testing.T, state string) (*shim, *fakedaemon.Daemon) {
	t.Helper()
	needFUSE(t)
	f, sock, calls := startFake(t, state)
	return mountShim(t, &cfs{api: &apiClient{sock: sock}}, calls), f
}

const twoPorts = `{"generation":1,
"ports":[{"id":1,"address":"10.0.0.1","port":4420},{"id":2,"transport":"tcp","address":"fd00::1","port":4421,"ana":{"1":"non_optimized"}}],
"subsystems":[
 {"nqn":"s1","hosts":["h1"],"ports":[],"namespaces":[{"nsid":1,"backend":"file","path":"IMG","size_bytes":1048576,"block_size":512,"read_only":false,"uuid":"91fdba0d-f87b-4c25-b80f-db7be1418b9e","ana_group":1}]},
 {"nqn":"s2","hosts":["h1"],"ports":[2],"namespaces":[]}]}`

func TestMountNamespaces(t *testing.T) {
	img := filepath.Join(t.TempDir(), "img")
	if err := os.WriteFile(img, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	sh, f := shimAt(t, strings.ReplaceAll(twoPorts, "IMG", img))
	p, read, write, expect, calls := sh.path, sh.read, sh.write, sh.expect, sh.calls

	// setup's namespace, as the daemon has it (nvme/051).
	ns1 := "subsystems/s1/namespaces/1/"
	for f, want := range map[string]string{"enable": "1", "device_path": img, "device_uuid": "91fdba0d-f87b-4c25-b80f-db7be1418b9e",
		"device_nguid": zeroNGUID, "ana_grpid": "1", "resv_enable": "0"} {
		if got := read(ns1 + f); got != want {
			t.Errorf("%s reads %q, want %q", ns1+f, got, want)
		}
	}
	calls()
	readd := addCall("s1", 1, img, `"block_size":512,"uuid":"91fdba0d-f87b-4c25-b80f-db7be1418b9e"`)
	readd2 := strings.TrimSuffix(readd, "}") + `,"ana_group":2}`
	expect("disable", write(ns1+"enable", "0\n"), nil, removeCall("s1", 1))
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
	expect("ana_grpid while enabled moves it", write(ns1+"ana_grpid", "2\n"), nil, `set_namespace {"ana_group":2,"nqn":"s1","nsid":1}`)
	expect("ana_grpid out of range", write(ns1+"ana_grpid", "129\n"), syscall.EINVAL)
	if got := read(ns1 + "ana_grpid"); got != "2" {
		t.Errorf("ana_grpid reads %q after a move to 2", got)
	}

	concurrentEnables(sh, ns1, readd2)
	newNamespaceSequence(sh, f, img)
}

// concurrentEnables runs both of nvme/051's loops at once on ns1, whose
// enable adds it back with readd: every write goes through whole, and the
// namespace ends as the last write left it.
func concurrentEnables(sh *shim, ns1, readd string) {
	t, write := sh.t, sh.write
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
	got := sh.calls()
	if len(got) == 0 || got[len(got)-1] != readd {
		t.Errorf("concurrent enable/disable ended with %q", got)
	}
	for i, c := range got {
		want := removeCall("s1", 1)
		if i%2 == 1 {
			want = readd
		}
		if c != want {
			t.Fatalf("concurrent enable/disable: call %d is %q, want %q (they must alternate)", i, c, want)
		}
	}
}

// newNamespaceSequence runs nvme/058's sequence on s2: mkdir, device_path,
// device_uuid, ana_grpid, enable; then disable, a new UUID, enable; then
// reservations and rmdir. f is the daemon, img the namespace's file.
func newNamespaceSequence(sh *shim, f *fakedaemon.Daemon, img string) {
	t, p, read, write, expect := sh.t, sh.path, sh.read, sh.write, sh.expect
	ns1 := "subsystems/s1/namespaces/1/"
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
		addCall("s2", 3, img, `"uuid":"11111111-2222-3333-4444-555555555555","ana_group":3`))
	expect("disable", write(ns3+"enable", "0"), nil, removeCall("s2", 3))
	expect("new UUID", write(ns3+"device_uuid", "21111111-2222-3333-4444-555555555555"), nil)
	expect("remap", write(ns3+"enable", "1"), nil,
		addCall("s2", 3, img, `"block_size":512,"uuid":"21111111-2222-3333-4444-555555555555","ana_group":3`))

	// resv_enable (nvme/054) goes with the next enable; a daemon without
	// reservations refuses it, and the namespace stays disabled.
	expect("disable", write(ns3+"enable", "0"), nil, removeCall("s2", 3))
	expect("resv_enable", write(ns3+"resv_enable", "1"), nil)
	expect("a bad resv_enable", write(ns3+"resv_enable", "x"), syscall.EINVAL)
	withResv := addCall("s2", 3, img, `"block_size":512,"uuid":"21111111-2222-3333-4444-555555555555","ana_group":3,"reservations":true`)
	f.RefuseReservations(true)
	expect("enable with reservations, refused", write(ns3+"enable", "1"), syscall.EINVAL, withResv)
	if got := read(ns3 + "enable"); got != "0" {
		t.Errorf("a refused enable reads %q", got)
	}
	f.RefuseReservations(false)
	expect("enable with reservations", write(ns3+"enable", "1"), nil, withResv)
	if got := read(ns3 + "resv_enable"); got != "1" {
		t.Errorf("resv_enable reads %q", got)
	}

	expect("rmdir an enabled namespace disables it", os.Remove(p(ns3)), nil, removeCall("s2", 3))
	if ents, _ := os.ReadDir(p("subsystems/s2/namespaces")); len(ents) != 0 {
		t.Errorf("after rmdir, namespaces/ has %v", ents)
	}
	expect("mkdir of a subsystem", os.Mkdir(p("subsystems/s3"), 0o755), syscall.EPERM)
	if _, err := os.Stat(p("subsystems/s9")); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("a subsystem the daemon lacks: %v", err)
	}
}

// addCall is the add_namespace call for namespace nsid of nqn on the file
// img; rest is its parameters after the path.
func addCall(nqn string, nsid int, img, rest string) string {
	return fmt.Sprintf(`add_namespace {"nqn":%q,"nsid":%d,"backend":"file","path":%q,%s}`, nqn, nsid, img, rest)
}

func removeCall(nqn string, nsid int) string {
	return fmt.Sprintf(`remove_namespace {"nqn":%q,"nsid":%d}`, nqn, nsid)
}

func TestMountPorts(t *testing.T) {
	sh, _ := shimAt(t, strings.ReplaceAll(twoPorts, "IMG", "/x"))
	p, read, write, expect, names := sh.path, sh.read, sh.write, sh.expect, sh.names

	// What _get_nvmet_ports and _get_nvmet_port_params read.
	if got := names("ports"); !slices.Equal(got, []string{"1", "2"}) {
		t.Errorf("ports/ has %v", got)
	}
	for f, want := range map[string]string{"1/addr_trtype": "rdma", "1/addr_adrfam": "ipv4", "1/addr_traddr": "10.0.0.1",
		"1/addr_trsvcid": "4420", "2/addr_trtype": "tcp", "2/addr_adrfam": "ipv6", "2/addr_traddr": "fd00::1", "2/addr_trsvcid": "4421"} {
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
	expect("ana_state", write("ports/1/ana_groups/1/ana_state", "inaccessible\n"), nil, `set_ana_state {"group":1,"port":1,"state":"inaccessible"}`)
	expect("ana_state non-optimized", write("ports/1/ana_groups/1/ana_state", "non-optimized\n"), nil, `set_ana_state {"group":1,"port":1,"state":"non_optimized"}`)
	if got := read("ports/1/ana_groups/1/ana_state"); got != "non-optimized" {
		t.Errorf("group 1 reads %q after non-optimized", got)
	}
	expect("ana_state in the daemon's spelling", write("ports/1/ana_groups/1/ana_state", "non_optimized\n"), syscall.EINVAL)
	expect("mkdir group 2", os.Mkdir(p("ports/1/ana_groups/2"), 0o755), nil, `set_ana_state {"group":2,"port":1,"state":"inaccessible"}`)
	if got := read("ports/1/ana_groups/2/ana_state"); got != "inaccessible" {
		t.Errorf("a new group reads %q, want inaccessible as in nvmet", got)
	}
	expect("group 2 optimized", write("ports/1/ana_groups/2/ana_state", "optimized"), nil, `set_ana_state {"group":2,"port":1,"state":"optimized"}`)
	if got := names("ports/1/ana_groups"); !slices.Equal(got, []string{"1", "2"}) {
		t.Errorf("port 1's groups %v", got)
	}
	if got := names("ports/2/ana_groups"); !slices.Equal(got, []string{"1"}) {
		t.Errorf("port 2's groups %v: groups are per port", got)
	}
	expect("mkdir group 129", os.Mkdir(p("ports/1/ana_groups/129"), 0o755), syscall.EINVAL)
	expect("rmdir group 1", os.Remove(p("ports/1/ana_groups/1")), syscall.EPERM)
	expect("rmdir group 2", os.Remove(p("ports/1/ana_groups/2")), nil, `set_ana_state {"group":2,"port":1,"state":"inaccessible"}`)
	if got := names("ports/1/ana_groups"); !slices.Equal(got, []string{"1"}) {
		t.Errorf("port 1's groups after rmdir %v", got)
	}
	expect("mkdir a port", os.Mkdir(p("ports/3"), 0o755), syscall.EPERM)
}
