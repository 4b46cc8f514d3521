package rdma

import (
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/test/rdmahost"
)

// A connection refused for want of a place is rejected and counted as
// place_refused whichever cap refused it, here the peer address's cap of
// queue pairs waiting for their Connect.
func TestGuestPlaceRefusalIsCountedAsSuch(t *testing.T) {
	g := startGuestTarget(t)
	g.tg.SetQueuePairCaps(1, 0)
	key := fabrics.RefusedKey{Reason: placeRefused, Port: 1}
	before := rejects.Counts()[key]
	held := g.dial(t, 0, 32) // never connects: holds the address's one place
	defer held.Close()
	if c, err := rdmahost.Dial(g.addr, guestPort, 0, 31); err == nil {
		c.Close()
		t.Fatal("a second queue pair from the address was accepted past its cap of 1")
	}
	if n := rejects.Counts()[key] - before; n != 1 {
		t.Fatalf("%d rejects counted as %s, want 1: %v", n, placeRefused, rejects.Counts())
	}
}
