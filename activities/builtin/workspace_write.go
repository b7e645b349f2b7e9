package builtin

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
)

// writeInRoot is atomicfile.Write inside an os.Root: the file appears
// whole or not at all, with perm set before any byte is written, and the
// temporary file, the rename and the directory sync are all resolved
// beneath root. atomicfile takes host paths, which a model that can
// change the tree could redirect between our check and its open.
func writeInRoot(root *os.Root, name string, data []byte, perm fs.FileMode) (err error) {
	dir := filepath.Dir(name)
	f, tmp, err := createTempInRoot(root, dir, "."+filepath.Base(name)+".tmp-")
	if err != nil {
		return fmt.Errorf("create a temporary file beside %s: %w", name, err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = root.Remove(tmp)
		}
	}()
	// Chmod on the descriptor, not by name: the umask must not decide the
	// mode, and the name could be swapped for a link meanwhile.
	if err = f.Chmod(perm); err != nil {
		return fmt.Errorf("set the mode of %s: %w", name, err)
	}
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", name, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", name, err)
	}
	// rename replaces the directory entry and never writes through a link
	// standing at name, so the content cannot land outside either.
	if err = root.Rename(tmp, name); err != nil {
		return fmt.Errorf("rename into %s: %w", name, err)
	}
	d, err := root.Open(dir)
	if err != nil {
		return fmt.Errorf("sync the directory of %s: %w", name, err)
	}
	defer d.Close()
	if err = d.Sync(); err != nil {
		return fmt.Errorf("sync the directory of %s: %w", name, err)
	}
	return nil
}

// createTempInRoot is os.CreateTemp beneath root: O_EXCL with a random
// suffix, retried on a collision. O_EXCL also refuses a link planted
// under the chosen name.
func createTempInRoot(root *os.Root, dir, prefix string) (*os.File, string, error) {
	for range 100 {
		name := filepath.Join(dir, prefix+strconv.FormatUint(rand.Uint64(), 36))
		f, err := root.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, name, err
	}
	return nil, "", errors.New("no unused temporary name after 100 tries")
}
