package nvme

import (
	"encoding/binary"
	"testing"
)

// Offsets pinned to the NVMe base and NVMe over Fabrics specifications,
// so that renaming a constant cannot move a field.
var pinnedOffsets = []struct {
	name      string
	got, want int
}{
	{"SMART critical warning", smartCriticalWarning, 0},
	{"SMART composite temperature", smartTemperature, 1},
	{"SMART data units read", smartDataUnitsRead, 32},
	{"SMART data units written", smartDataUnitsWrite, 48},
	{"SMART host read commands", smartHostReads, 64},
	{"SMART controller busy time", smartBusyTime, 96},
	{"SMART power on hours", smartPowerOnHours, 128},
	{"SMART media errors", smartMediaErrors, 160},
	{"SMART error log entries", smartErrorEntries, 176},
	{"error log SQID", errSQID, 8},
	{"error log status", errStatus, 12},
	{"error log LBA", errLBA, 16},
	{"error log NSID", errNSID, 24},
	{"error log transport type", errTransport, 29},
	{"effects I/O commands", EffectsIOOff, 1024},
	{"discovery NUMREC", discNumRec, 8},
	{"discovery entry TRSVCID", discTRSvcID, 32},
	{"discovery entry SUBNQN", discSubNQN, 256},
	{"discovery entry TRADDR", discTRAddr, 512},
	{"discovery entry TSAS", discTSAS, 768},
	{"connect QID", connectQID, 42},
	{"connect SQSIZE", connectSQSize, 44},
	{"connect CATTR", connectCAttr, 46},
	{"connect KATO", connectKATO, 48},
	{"connect data CNTLID", ConnectDataCNTLID, 16},
	{"connect data SUBNQN", ConnectDataSubNQN, 256},
	{"connect data HOSTNQN", ConnectDataHostNQN, 512},
	{"property ATTRIB", propertyAttrib, 40},
	{"property OFST", propertyOffset, 44},
	{"property VALUE", propertyValue, 48},
	{"CM request HRQSIZE", cmReqHRQSize, 4},
	{"CM request HSQSIZE", cmReqHSQSize, 6},
	{"CM request CNTLID", cmReqCNTLID, 8},
	{"CM accept CRQSIZE", cmAccCRQSize, 2},
	{"CM reject status", cmRejStatus, 2},
	{"Identify Controller ANATT", idANATT, 342},
	{"Identify Controller ANACAP", idANACAP, 343},
	{"Identify Controller ANAGRPMAX", idANAGRPMX, 344},
	{"Identify Controller NANAGRPID", idNANAGRP, 348},
	{"Identify Namespace ANAGRPID", nsANAGRP, 92},
	{"ANA log NGRPS", anaHdrNumGrps, 8},
	{"ANA log descriptors", ANALogHdrSize, 16},
	{"ANA group NNSIDS", anaGrpNumNSIDs, 4},
	{"ANA group change count", anaGrpChgCnt, 8},
	{"ANA group state", anaGrpState, 16},
	{"ANA group NSIDs", ANAGroupSize, 32},
	{"SGL key", sglKey, 11},
	{"SGL identifier", sglID, 15},
}

func TestPinnedOffsets(t *testing.T) {
	for _, p := range pinnedOffsets {
		if p.got != p.want {
			t.Errorf("%s at %d, the specification has %d", p.name, p.got, p.want)
		}
	}
}

// The CDW12 bits the target acts on, and Dataset Management's range.
func TestIOCommandBits(t *testing.T) {
	c := make(Command, CommandSize)
	c.SetCDW(12, 1<<30|1<<25|0xffff)
	c.SetCDW(10, 3)
	c.SetCDW(11, 1<<2)
	if !c.FUA() || !c.DEAC() || c.NLB() != 0xffff || c.DSMRanges() != 4 || !c.DSMDeallocate() {
		t.Fatalf("FUA %v DEAC %v NLB %#x ranges %d AD %v", c.FUA(), c.DEAC(), c.NLB(), c.DSMRanges(), c.DSMDeallocate())
	}
	r := make(DSMRange, DSMRangeSize)
	r.Set(0x0102030405, 9)
	if binary.LittleEndian.Uint32(r[4:]) != 9 || binary.LittleEndian.Uint64(r[8:]) != 0x0102030405 {
		t.Fatalf("range %x", []byte(r))
	}
	if nsqr, ncqr, ok := NumQueues(NumQueuesValue(3, 5)); !ok || nsqr != 3 || ncqr != 5 {
		t.Fatalf("number of queues round trip: %d %d %v", nsqr, ncqr, ok)
	}
	if _, _, ok := NumQueues(0xffff); ok {
		t.Fatal("NSQR FFFFh accepted")
	}
}

// Each effects dword lands at 4 × opcode in its half of the page.
func TestEffectsLayout(t *testing.T) {
	b := make([]byte, EffectsLogSize)
	PutEffects(b, true, IOWrite, EffectsSupported|EffectsLBC)
	PutEffects(b, false, AdminKeepAlive, EffectsSupported)
	if binary.LittleEndian.Uint32(b[1024+4*IOWrite:]) != 3 || binary.LittleEndian.Uint32(b[4*AdminKeepAlive:]) != 1 {
		t.Fatal("effects written at the wrong offsets")
	}
	if Effects(b, true, IOWrite) != 3 || Effects(b, false, IOWrite) != 0 {
		t.Fatal("effects read back wrong")
	}
}
