package blobstore

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// A directory store keeps a few files created ahead: unnamed (O_TMPFILE)
// in its root, open for writing. Storing a new blob writes one and links
// it under the blob's name. On a local disk, creating the file (its inode)
// is most of what storing a transcript chunk costs a model call; the pool
// does that between calls instead. Unnamed files cannot be seen in the
// directory nor outlive the process, so a crash leaves nothing behind.
// A filesystem without O_TMPFILE, or one that refuses the link, turns the
// pool off, and blobs are created under their names as before.

const poolSize = 4

type filePool struct {
	dir   string
	ready chan *os.File
	mu    sync.Mutex
	// retired are files linked as blobs and not yet closed.
	retired []*os.File
	// filling says a goroutine is creating files; off that the pool is
	// closed or the filesystem cannot do what it needs.
	filling, off bool
}

func newFilePool(root string) *filePool {
	return &filePool{dir: root, ready: make(chan *os.File, poolSize)}
}

// take returns a pooled file, or nil when none is ready. The caller has
// the pool refilled once it has stored its blob.
func (p *filePool) take() *os.File {
	select {
	case f := <-p.ready:
		return f
	default:
		return nil
	}
}

// refill has files created until the pool is full again. A put calls it
// when done rather than when it takes a file: on ext4 creating an unnamed
// file and linking one both take the filesystem's orphan list, so a
// filler running beside the put it was started by would slow that put
// down (appends between pauses took some 300 us, 110 with the filler
// after them).
func (p *filePool) refill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.filling && !p.off && (len(p.ready) < cap(p.ready) || len(p.retired) > 0) {
		p.filling = true
		go p.fill()
	}
}

// retire has f, linked as a blob, closed on the pool's goroutine.
func (p *filePool) retire(f *os.File) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.off {
		_ = f.Close()
		return
	}
	p.retired = append(p.retired, f)
}

// closeRetired closes the files retired so far.
func (p *filePool) closeRetired() {
	p.mu.Lock()
	retired := p.retired
	p.retired = nil
	p.mu.Unlock()
	for _, f := range retired {
		_ = f.Close()
	}
}

// fill creates files until the pool is full. A filesystem that cannot
// create unnamed files turns the pool off; another failure (a full disk)
// stops this round, and the next put tries again.
func (p *filePool) fill() {
	for {
		p.closeRetired()
		p.create()
		// Files retired while this goroutine ran are closed before it
		// ends: a put only starts a filler when none runs.
		p.mu.Lock()
		if len(p.retired) == 0 || p.off {
			p.filling = false
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
	}
}

// create makes files until the pool is full.
func (p *filePool) create() {
	for len(p.ready) < cap(p.ready) {
		f, err := os.OpenFile(p.dir, os.O_WRONLY|unix.O_TMPFILE, filePerm)
		if err != nil {
			if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EINVAL) {
				p.turnOff()
			}
			return
		}
		p.mu.Lock()
		if !p.off && len(p.ready) < cap(p.ready) {
			p.ready <- f
			f = nil
		}
		p.mu.Unlock()
		if f != nil {
			_ = f.Close()
			return
		}
	}
}

// link gives f, written, the name path. It fails with an error wrapping
// fs.ErrExist when path is taken and fs.ErrNotExist when its directory is
// missing; any other failure turns the pool off.
func (p *filePool) link(f *os.File, path string) error {
	// Through /proc, since linking the descriptor itself (AT_EMPTY_PATH)
	// needs a capability a worker should not have.
	err := unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(int(f.Fd())), unix.AT_FDCWD, path, unix.AT_SYMLINK_FOLLOW)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EEXIST), errors.Is(err, unix.ENOENT) && dirMissing(path):
		return &os.LinkError{Op: "link", Old: f.Name(), New: path, Err: err}
	}
	p.turnOff()
	return errPoolOff
}

// dirMissing says whether path's directory is not there.
func dirMissing(path string) bool {
	_, err := os.Stat(filepath.Dir(path))
	return errors.Is(err, fs.ErrNotExist)
}

// errPoolOff says a pooled file could not be used; the caller creates the
// blob's file itself.
var errPoolOff = errors.New("blobstore: files created ahead cannot be linked here")

func (p *filePool) turnOff() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.off = true
	for _, f := range p.retired {
		_ = f.Close()
	}
	p.retired = nil
	for {
		select {
		case f := <-p.ready:
			_ = f.Close()
		default:
			return
		}
	}
}

// close closes the files still pooled.
func (p *filePool) close() { p.turnOff() }
