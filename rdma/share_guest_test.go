package rdma

import (
	"fmt"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/backend"
	"github.com/nvmeof-tgt/nvmeof-tgt/test/rdmahost"
)

// shareTestPort is apart from the daemon's 4420 and the other guest tests'.
const shareTestPort = 4433

const (
	shareTestNQN  = "nqn.2026-11.io.example:rdma-share"
	shareTestHost = "nqn.2026-11.io.example:rdma-share-host"
	shareTestPool = 16 * maxBlock
	shareTestLBA  = 512
)

// A host that fills its I/O queue with 1 MiB reads and never takes a
// response holds their data blocks for as long as it likes: its device
// never acknowledges the first response SEND (RNR), and every later
// response waits behind it. It holds at most its share of the pool, or
// what is free past the reserve: another host's 1 MiB reads are served
// meanwhile.
func TestGuestHostThatNeverTakesResponsesHoldsItsShare(t *testing.T) {
	b, err := backend.Open("nullblk", backend.Options{Size: 64 << 20, BlockSize: shareTestLBA})
	if err != nil {
		t.Fatal(err)
	}
	g := listenGuest(t, guestSetup{portID: 9, serviceID: shareTestPort, nqn: shareTestNQN, ns: b,
		settings: &Settings{BufferPool: shareTestPool, SharedReceiveQueue: true, ReceiveQueueDepth: DefaultReceiveQueueDepth}})

	// The well-behaved host first, so that both I/O queues count in the
	// shares when the other fills its queue.
	good := g.controller(t, shareTestHost, 32, rdmahost.Options{Large: maxBlock})
	hostile := g.controller(t, shareTestHost, 32, rdmahost.Options{Large: maxBlock, Receives: 1})
	inUse := poolInUse()

	nlb := uint16(maxBlock / shareTestLBA)
	bufAddr, rkey, _ := hostile.LargeData()
	for range 32 {
		if err := hostile.SendCapsule(rdmahost.ReadCommand(hostile.NextCID(), 1, 0, nlb, bufAddr, maxBlock, rkey), nil); err != nil {
			t.Fatal(err)
		}
	}
	// It holds blocks once its reads executed: their responses wait on
	// its device. Past the reserve it may hold nothing; before the fix
	// it held the whole main region.
	least := int64(shareTestPool/2 - 2*maxBlock)
	waitFor(t, 10*time.Second, func() bool { return poolInUse()-inUse >= least }, func() string {
		return fmt.Sprintf("the host that takes no responses holds %d MiB, want at least %d MiB for this test to mean anything", (poolInUse()-inUse)>>20, least>>20)
	})
	t.Logf("the host that takes no responses holds %d MiB of a %d MiB pool", (poolInUse()-inUse)>>20, shareTestPool>>20)

	bufAddr, rkey, _ = good.LargeData()
	for i := range 8 {
		cid := good.NextCID()
		r, err := good.Command(rdmahost.ReadCommand(cid, 1, uint64(i)*uint64(nlb), nlb, bufAddr, maxBlock, rkey), nil)
		if err != nil || rdmahost.Status(r) != 0 {
			t.Fatalf("1 MiB read %d of the other host, with %d MiB of the pool held: %x, %v", i, (poolInUse()-inUse)>>20, r, err)
		}
	}
}
