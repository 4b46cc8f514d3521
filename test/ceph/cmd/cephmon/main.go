// Command cephmon sends one command to the Ceph monitors and prints its
// output: the administration of the test cluster (test/ceph/cluster.sh
// and the e2e scenarios) through librados, where the ceph tool starts
// Python, which takes seconds in the emulated guest.
//
//	cephmon -conf FILE -keyring FILE [-name client.admin] [-in FILE] JSON
//
// JSON is the command as the monitors take it, e.g.
// '{"prefix": "osd dump", "format": "json"}'; -in gives its input (- for
// standard input). The output goes to standard output, the monitors'
// status line to standard error; a refused command exits 1.
package main

/*
#cgo LDFLAGS: -lrados
#include <stdlib.h>
#include <rados/librados.h>
*/
import "C"

import (
	"flag"
	"fmt"
	"io"
	"os"
	"syscall"
	"unsafe"
)

func main() {
	conf := flag.String("conf", "", "the cluster's ceph.conf")
	keyring := flag.String("keyring", "", "the client's keyring")
	name := flag.String("name", "client.admin", "the client's name")
	in := flag.String("in", "", "a file whose content is the command's input (- for standard input)")
	flag.Parse()
	if flag.NArg() != 1 || *conf == "" || *keyring == "" {
		fmt.Fprintln(os.Stderr, "usage: cephmon -conf FILE -keyring FILE [-name client.admin] [-in FILE] JSON")
		os.Exit(2)
	}
	var input []byte
	var err error
	switch *in {
	case "":
	case "-":
		input, err = io.ReadAll(os.Stdin)
	default:
		input, err = os.ReadFile(*in)
	}
	if err != nil {
		fail("reading the input: %v", err)
	}
	out, status, err := command(*conf, *keyring, *name, flag.Arg(0), input)
	os.Stdout.Write(out)
	if status != "" {
		fmt.Fprintln(os.Stderr, status)
	}
	if err != nil {
		fail("%s: %v", flag.Arg(0), err)
	}
}

func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "cephmon: "+format+"\n", a...)
	os.Exit(1)
}

// settings bound the client as the ceph tool's --connect-timeout 10 does,
// and each command's wait for the monitors.
var settings = [][2]string{{"client_mount_timeout", "10"}, {"rados_mon_op_timeout", "60"}}

func command(conf, keyring, name, cmd string, input []byte) (out []byte, status string, err error) {
	var cluster C.rados_t
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	if r := C.rados_create2(&cluster, nil, cname, 0); r < 0 {
		return nil, "", fmt.Errorf("rados_create2: %w", syscall.Errno(-r))
	}
	defer C.rados_shutdown(cluster)
	cconf := C.CString(conf)
	defer C.free(unsafe.Pointer(cconf))
	if r := C.rados_conf_read_file(cluster, cconf); r < 0 {
		return nil, "", fmt.Errorf("reading %s: %w", conf, syscall.Errno(-r))
	}
	for _, kv := range append(settings, [2]string{"keyring", keyring}) {
		k, v := C.CString(kv[0]), C.CString(kv[1])
		r := C.rados_conf_set(cluster, k, v)
		C.free(unsafe.Pointer(k))
		C.free(unsafe.Pointer(v))
		if r < 0 {
			return nil, "", fmt.Errorf("setting %s: %w", kv[0], syscall.Errno(-r))
		}
	}
	if r := C.rados_connect(cluster); r < 0 {
		return nil, "", fmt.Errorf("connecting to the monitors: %w", syscall.Errno(-r))
	}
	ccmd := C.CString(cmd)
	defer C.free(unsafe.Pointer(ccmd))
	cmds := (**C.char)(C.malloc(C.size_t(unsafe.Sizeof(ccmd))))
	defer C.free(unsafe.Pointer(cmds))
	*cmds = ccmd
	var inbuf *C.char
	if len(input) > 0 {
		inbuf = (*C.char)(C.CBytes(input))
		defer C.free(unsafe.Pointer(inbuf))
	}
	var outbuf, outs *C.char
	var outlen, outslen C.size_t
	r := C.rados_mon_command(cluster, cmds, 1, inbuf, C.size_t(len(input)), &outbuf, &outlen, &outs, &outslen)
	if outbuf != nil {
		out = C.GoBytes(unsafe.Pointer(outbuf), C.int(outlen))
		C.rados_buffer_free(outbuf)
	}
	if outs != nil {
		status = C.GoStringN(outs, C.int(outslen))
		C.rados_buffer_free(outs)
	}
	if r < 0 {
		return out, status, syscall.Errno(-r)
	}
	return out, status, nil
}
