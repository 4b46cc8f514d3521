package fabrics

import (
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// A Dataset Management command (deallocate) is one command of the write
// class and no bytes: its range descriptors name blocks, they are not
// data. It waits on write_iops, never on a bandwidth limit.
func TestQoSDatasetManagementIsAWriteOfNoBytes(t *testing.T) {
	dsm := func() nvme.Command {
		c := keyed(newCmd(nvme.IODatasetMgmt), 256*nvme.DSMRangeSize)
		c.SetNSID(1)
		c.SetCDW(10, 255)  // 256 ranges: 4 KiB of descriptors
		c.SetCDW(11, 1<<2) // deallocate
		return c
	}
	ranges := 256 * nvme.DSMRangeSize // all zero: one block each at LBA 0
	t.Run("bandwidth", func(t *testing.T) {
		g := newQoSRig(t, QoSLimits{Bandwidth: 1 << 20, WriteBandwidth: 1 << 20}) // bursts of 100 KiB
		a := g.host(testHost, 1)[0]
		g.submit(a, ioCmd(nvme.IOWrite, 1, 0, 256, 128<<10), 128<<10, "write")
		g.expectNext("write", "the write of the burst")
		g.submit(a, dsm(), ranges, "dsm") // the buckets are in debt
		if n := g.waiting(); n != 0 {
			t.Fatalf("a deallocate waits on the bandwidth limits (%d waiting), want it to go", n)
		}
		g.expectNext("dsm", "the deallocate")
	})
	t.Run("write iops", func(t *testing.T) {
		g := newQoSRig(t, QoSLimits{WriteIOPS: 10}) // a burst of 1
		a := g.host(testHost, 1)[0]
		g.submit(a, dsm(), ranges, "dsm 0")
		g.expectNext("dsm 0", "the deallocate of the burst")
		g.submit(a, dsm(), ranges, "dsm 1")
		g.read(a, "read")
		g.expectNext("read", "the read, which no limit holds")
		if n := g.waiting(); n != 1 {
			t.Fatalf("%d wait, want the second deallocate on write_iops", n)
		}
		g.clk.Advance(100 * time.Millisecond)
		g.expectNext("dsm 1", "the deallocate")
	})
}
