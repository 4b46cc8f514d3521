package durability

import (
	"encoding/binary"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// DMMessage sends a message to a device-mapper target, as `dmsetup message
// NAME SECTOR MESSAGE` does, through one ioctl on /dev/mapper/control: in
// an emulated guest, starting dmsetup for every mark costs a fifth of a
// second.
func DMMessage(name string, sector uint64, msg string) error {
	// struct dm_ioctl (<linux/dm-ioctl.h>), followed by struct
	// dm_target_msg {__u64 sector; char message[];}.
	const (
		dmVersion    = 0   // __u32 version[3]
		dmDataSize   = 12  // __u32 data_size: everything passed in
		dmDataStart  = 16  // __u32 data_start: offset of the payload
		dmName       = 48  // char name[128]
		dmIoctlLen   = 312 // sizeof(struct dm_ioctl)
		dmNameLen    = 128
		dmTargetMsg  = 14 // DM_TARGET_MSG_CMD
		dmIoctlMagic = 0xfd
	)
	if len(name) >= dmNameLen {
		return fmt.Errorf("dm device name %q: longer than %d bytes", name, dmNameLen-1)
	}
	buf := make([]byte, dmIoctlLen+8+len(msg)+1)
	le := binary.LittleEndian
	le.PutUint32(buf[dmVersion:], 4) // major 4: every kernel since 2.6
	le.PutUint32(buf[dmDataSize:], uint32(len(buf)))
	le.PutUint32(buf[dmDataStart:], dmIoctlLen)
	copy(buf[dmName:], name)
	le.PutUint64(buf[dmIoctlLen:], sector)
	copy(buf[dmIoctlLen+8:], msg)

	ctl, err := os.OpenFile("/dev/mapper/control", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("device-mapper control: %w (is dm-mod loaded?)", err)
	}
	defer ctl.Close()
	// _IOWR(0xfd, DM_TARGET_MSG_CMD, struct dm_ioctl)
	req := uintptr(3<<30 | dmIoctlLen<<16 | dmIoctlMagic<<8 | dmTargetMsg)
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, ctl.Fd(), req, uintptr(unsafe.Pointer(&buf[0]))); e != 0 {
		return fmt.Errorf("dm message %q to %s: %w", msg, name, e)
	}
	return nil
}
