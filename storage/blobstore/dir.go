package blobstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// A directory store reads and writes its files itself rather than through
// fileblob: a model call stores a transcript chunk, and creating a file is
// the dearest thing it does on a local disk. fileblob stats the directory,
// creates a temporary file, sets its mode and renames it into place; here
// a new blob is a file created ahead (pool_linux.go), written and linked
// into place, or, when none is ready, one exclusive create under its name,
// written and closed. The layout is fileblob's (no sidecars, temporary
// files named NAME.<hex>.tmp beside the blob), so either reads what the
// other wrote, and List and Stats still go through the bucket.

// path is where key lives in the directory store.
func (s *Store) path(key string) string {
	return filepath.Join(s.dir, filepath.FromSlash(key))
}

// Prepare creates the directories a directory store keeps sp's blobs in,
// one for each first two hex digits of a sum (Space.Key), so that storing the space's first blobs
// does not also create their directories. On a fresh data directory that
// was most of what a model call's transcript chunk cost, for its first
// thousand or so calls: on a busy worker one directory took hundreds of
// microseconds, all 256 in a row take a few milliseconds. A bucket has no
// directories, and Prepare does nothing there.
func (s *Store) Prepare(sp Space) error {
	if s.dir == "" {
		return nil
	}
	root := s.path(sp.Prefix)
	if err := os.MkdirAll(root, dirPerm); err != nil {
		return fmt.Errorf("prepare the directories of %s in %s: %w", sp.Prefix, s.where, err)
	}
	for i := range 256 {
		err := os.Mkdir(filepath.Join(root, fmt.Sprintf("%02x", i)), dirPerm)
		if err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("prepare the directories of %s in %s: %w", sp.Prefix, s.where, err)
		}
	}
	if sp.Durable {
		return syncDir(root)
	}
	return nil
}

// readFile reads the blob under key, without checking it.
func (s *Store) readFile(key string) ([]byte, error) {
	data, err := os.ReadFile(s.path(key))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("blob %s: %w", key, ErrMissing)
	case err != nil:
		// A file that is there but cannot be read (a directory in its
		// place, a bad sector) will not read on a retry either.
		return nil, fmt.Errorf("blob %s cannot be read: %w", key, ErrCorrupt)
	}
	return data, nil
}

// putFile stores data under key unless an intact blob is already there.
// intact says whether stored bytes are the blob's. A write that fails
// leaves nothing under key; one a crash cuts short leaves a file whose
// hash is wrong, which Get reports as ErrCorrupt and the next Put of the
// same blob replaces.
func (s *Store) putFile(key string, data []byte, durable bool, intact func([]byte) bool) error {
	p := s.path(key)
	defer s.pool.refill()
	if f := s.pool.take(); f != nil {
		if stored, err := s.putPooled(f, p, data, durable, intact); stored || err != nil {
			return err
		}
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, filePerm)
	if errors.Is(err, fs.ErrNotExist) {
		if err = os.MkdirAll(filepath.Dir(p), dirPerm); err != nil {
			return err
		}
		f, err = os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, filePerm)
	}
	if errors.Is(err, fs.ErrExist) {
		// Stored before (an activity retry, a prefix sent again), or
		// being stored now by another writer of the same bytes: keep it
		// if it is whole, else write it again beside and rename it over.
		if old, rerr := os.ReadFile(p); rerr == nil && intact(old) {
			return nil
		}
		return s.replaceFile(p, data, durable)
	}
	if err != nil {
		return err
	}
	mine, err := f.Stat()
	if err == nil {
		err = writeClose(f, data, durable)
	} else {
		_ = f.Close()
	}
	if err != nil {
		// Unless another writer of the same bytes found this file torn
		// and has already renamed a whole one over it.
		if now, serr := os.Stat(p); serr == nil && mine != nil && os.SameFile(now, mine) {
			_ = os.Remove(p)
		}
		return err
	}
	if durable {
		return syncDir(filepath.Dir(p))
	}
	return nil
}

// putPooled stores data at p through f, a file of the pool: unless an
// intact blob is there already, it writes f and links it as p. stored is
// false, with no error, when the pool turned out unusable here: nothing
// was stored, and the caller creates p itself.
//
// f is written and linked first, and p read only if its name is taken: a
// new blob is the common case, and one stored before (an activity retry,
// another writer of the same bytes) the rare one, which costs a written
// file thrown away.
func (s *Store) putPooled(f *os.File, p string, data []byte, durable bool, intact func([]byte) bool) (stored bool, err error) {
	if err := writeSync(f, data, durable); err != nil {
		_ = f.Close()
		return true, err
	}
	err = s.pool.link(f, p)
	if errors.Is(err, fs.ErrNotExist) {
		// The blob's directory is new.
		if err = os.MkdirAll(filepath.Dir(p), dirPerm); err == nil {
			err = s.pool.link(f, p)
		}
	}
	if err == nil {
		// Written, and synced when durable: closing it can no longer
		// lose what it holds, so the put does not wait for it.
		s.pool.retire(f)
	} else {
		_ = f.Close()
	}
	switch {
	case errors.Is(err, errPoolOff):
		return false, nil
	case errors.Is(err, fs.ErrExist):
		// Stored before, or by another writer of the same bytes: kept
		// if whole, else written again beside and renamed over.
		if old, rerr := os.ReadFile(p); rerr == nil && intact(old) {
			return true, nil
		}
		return true, s.replaceFile(p, data, durable)
	case err != nil:
		return true, err
	case durable:
		return true, syncDir(filepath.Dir(p))
	}
	return true, nil
}

// replaceFile writes data beside p and renames it over p, so that readers
// of p see the old file or the new one, never a part.
func (s *Store) replaceFile(p string, data []byte, durable bool) error {
	tmp := p + "." + strconv.FormatInt(time.Now().UnixNano(), 16) + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, filePerm)
	if err != nil {
		return err
	}
	if err := writeClose(f, data, durable); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, p); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if durable {
		return syncDir(filepath.Dir(p))
	}
	return nil
}

// writeClose writes data to f, syncs it when durable, and closes it.
func writeClose(f *os.File, data []byte, durable bool) error {
	err := writeSync(f, data, durable)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// writeSync writes data to f and syncs it when durable.
func writeSync(f *os.File, data []byte, durable bool) error {
	_, err := f.Write(data)
	if err == nil && durable {
		err = f.Sync()
	}
	return err
}

// syncDir syncs a directory, so that a file created or renamed in it
// survives a power loss.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
