package nvme

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

func TestCommandFields(t *testing.T) {
	c := make(Command, CommandSize)
	c.SetOpcode(IORead)
	c.SetFlags(PSDTSGLContig)
	c.SetCID(0xbeef)
	c.SetNSID(7)
	c.SetSLBA(0x1122334455)
	c.SetCDW(12, 15)
	c.SGL().SetKeyed(0xdead0000, 0x12345, 0xcafe, true)
	checks := []struct {
		name      string
		got, want uint64
	}{
		{"opcode", uint64(c.Opcode()), IORead},
		{"cid", uint64(c.CID()), 0xbeef},
		{"nsid", uint64(c.NSID()), 7},
		{"slba", c.SLBA(), 0x1122334455},
		{"nlb", uint64(c.NLB()), 15},
		{"sgl id", uint64(c.SGL().ID()), SGLKeyedInvalidate},
		{"sgl addr", c.SGL().Address(), 0xdead0000},
		{"sgl len", uint64(c.SGL().KeyedLength()), 0x12345},
		{"sgl key", uint64(c.SGL().Key()), 0xcafe},
		{"dptr offset", uint64(bytes.Index(c, []byte{0, 0, 0xad, 0xde})), 24},
	}
	for _, ck := range checks {
		t.Run(ck.name, func(t *testing.T) {
			if ck.got != ck.want {
				t.Fatalf("got %#x, want %#x", ck.got, ck.want)
			}
		})
	}
}

func TestCompletionLayout(t *testing.T) {
	c := make(Completion, CompletionSize)
	c.Set(0x0102030405060708, 3, 1, 0x77, StatusLBARange|DNR)
	want := []byte{8, 7, 6, 5, 4, 3, 2, 1, 3, 0, 1, 0, 0x77, 0, 0x00, 0x81}
	if !bytes.Equal(c, want) {
		t.Fatalf("completion %x, want %x", []byte(c), want)
	}
	if c.Status() != StatusLBARange|DNR || c.CID() != 0x77 {
		t.Fatalf("decoded status %v cid %d", c.Status(), c.CID())
	}
}

func TestIdentifyControllerOffsets(t *testing.T) {
	b := make([]byte, IdentifySize)
	id := IdentifyController{Serial: "SN", Model: "MODEL", CNTLID: 0x1234, MaxCmd: 128, SGLS: SGLSKeyed,
		SubNQN: "nqn.x", IOCCSZ: 516, KAS: 1, NN: 1024, VWC: 1}
	id.Encode(b)
	checks := map[string][2]int{
		"serial":  {4, 'S'},
		"model":   {24, 'M'},
		"cntlid":  {78, 0x34},
		"kas":     {320, 1},
		"sqes":    {512, 0x66},
		"cqes":    {513, 0x44},
		"maxcmd":  {514, 128},
		"nn":      {517, 4},
		"vwc":     {525, 1},
		"sgls":    {536, SGLSKeyed},
		"subnqn":  {768, 'n'},
		"ioccsz":  {1792, 516 & 0xff},
		"padding": {6, ' '},
	}
	for name, c := range checks {
		if int(b[c[0]]) != c[1] {
			t.Errorf("%s: byte %d = %#x, want %#x", name, c[0], b[c[0]], c[1])
		}
	}
}

func TestIdentifyNamespaceOffsets(t *testing.T) {
	b := make([]byte, IdentifySize)
	ns := IdentifyNamespace{Blocks: 0x10000, BlockShift: 12, WriteProtect: true, NGUID: [16]byte{0xaa}}
	ns.Encode(b)
	if b[2] != 1 || b[10] != 1 || b[18] != 1 || b[130] != 12 || b[99] != 1 || b[104] != 0xaa {
		t.Fatalf("nsze %x ncap %x nuse %x lbads %d nsattr %d nguid %x", b[0:8], b[8:16], b[16:24], b[130], b[99], b[104])
	}
}

func TestDiscoveryEntry(t *testing.T) {
	b := make([]byte, DiscoveryEntSize)
	e := DiscoveryEntry{TransportType: TransportRDMA, AddrFamily: AddrFamilyIPv4, Subtype: SubtypeNVM,
		PortID: 1, CNTLID: 0xffff, ASQSZ: 32, TRSVCID: "4420", SubNQN: "nqn.a", TRADDR: "10.0.0.1"}
	e.Encode(b)
	if string(b[32:36]) != "4420" || string(b[256:261]) != "nqn.a" || string(b[512:520]) != "10.0.0.1" ||
		b[768] != RDMAQPTypeConnected || b[770] != RDMACMSRDMACM || b[8] != 32 {
		t.Fatalf("entry encoded wrong: %x", b[:16])
	}
	if got, err := ParseDiscoveryEntry(b); err != nil || got != e {
		t.Fatalf("decoded %+v (%v), want %+v", got, err, e)
	}
	if _, err := ParseDiscoveryEntry(b[:DiscoveryEntSize-1]); err != ErrShortDiscoveryLog {
		t.Fatalf("short record: %v", err)
	}
	hdr := make([]byte, DiscoveryHdrSize)
	PutDiscoveryHeader(hdr, 7, 3)
	if h, err := ParseDiscoveryHeader(hdr); err != nil || h != (DiscoveryHeader{GenCtr: 7, NumRec: 3}) {
		t.Fatalf("header %+v (%v)", h, err)
	}
}

func TestConnectDataRoundTrip(t *testing.T) {
	b := make([]byte, ConnectDataSize)
	in := ConnectData{HostID: [16]byte{1, 2}, CNTLID: 0xffff, SubNQN: "nqn.sub", HostNQN: "nqn.host"}
	in.Encode(b)
	out, err := ParseConnectData(b)
	if err != nil || out != in {
		t.Fatalf("round trip: %+v, %v", out, err)
	}
	if _, err := ParseConnectData(b[:100]); !errors.Is(err, ErrConnectData) {
		t.Fatalf("short data: %v", err)
	}
	b[256] = 0
	if _, err := ParseConnectData(b); !errors.Is(err, ErrConnectData) {
		t.Fatalf("empty subnqn: %v", err)
	}
}

func TestParseCMRequest(t *testing.T) {
	enc := func(r CMRequest) []byte {
		b := make([]byte, 56) // RoCE reports 56 bytes
		r.Encode(b)
		return b
	}
	cases := []struct {
		name   string
		data   []byte
		reject uint16
	}{
		{"admin", enc(CMRequest{QID: 0, HRQSize: 32, HSQSize: 31}), 0},
		{"io", enc(CMRequest{QID: 1, HRQSize: 128, HSQSize: 127}), 0},
		{"short", make([]byte, 16), CMRejectInvalidLength},
		{"recfmt", enc(CMRequest{RecFmt: 1, HRQSize: 32, HSQSize: 31}), CMRejectInvalidRecFmt},
		{"hsqsize too big", enc(CMRequest{QID: 1, HRQSize: 128, HSQSize: 128}), CMRejectInvalidHSQSize},
		{"hrqsize zero", enc(CMRequest{QID: 1, HRQSize: 0, HSQSize: 127}), CMRejectInvalidHRQSize},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseCMRequest(tc.data, 128)
			var cmErr *CMRequestError
			switch {
			case tc.reject == 0 && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tc.reject == 0 && r.RecvDepth() != int(r.HSQSize)+1:
				t.Fatalf("depth %d", r.RecvDepth())
			case tc.reject != 0 && (!errors.As(err, &cmErr) || cmErr.Reject != tc.reject || !errors.Is(err, ErrCMRequest)):
				t.Fatalf("error %v, want reject %d", err, tc.reject)
			}
		})
	}
}

// The CC entry sizes fabrics allows are the sizes of the entries.
func TestCCEntrySizes(t *testing.T) {
	if 1<<CCIOSQE != CommandSize || 1<<CCIOCQE != CompletionSize {
		t.Fatalf("IOSQES %d, IOCQES %d for %d- and %d-byte entries", CCIOSQE, CCIOCQE, CommandSize, CompletionSize)
	}
}

// Abort names its command in CDW10: the SQID in bits 15:0, the CID in
// 31:16.
func TestAbortFields(t *testing.T) {
	c := make(Command, CommandSize)
	c.SetAbort(3, 0xbeef)
	if got := binary.LittleEndian.Uint32(c[40:]); got != 0xbeef0003 {
		t.Fatalf("CDW10 %#x, want 0xbeef0003", got)
	}
	if c.AbortSQID() != 3 || c.AbortCID() != 0xbeef {
		t.Fatalf("SQID %d CID %#x", c.AbortSQID(), c.AbortCID())
	}
}
