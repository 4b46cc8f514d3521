package rdmahost

import (
	"bytes"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// The private data is what the target's listener parses: a queue of
// hsqsize+1 entries, as many responses.
func TestCMRequest(t *testing.T) {
	b := CMRequest(3, 127)
	r, err := nvme.ParseCMRequest(b, 128)
	if err != nil {
		t.Fatal(err)
	}
	if r.QID != 3 || r.HSQSize != 127 || r.HRQSize != 128 || r.RecFmt != 0 || r.RecvDepth() != 128 {
		t.Fatalf("parsed %+v", r)
	}
	// One entry more than the target takes is refused, so the encoding
	// is not just passing through.
	if _, err := nvme.ParseCMRequest(CMRequest(3, 128), 128); err == nil {
		t.Fatal("a queue of 129 entries passed a limit of 128")
	}
}

func TestConnect(t *testing.T) {
	c := ConnectCommand(7, 2, 31, 5000)
	v := nvme.Command(c[:])
	if v.Opcode() != nvme.OpFabrics || v.FabricsType() != nvme.FabricsConnect || v.CID() != 7 {
		t.Fatalf("opcode %#x type %#x cid %d", v.Opcode(), v.FabricsType(), v.CID())
	}
	if v.ConnectQID() != 2 || v.ConnectSQSize() != 31 || v.ConnectKATO() != 5000 || v.ConnectRecFmt() != 0 {
		t.Fatalf("qid %d sqsize %d kato %d recfmt %d", v.ConnectQID(), v.ConnectSQSize(), v.ConnectKATO(), v.ConnectRecFmt())
	}
	// The data in the capsule: an offset descriptor at 0 for all 1024 bytes.
	sgl := v.SGL()
	if sgl.ID() != nvme.SGLDataBlockOffset || sgl.Address() != 0 || sgl.Length() != nvme.ConnectDataSize {
		t.Fatalf("SGL %x", []byte(sgl))
	}
	d, err := nvme.ParseConnectData(ConnectData("nqn.host", "nqn.sub", 0x12))
	if err != nil {
		t.Fatal(err)
	}
	if d.HostNQN != "nqn.host" || d.SubNQN != "nqn.sub" || d.CNTLID != 0x12 || d.HostID == [16]byte{} {
		t.Fatalf("connect data %+v", d)
	}
}

func TestKeyedCommands(t *testing.T) {
	c := ReadCommand(9, 1, 800, 8, 0x1000, 4096, 0xabcd)
	v := nvme.Command(c[:])
	if v.Opcode() != nvme.IORead || v.NSID() != 1 || v.SLBA() != 800 || v.NLB() != 7 || v.CID() != 9 {
		t.Fatalf("read: opcode %#x nsid %d slba %d nlb %d cid %d", v.Opcode(), v.NSID(), v.SLBA(), v.NLB(), v.CID())
	}
	if s := v.SGL(); s.ID() != nvme.SGLKeyed || s.Address() != 0x1000 || s.KeyedLength() != 4096 || s.Key() != 0xabcd {
		t.Fatalf("read SGL %x", []byte(s))
	}
	if v.Flags() != nvme.PSDTSGLContig {
		t.Fatalf("flags %#x: the target takes SGLs only", v.Flags())
	}
	c = IdentifyCommand(4, nvme.CNSNamespace, 1, 0x2000, 5)
	v = nvme.Command(c[:])
	if v.Opcode() != nvme.AdminIdentify || v.CNS() != nvme.CNSNamespace || v.NSID() != 1 || v.SGL().KeyedLength() != 4096 {
		t.Fatalf("identify %x", c)
	}
	c = WriteCommand(6, 2, 16, 256, 0x3000, 1<<20, 0x77)
	v = nvme.Command(c[:])
	if v.Opcode() != nvme.IOWrite || v.NSID() != 2 || v.SLBA() != 16 || v.NLB() != 255 || v.SGL().KeyedLength() != 1<<20 || v.SGL().Key() != 0x77 {
		t.Fatalf("write %x", c)
	}
	c = WriteInlineCommand(7, 1, 3, 1, 512)
	v = nvme.Command(c[:])
	if s := v.SGL(); v.Opcode() != nvme.IOWrite || v.NLB() != 0 || s.ID() != nvme.SGLDataBlockOffset || s.Address() != 0 || s.Length() != 512 {
		t.Fatalf("in-capsule write %x", c)
	}
	c = KeepAliveCommand(5)
	v = nvme.Command(c[:])
	if v.Opcode() != nvme.AdminKeepAlive || v.SGL().KeyedLength() != 0 || v.SGL().ID() != nvme.SGLKeyed {
		t.Fatalf("keep alive %x", c)
	}
}

func TestProperties(t *testing.T) {
	c := PropertySetCommand(1, nvme.RegCC, 0x460001)
	v := nvme.Command(c[:])
	if v.FabricsType() != nvme.FabricsPropertySet || v.PropertyOffset() != nvme.RegCC || v.PropertyValue() != 0x460001 || v.PropertySize8() {
		t.Fatalf("property set %x", c)
	}
	c = PropertyGetCommand(2, nvme.RegCSTS)
	v = nvme.Command(c[:])
	if v.FabricsType() != nvme.FabricsPropertyGet || v.PropertyOffset() != nvme.RegCSTS {
		t.Fatalf("property get %x", c)
	}
}

func TestResponse(t *testing.T) {
	var r Response
	nvme.Completion(r[:]).Set(0x2a, 3, 0, 77, nvme.StatusConnectInvalidParam|nvme.DNR)
	if CID(r) != 77 || Result(r) != 0x2a || Status(r) != uint16(nvme.StatusConnectInvalidParam|nvme.DNR) {
		t.Fatalf("cid %d result %#x status %#x", CID(r), Result(r), Status(r))
	}
	if !bytes.Equal(r[:4], []byte{0x2a, 0, 0, 0}) {
		t.Fatalf("DW0 %x", r[:4])
	}
}
