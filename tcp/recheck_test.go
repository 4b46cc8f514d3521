package tcp

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/backend"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// A write waiting for a pool buffer that another host holds does not
// hold up a change of access: hiding its namespace from its host fails
// it with Invalid Namespace at once, while the other host still holds
// every buffer, and the change returns without waiting out its timeout.
func TestHidingEndsWritesWaitingForABuffer(t *testing.T) {
	tg, p, _ := testTarget(t)
	s := tg.Subsystem(testNQN)
	b, err := backend.Open("file", backend.Options{Path: filepath.Join(t.TempDir(), "ns2.img"), Size: 4 << 20, BlockSize: 512, Buffered: true})
	if err != nil {
		t.Fatal(err)
	}
	ns2, err := fabrics.NewNamespace(2, b, false, [16]byte{2})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AddNamespace(ns2); err != nil {
		t.Fatal(err)
	}
	l := testListener(t, tg, p)
	l.srv.pool = NewPool(MaxBuffer) // no reserve: one 1 MiB write holds it all

	// One host's write to namespace 2 holds the whole pool on its R2T.
	holder := ioHost(t, l, false, false)
	waiter := ioHost(t, l, false, false) // connected first: Connect's data takes a buffer
	holder.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	rwCmd(holder.cmd[:], nvme.IOWrite, 0, MaxBuffer, false)
	nvme.Command(holder.cmd[:]).SetNSID(2)
	holder.cid++
	nvme.Command(holder.cmd[:]).SetCID(holder.cid)
	holder.sendCapsule(holder.cmd[:], nil)
	r2t, err := holder.readPDU(nil)
	if err != nil || r2t.Type() != TypeR2T {
		t.Fatalf("R2T: %v", err)
	}
	cid, ttag := r2t.CID(), r2t.TTag()

	// Another connection's write to namespace 1, admitted, waits for a
	// buffer.
	waiter.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	waiter.cid++
	waiter.sendWrite(waiter.cid, 0, make([]byte, MaxBuffer), false)
	waitStarving(t, l.srv.pool)

	done := make(chan error, 1)
	go func() { done <- s.SetNamespaceHosts(1, []string{"nqn.2014-08.org.nvmexpress:uuid:other"}) }()
	waiter.expectResponse(waiter.cid, nil, nvme.StatusInvalidNamespace|nvme.DNR)
	if lent := l.srv.pool.Lent(); lent != MaxBuffer {
		t.Fatalf("the pool lends %d bytes when the refused write completed; want the holder's %d still lent", lent, MaxBuffer)
	}
	if err := <-done; err != nil {
		t.Fatalf("hiding the namespace: %v", err)
	}

	data := bytes.Repeat([]byte{0x5a}, MaxBuffer)
	for off := 0; off < MaxBuffer; off += MaxH2CData {
		holder.sendH2C(cid, ttag, uint32(off), data[off:off+MaxH2CData], off+MaxH2CData == MaxBuffer)
	}
	holder.expectResponse(cid, nil, 0)
	waitLent(t, l.srv.pool, 0)
}
