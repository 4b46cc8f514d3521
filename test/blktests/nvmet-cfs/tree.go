package main

import (
	"context"
	"log"
	"slices"
	"strings"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// The parts of the tree that mirror the daemon (subsystems/, ports/) are
// made on each lookup: an entry is a name and the node behind it, and a
// directory lists its entries, under c.mu, when the kernel asks.

type entry struct {
	name string
	node fs.InodeEmbedder
	mode uint32 // S_IFDIR, S_IFREG or S_IFLNK
}

// dir is a directory whose entries are computed. mkdir and rmdir, when
// set, make and remove an entry; nil refuses with EPERM, as configfs does
// where a directory takes no children.
type dir struct {
	fs.Inode
	c       *cfs
	entries func() ([]entry, syscall.Errno)
	mkdir   func(name string) syscall.Errno
	rmdir   func(name string) syscall.Errno
}

// static is a fixed list of entries.
func static(es ...entry) func() ([]entry, syscall.Errno) {
	return func() ([]entry, syscall.Errno) { return es, 0 }
}

func (d *dir) find(name string) (entry, syscall.Errno) {
	es, errno := d.entries()
	if errno != 0 {
		return entry{}, errno
	}
	i := slices.IndexFunc(es, func(e entry) bool { return e.name == name })
	if i < 0 {
		return entry{}, syscall.ENOENT
	}
	return es[i], 0
}

func (d *dir) inode(ctx context.Context, e entry, out *fuse.EntryOut) *fs.Inode {
	out.Mode = e.mode | 0o644
	if e.mode == syscall.S_IFDIR {
		out.Mode = e.mode | 0o755
	}
	if e.mode == syscall.S_IFREG {
		out.Size = 4096
	}
	return d.NewInode(ctx, e.node, fs.StableAttr{Mode: e.mode})
}

func (d *dir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	d.c.mu.Lock()
	defer d.c.mu.Unlock()
	e, errno := d.find(name)
	if errno != 0 {
		return nil, errno
	}
	return d.inode(ctx, e, out), 0
}

func (d *dir) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	d.c.mu.Lock()
	defer d.c.mu.Unlock()
	es, errno := d.entries()
	if errno != 0 {
		return nil, errno
	}
	list := make([]fuse.DirEntry, len(es))
	for i, e := range es {
		list[i] = fuse.DirEntry{Name: e.name, Mode: e.mode}
	}
	return fs.NewListDirStream(list), 0
}

func (d *dir) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if d.mkdir == nil {
		return nil, syscall.EPERM
	}
	d.c.mu.Lock()
	defer d.c.mu.Unlock()
	if errno := d.mkdir(name); errno != 0 {
		return nil, errno
	}
	e, errno := d.find(name)
	if errno != 0 {
		return nil, errno
	}
	return d.inode(ctx, e, out), 0
}

func (d *dir) Rmdir(ctx context.Context, name string) syscall.Errno {
	if d.rmdir == nil {
		return syscall.EPERM
	}
	d.c.mu.Lock()
	defer d.c.mu.Unlock()
	return d.rmdir(name)
}

// file is an attribute: show gives its value, store (nil: read-only,
// EACCES) takes a write's, without the trailing newline; both run under
// c.mu. Like configfs, each write(2) stores the whole value and
// truncation changes nothing.
type file struct {
	fs.Inode
	c     *cfs
	what  string // for the log: subsystems/X/namespaces/1/enable
	show  func() (string, syscall.Errno)
	store func(v string) syscall.Errno
}

func (f *file) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFREG | 0o644
	out.Size = 4096
	return 0
}

func (f *file) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return f.Getattr(ctx, fh, out)
}

func (f *file) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	return nil, fuse.FOPEN_DIRECT_IO, 0
}

func (f *file) Read(ctx context.Context, fh fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	f.c.mu.Lock()
	v, errno := f.show()
	f.c.mu.Unlock()
	if errno != 0 {
		return nil, errno
	}
	v += "\n"
	if off >= int64(len(v)) {
		return fuse.ReadResultData(nil), 0
	}
	return fuse.ReadResultData([]byte(v[off:])), 0
}

func (f *file) Write(ctx context.Context, fh fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	if f.store == nil {
		return 0, syscall.EACCES
	}
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	v := strings.TrimSpace(string(data))
	if errno := f.store(v); errno != 0 {
		log.Printf("%s: %q: %v", f.what, v, errno)
		return 0, errno
	}
	return uint32(len(data)), 0
}

// link is a symbolic link, as nvmet's ports/P/subsystems/X.
type link struct {
	fs.Inode
	target string
}

func (l *link) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	return []byte(l.target), 0
}

func (l *link) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFLNK | 0o777
	out.Size = uint64(len(l.target))
	return 0
}

// refused logs why the daemon refused a change and fails the write as
// nvmet fails one it refuses.
func refused(what string, err error) syscall.Errno {
	log.Printf("%s: %v", what, err)
	return syscall.EINVAL
}
