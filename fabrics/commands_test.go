package fabrics

import (
	"reflect"
	"testing"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// funcID identifies a handler: functions compare only through their code
// pointer.
func funcID(f func(*Queue, *Request) bool) uintptr {
	if f == nil {
		return 0
	}
	return reflect.ValueOf(f).Pointer()
}

// prepareOnly runs Prepare for cmd on lq as its poller would, then fails
// the request so that it lets go of its namespace.
func prepareOnly(lq *LoopQueue, cmd nvme.Command) *Request {
	r := &Request{Cmd: cmd, Rsp: make(nvme.Completion, nvme.CompletionSize)}
	lq.mu.Lock()
	defer lq.mu.Unlock()
	if lq.Queue.Prepare(r) {
		lq.Queue.Fail(r, nvme.StatusInternal)
		r.status = 0
	}
	return r
}

// tableCommand builds a valid command for opcode op: namespace 1, one
// block at LBA 0, a 4-byte log page, one DSM range.
func tableCommand(op uint8, c *command) nvme.Command {
	cmd := keyed(newCmd(op), max(int(c.fixedLen), 512))
	cmd.SetNSID(1)
	return cmd
}

// The command tables are the one source of admin dispatch, I/O dispatch
// and the Commands Supported and Effects log: every supported opcode
// dispatches to its handler and is in the log with its effects, and every
// other opcode gets Invalid Command Opcode and reads as 0 in the log.
func TestCommandTablesDriveDispatchAndEffects(t *testing.T) {
	tg, p, _ := testTarget(t)
	h := connect(t, tg, p, testNQN)
	page, st := h.getLog(nvme.LogCmdEffects, nvme.EffectsLogSize, 0)
	if st != 0 {
		t.Fatalf("effects log: %v", st)
	}
	for _, side := range []struct {
		name  string
		io    bool
		table *[nvme.Opcodes]command
		lq    *LoopQueue
	}{{"admin", false, &adminCommands, h.admin}, {"io", true, &ioCommands, h.io}} {
		supported := 0
		for op := range side.table {
			if op == nvme.OpFabrics {
				continue // Fabrics commands are dispatched by their command type
			}
			c := &side.table[op]
			r := prepareOnly(side.lq, tableCommand(uint8(op), c))
			checkDispatch(t, side.name, uint8(op), c, r)
			want := uint32(0)
			if c.supported() {
				want = nvme.EffectsSupported | c.effects
				supported++
			}
			if got := nvme.Effects(page, side.io, uint8(op)); got != want {
				t.Errorf("%s opcode %#02x: effects %#x, want %#x", side.name, op, got, want)
			}
		}
		if supported == 0 {
			t.Fatalf("%s table supports nothing", side.name)
		}
	}
}

func checkDispatch(t *testing.T, side string, op uint8, c *command, r *Request) {
	t.Helper()
	if !c.supported() {
		if want := nvme.StatusInvalidOpcode | nvme.DNR; r.Status() != want {
			t.Errorf("%s opcode %#02x outside the table: %v, want %v", side, op, r.Status(), want)
		}
		return
	}
	if r.Status() != 0 {
		t.Errorf("%s opcode %#02x: prepare failed with %v", side, op, r.Status())
		return
	}
	if funcID(r.handler) != funcID(c.handler) {
		t.Errorf("%s opcode %#02x dispatched to another handler", side, op)
	}
	if r.Dir != c.dir && !(op == nvme.AdminGetFeatures && side == "admin") {
		t.Errorf("%s opcode %#02x: direction %d, want %d", side, op, r.Dir, c.dir)
	}
}

// Flush with the broadcast NSID runs the table's broadcast handler, off
// the poller.
func TestBroadcastDispatch(t *testing.T) {
	tg, p, _ := testTarget(t)
	h := connect(t, tg, p, testNQN)
	cmd := flushCmd(nvme.NSIDBroadcast)
	r := prepareOnly(h.io, cmd)
	if r.Status() != 0 || funcID(r.handler) != funcID(ioCommands[nvme.IOFlush].broadcast) || !r.blocking {
		t.Fatalf("broadcast flush: status %v, blocking %v, broadcast handler %v", r.Status(), r.blocking,
			funcID(r.handler) == funcID(ioCommands[nvme.IOFlush].broadcast))
	}
}

// Identify's ONCS and FUSES advertise exactly the optional commands the
// I/O table supports.
func TestIdentifyAdvertisesTheTable(t *testing.T) {
	tg, p, _ := testTarget(t)
	h := connect(t, tg, p, testNQN)
	id, st := h.identify(nvme.CNSController, 0)
	if st != 0 {
		t.Fatal(st)
	}
	oncs := le16(id, 520)
	for _, c := range []struct {
		bit uint16
		op  uint8
	}{{nvme.ONCSCompare, nvme.IOCompare}, {nvme.ONCSDSM, nvme.IODatasetMgmt}, {nvme.ONCSWriteZeroes, nvme.IOWriteZeroes}, {nvme.ONCSReservations, nvme.IOResvRegister}} {
		if got, want := oncs&c.bit != 0, ioCommands[c.op].supported(); got != want {
			t.Errorf("ONCS bit %#x is %v, the table supports opcode %#02x: %v", c.bit, got, c.op, want)
		}
	}
	if fuses := id[522]; (fuses&1 != 0) != ioCommands[nvme.IOCompare].supported() {
		t.Errorf("FUSES %#x with Compare supported: %v", fuses, ioCommands[nvme.IOCompare].supported())
	}
}
