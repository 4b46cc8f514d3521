// Command vblock is the versioned-block workload of the gateway scenarios
// and the nemesis soak (see package vblock):
//
//	vblock write -dev /dev/nvme0n1 -ledger FILE [-blocks N] [-block-size B] [-writers W]
//	vblock verify -dev /dev/nvme0n1 -ledger FILE
//
// write rewrites the blocks until SIGINT or SIGTERM, lets the writes in
// flight complete, saves the ledger (continuing the one in FILE if there
// is one) and prints its figures; it exits 1 if any write failed.
// verify exits 1 if any block does not hold its newest acknowledged
// version (or an unacknowledged write's). Both exit 2 when the run itself
// failed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"syscall"

	"github.com/nvmeof-tgt/nvmeof-tgt/test/e2e/vblock"
	"github.com/nvmeof-tgt/nvmeof-tgt/test/toolmain"
)

func main() {
	toolmain.Run("vblock", map[string]func([]string) error{"write": write, "verify": verify})
}

func write(args []string) error {
	fl := flag.NewFlagSet("write", flag.ExitOnError)
	dev := fl.String("dev", "", "block device to write (O_DIRECT)")
	path := fl.String("ledger", "", "ledger file, continued if it exists")
	blocks := fl.Int("blocks", 1024, "blocks from the device's start, for a new ledger")
	bs := fl.Int("block-size", 4096, "bytes per block, for a new ledger")
	writers := fl.Int("writers", 8, "writes in flight")
	fl.Parse(args)
	if *dev == "" || *path == "" {
		return errors.New("write needs -dev and -ledger")
	}
	l, err := load(*path)
	if errors.Is(err, fs.ErrNotExist) {
		l, err = vblock.NewLedger(*blocks, *bs)
	}
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	fmt.Printf("vblock: writing %d blocks of %d bytes on %s, %d writes in flight\n", len(l.Entries), l.BlockSize, *dev, *writers)
	st, err := vblock.Write(ctx, *dev, l, vblock.WriteConfig{Writers: *writers,
		OnError: func(err error) { fmt.Fprintln(os.Stderr, "vblock: I/O error:", err) }})
	if err != nil {
		return err
	}
	if err := save(*path, l); err != nil {
		return err
	}
	fmt.Printf("vblock: %v\n", st)
	if st.Errors > 0 {
		return fmt.Errorf("%d writes failed: %w", st.Errors, toolmain.ErrFound)
	}
	return nil
}

func verify(args []string) error {
	fl := flag.NewFlagSet("verify", flag.ExitOnError)
	dev := fl.String("dev", "", "block device to read (O_DIRECT)")
	path := fl.String("ledger", "", "ledger the writer saved")
	fl.Parse(args)
	if *dev == "" || *path == "" {
		return errors.New("verify needs -dev and -ledger")
	}
	l, err := load(*path)
	if err != nil {
		return err
	}
	r, err := vblock.Verify(*dev, l)
	if err != nil {
		return err
	}
	fmt.Printf("vblock: verified %v\n", r)
	for i, e := range r.Bad {
		if i == 10 {
			fmt.Printf("vblock: and %d more\n", len(r.Bad)-i)
			break
		}
		fmt.Println("vblock:", e)
	}
	if len(r.Bad) > 0 {
		return fmt.Errorf("%d blocks without their newest version: %w", len(r.Bad), toolmain.ErrFound)
	}
	return nil
}

func load(path string) (*vblock.Ledger, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	l, err := vblock.LoadLedger(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return l, nil
}

// save replaces the ledger file whole, so a crash leaves the old one.
func save(path string, l *vblock.Ledger) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if err := l.Save(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
