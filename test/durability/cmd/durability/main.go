// Command durability drives the durability checks of the end-to-end
// scenarios (see package durability):
//
//	durability write -dev /dev/nvme0n1 -record FILE [-mark-dm logw] [options]
//	durability check -log /dev/mapper/LOG -record FILE [-data /dev/mapper/DATA]
//	durability verify -dev /dev/nvme0n1 -record FILE
//
// The exit status is 0 when every check passed, 1 when a block does not
// hold what the writer was promised, 2 when the run itself failed.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/nvmeof-tgt/nvmeof-tgt/test/durability"
	"github.com/nvmeof-tgt/nvmeof-tgt/test/toolmain"
)

func main() {
	toolmain.Run("durability", map[string]func([]string) error{"write": write, "check": check, "verify": verify})
}

func write(args []string) error {
	fs := flag.NewFlagSet("write", flag.ExitOnError)
	dev := fs.String("dev", "", "block device to write (O_DIRECT)")
	record := fs.String("record", "", "file to write the record to")
	bs := fs.Int("block-size", 4096, "bytes per write")
	blocks := fs.Int64("blocks", 1024, "blocks used from the device's start")
	batches := fs.Int("batches", 300, "batches to run")
	depth := fs.Int("depth", 8, "concurrent writes per batch")
	durable := fs.String("durable", durability.DurableDSync, "how durable batches are made durable: dsync (FUA) or fdatasync (flush)")
	seed := fs.Uint64("seed", 1, "workload seed")
	markDM := fs.String("mark-dm", "", "dm-log-writes device to set marks on (as dmsetup message NAME 0 mark M)")
	markEvery := fs.Int("mark-every", 1, "set a mark after every n-th durable batch")
	fs.Parse(args)
	if *dev == "" || *record == "" {
		return fmt.Errorf("write: -dev and -record are required")
	}
	f, err := os.Create(*record)
	if err != nil {
		return err
	}
	defer f.Close()
	cfg := durability.WriterConfig{Device: *dev, BlockSize: *bs, Blocks: *blocks, Batches: *batches, Depth: *depth,
		Durable: *durable, Seed: *seed, Record: f, MarkEvery: *markEvery}
	if *markDM != "" {
		cfg.Mark = func(name string) error { return durability.DMMessage(*markDM, 0, "mark "+name) }
	}
	st, err := durability.Write(cfg)
	fmt.Printf("writer (%s): %v\n", *durable, st)
	return err
}

func report(rep *durability.Report) error {
	fmt.Println(rep)
	for i, v := range rep.Violations {
		if i == 10 {
			fmt.Printf("... and %d more\n", len(rep.Violations)-i)
			break
		}
		fmt.Println("VIOLATION:", v.Error())
	}
	if rep.Blocks == 0 {
		return fmt.Errorf("nothing was checked")
	}
	if len(rep.Violations) > 0 {
		return fmt.Errorf("%d blocks do not hold what the writer was promised: %w", len(rep.Violations), toolmain.ErrFound)
	}
	return nil
}

func readRecord(path string) (*durability.Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return durability.ReadRecord(f)
}

// openSized opens a device or file and measures it.
func openSized(path string) (*os.File, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, size, nil
}

// openWithRecord reads the writer's record at record and opens the
// device or log at path, with its size. Both are required: cmd names the
// subcommand and pathFlag path's flag for the error.
func openWithRecord(cmd, pathFlag, path, record string) (*durability.Record, *os.File, int64, error) {
	if path == "" || record == "" {
		return nil, nil, 0, fmt.Errorf("%s: %s and -record are required", cmd, pathFlag)
	}
	rec, err := readRecord(record)
	if err != nil {
		return nil, nil, 0, err
	}
	f, size, err := openSized(path)
	return rec, f, size, err
}

func check(args []string) error {
	fs := flag.NewFlagSet("check", flag.ExitOnError)
	logPath := fs.String("log", "", "dm-log-writes log device (or a copy of it)")
	record := fs.String("record", "", "the writer's record")
	data := fs.String("data", "", "optional: the data device under dm-log-writes, to check the replay against")
	fs.Parse(args)
	rec, f, size, err := openWithRecord("check", "-log", *logPath, *record)
	if err != nil {
		return err
	}
	defer f.Close()
	l, err := durability.ReadLog(f, size)
	if err != nil {
		return fmt.Errorf("%s: %w", *logPath, err)
	}
	if *data != "" {
		d, _, err := openSized(*data)
		if err != nil {
			return err
		}
		defer d.Close()
		if err := durability.CheckDevice(l, rec, d); err != nil {
			return fmt.Errorf("the log does not replay to the data device %s: %w", *data, err)
		}
		fmt.Printf("replay of the whole log matches %s on every block written\n", *data)
	}
	rep, err := durability.Check(l, rec)
	if err != nil {
		return err
	}
	return report(rep)
}

func verify(args []string) error {
	fs := flag.NewFlagSet("verify", flag.ExitOnError)
	dev := fs.String("dev", "", "device to read back")
	record := fs.String("record", "", "the writer's record")
	fs.Parse(args)
	rec, f, _, err := openWithRecord("verify", "-dev", *dev, *record)
	if err != nil {
		return err
	}
	defer f.Close()
	rep, err := durability.Verify(f, rec)
	if err != nil {
		return err
	}
	return report(rep)
}
