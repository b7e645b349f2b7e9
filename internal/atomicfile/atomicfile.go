// Package atomicfile writes files that appear whole or not at all: a crash
// mid-write leaves at most a hidden temporary file, never a truncated file
// under the real name. The stores in the data directory (payloads,
// transcripts, connections), the file tools and the starter's history
// export all write through it.
package atomicfile

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Write replaces path with data. The file is created with perm before any
// byte is written (so a secret is never readable by others), synced, and
// renamed into place; the directory is synced so the rename survives a
// power loss. The parent directory must exist.
func Write(path string, data []byte, perm fs.FileMode) error {
	return WriteWith(path, func(w io.Writer) error {
		if _, err := w.Write(data); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		return nil
	}, perm)
}

// WriteWith is Write for content too large to hold in memory: write
// streams it into the temporary file. An error from write is returned as
// it is, and leaves path as it was.
func WriteWith(path string, write func(io.Writer) error, perm fs.FileMode) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("create a temporary file beside %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if err = f.Chmod(perm); err != nil {
		return fmt.Errorf("set the mode of %s: %w", path, err)
	}
	if err = write(f); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename into %s: %w", path, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	defer d.Close()
	if err = d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
