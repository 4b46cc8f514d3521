//go:build !norbd

package backend

import (
	"bytes"
	"errors"
	"strings"
	"syscall"
	"testing"

	cephtest "github.com/nvmeof-tgt/nvmeof-tgt/test/ceph"
)

// Two openers of one image set a metadata key with a compare-and-set: the
// one that read an older value is refused with ECANCELED and the value
// stays; the key is the image's metadata, as rbd image-meta shows it.
func TestRBDMetadataCompareAndSet(t *testing.T) {
	env := cephtest.Use(t)
	a := openTestImage(t, env, "meta", 4<<20).(ImageMetadata)
	o := rbdOpts(env, "meta")
	bb, err := Open("rbd", Options{BlockSize: 512, RBD: o})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bb.Close() })
	b := bb.(ImageMetadata)

	const key = "test.cas"
	if v, err := a.Metadata(key); v != nil || err != nil {
		t.Fatalf("unset key: %q, %v", v, err)
	}
	v1 := []byte(`{"a":1}`)
	if err := a.CompareAndSetMetadata(key, nil, v1); err != nil {
		t.Fatalf("first set of an unset key: %v", err)
	}
	if v, err := b.Metadata(key); !bytes.Equal(v, v1) || err != nil {
		t.Fatalf("b reads %q, %v; want %q", v, err, v1)
	}
	// b, which saw the key unset, is stale now.
	if err := b.CompareAndSetMetadata(key, nil, []byte("stale")); !errors.Is(err, syscall.ECANCELED) {
		t.Fatalf("a set from a stale value: %v, want ECANCELED", err)
	}
	v2 := []byte("b\x00binary")
	if err := b.CompareAndSetMetadata(key, v1, v2); err != nil {
		t.Fatal(err)
	}
	if err := a.CompareAndSetMetadata(key, v1, []byte("stale")); !errors.Is(err, syscall.ECANCELED) {
		t.Fatalf("a's set from the value b replaced: %v, want ECANCELED", err)
	}
	if v, err := a.Metadata(key); !bytes.Equal(v, v2) || err != nil {
		t.Fatalf("after the refused set: %q, %v; want b's %q", v, err, v2)
	}
	if out := rbdCLI(t, env, "image-meta", "list", o.Pool+"/"+o.Image); !strings.Contains(out, key) {
		t.Fatalf("rbd image-meta list does not show %s:\n%s", key, out)
	}
}
