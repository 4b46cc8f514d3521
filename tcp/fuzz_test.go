package tcp

import (
	"io"
	"testing"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// seedStream is a valid start of a connection: ICReq, then an admin
// Connect with its data in the capsule, then a Property Set.
func seedStream(digests uint8) []byte {
	var out []byte
	var ic [ICReqSize]byte
	PutICReq(ic[:], PFV, 0, digests, 0)
	out = append(out, ic[:]...)
	hd := 0
	if digests&DigestHeader != 0 {
		hd = DigestSize
	}
	capsule := func(cmd nvme.Command, data []byte) {
		var flags uint8
		if hd > 0 {
			flags |= FlagHDGST
		}
		plen, pdo := CapsuleCmdHLen+hd, 0
		dd := 0
		if len(data) > 0 {
			if digests&DigestData != 0 {
				flags |= FlagDDGST
				dd = DigestSize
			}
			pdo = plen
			plen += len(data) + dd
		}
		b := make([]byte, CapsuleCmdHLen+hd)
		PutCommon(b, TypeCapsuleCmd, flags, CapsuleCmdHLen, uint8(pdo), uint32(plen))
		copy(b[CommonHeaderSize:], cmd)
		if hd > 0 {
			PutDigest(b[CapsuleCmdHLen:], Digest(b[:CapsuleCmdHLen]))
		}
		out = append(out, b...)
		out = append(out, data...)
		if dd > 0 {
			out = append(out, 0, 0, 0, 0)
			PutDigest(out[len(out)-4:], Digest(data))
		}
	}
	c := newCmd(nvme.OpFabrics)
	c.SetConnect(0, 31, 0)
	c.SGL().SetOffset(nvme.SGLDataBlockOffset, 0, nvme.ConnectDataSize)
	capsule(c, connectData(testNQN, 0xffff))
	c = newCmd(0)
	c.SetProperty(true, false, nvme.RegCC, nvme.CCEnable)
	capsule(c, nil)
	c = newCmd(nvme.AdminIdentify)
	transportSGL(c, nvme.IdentifySize)
	c.SetCDW(10, uint32(nvme.CNSController))
	capsule(c, nil)
	return out
}

// sendStream sends stream to the listener on a socket pair, closes the
// pair's writing half, and reads what the target sends until it closes
// the connection, or the timeout passes.
func sendStream(t testing.TB, l *Listener, stream []byte, timeout time.Duration) (*testHost, error) {
	t.Helper()
	h := pair(t, l)
	go func() {
		h.c.Write(stream)
		h.c.(interface{ CloseWrite() error }).CloseWrite()
	}()
	h.c.SetReadDeadline(time.Now().Add(timeout))
	_, err := io.Copy(io.Discard, h.c)
	return h, err
}

// Random PDU sequences never crash the connection's poller, and however
// the connection ends, it is torn down and every buffer goes back.
//
//	go test -run x -fuzz FuzzConnection -fuzzminimizetime 0 ./tcp/
//
// (with minimizing on, the fuzzer stalls for minutes on each new input:
// 2400 inputs a second, 71528 in 25 s, without it).
func FuzzConnection(f *testing.F) {
	f.Add(seedStream(0))
	f.Add(seedStream(DigestHeader | DigestData))
	f.Add(append(seedStream(0), seedStream(0)[ICReqSize:]...))
	l := targetListener(f)
	f.Fuzz(func(t *testing.T, stream []byte) {
		if _, err := sendStream(t, l, stream, 5*time.Second); err != nil {
			t.Fatalf("the target did not close the connection: %v", err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for l.QueuePairs() != 0 || l.srv.pool.Lent() != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d connections open, %d pool bytes lent after the host went", l.QueuePairs(), l.srv.pool.Lent())
			}
			time.Sleep(time.Millisecond)
		}
	})
}
