package tcp

import (
	"bytes"
	"encoding/binary"
	"os"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// A host connects over loopback TCP, identifies the controller and
// namespace, and writes (in-capsule and on R2T, up to 1 MiB, in several
// H2CData PDUs) and reads back through a file namespace, with and without
// header and data digests.
func TestConnectIdentifyReadWrite(t *testing.T) {
	for _, c := range []struct {
		name   string
		hd, dd bool
	}{{"plain", false, false}, {"header digest", true, false}, {"data digest", false, true}, {"both digests", true, true}} {
		t.Run(c.name, func(t *testing.T) {
			tg, p, path := testTarget(t)
			l := testListener(t, tg, p)
			admin := dial(t, l)
			admin.icreq(c.hd, c.dd)
			admin.connectAdmin(testNQN)
			id, st := admin.identify(nvme.CNSController, 0)
			if st != 0 {
				t.Fatalf("identify controller: %v", st)
			}
			if got := string(bytes.TrimRight(id[768:1024], "\x00")); got != testNQN {
				t.Errorf("SUBNQN %q", got)
			}
			if sgls := binary.LittleEndian.Uint32(id[536:]); sgls&3 == 0 {
				t.Errorf("SGLS %#x: the Linux host wants SGL support", sgls)
			}
			if icdoff := binary.LittleEndian.Uint16(id[1798:]); icdoff != 0 {
				t.Errorf("ICDOFF %d: the Linux host supports 0 only", icdoff)
			}

			io := dial(t, l)
			io.icreq(c.hd, c.dd)
			if st := io.connectIO(testNQN, admin.cntl, false); st != 0 {
				t.Fatalf("I/O connect on R2T: %v", st)
			}
			small := bytes.Repeat([]byte{0xcd}, 4096)
			if st := io.write(8, small, true); st != 0 {
				t.Fatalf("in-capsule write: %v", st)
			}
			big := make([]byte, 1<<20)
			for i := range big {
				big[i] = byte(i * 7)
			}
			if st := io.write(16, big, false); st != 0 {
				t.Fatalf("1 MiB write: %v", st)
			}
			got := make([]byte, len(big))
			if st := io.read(16, got); st != 0 {
				t.Fatalf("read: %v", st)
			}
			if !bytes.Equal(got, big) {
				t.Fatal("read back differs from what was written")
			}
			got = got[:4096]
			if st := io.read(8, got); st != 0 || !bytes.Equal(got, small) {
				t.Fatalf("in-capsule write read back: status %v, equal %v", st, bytes.Equal(got, small))
			}
			file, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(file[16*512:16*512+len(big)], big) {
				t.Fatal("the file does not hold what was written")
			}
		})
	}
}
