package builtin

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/tollgate-dev/tollgate/tool"
)

// workspace is the directory tree one call is confined to.
//
// Two layers keep the file tools inside it. resolve checks a path
// lexically and through its symbolic links, which gives the model precise
// sentences ("outside the workspace", "through a symbolic link"), but a
// check by path is stale as soon as it returns: the model can have a
// shell command (or a second agent) swap a directory for a link between
// the check and the open. So the check is not the guard. Every read and
// write of the file tools goes through fsys, an os.Root on the workspace,
// which opens each component beneath the root's descriptor and refuses
// any link or ".." that leaves it, however the tree changes meanwhile.
type workspace struct {
	// given is the workspace as the host named it; working directories
	// handed back to the host are expressed under it.
	given string
	// givenAbs is given made absolute.
	givenAbs string
	// root is given with symbolic links resolved; containment is checked
	// against it.
	root string
	// cwd is the current directory, inside root, in resolved form.
	cwd string
	// fsys is the workspace opened as an os.Root, set by openFiles only:
	// the shell runs a process rather than opening files itself.
	fsys *os.Root
}

// target is a path that was inside the workspace when it was resolved.
type target struct {
	// path is the real location, symbolic links resolved, when resolve
	// ran. It is never opened: the tree may have changed since.
	path string
	// rel names it for people and the model: slash-separated, relative to
	// the workspace root.
	rel string
	// name is rel in the host's separators; it is what fsys opens.
	name string
	// fsys is the workspace's os.Root (nil outside the file tools).
	fsys *os.Root
}

// openWorkspace reads the workspace and working directory of a call. A
// missing workspace is the host's fault, so it is an internal error; a
// working directory outside the workspace is reported to the model.
func openWorkspace(call tool.Call) (workspace, error) {
	if call.Workspace == "" {
		return workspace{}, errors.New("the call has no workspace directory")
	}
	given, err := filepath.Abs(call.Workspace)
	if err != nil {
		return workspace{}, fmt.Errorf("resolve workspace %s: %w", call.Workspace, err)
	}
	root, err := filepath.EvalSymlinks(given)
	if err != nil {
		return workspace{}, fmt.Errorf("open workspace: %w", err)
	}
	w := workspace{given: filepath.Clean(call.Workspace), givenAbs: given, root: root, cwd: root}
	if call.WorkDir != "" {
		t, err := w.resolve(call.WorkDir)
		if err != nil {
			return workspace{}, err
		}
		w.cwd = t.path
	}
	return w, nil
}

// openFiles is openWorkspace for the file tools: it also opens the
// resolved root as an os.Root, through which every access goes. The
// caller closes it with close.
func openFiles(call tool.Call) (workspace, error) {
	w, err := openWorkspace(call)
	if err != nil {
		return workspace{}, err
	}
	// Opened on the resolved root, so that the names resolve computes
	// relative to root mean the same directory to the kernel.
	if w.fsys, err = os.OpenRoot(w.root); err != nil {
		return workspace{}, fmt.Errorf("open workspace: %w", err)
	}
	return w, nil
}

// close releases fsys.
func (w workspace) close() {
	if w.fsys != nil {
		_ = w.fsys.Close()
	}
}

// resolve checks that p (relative to the current directory, or absolute)
// is in the workspace and names it relative to the root. Symbolic links
// are followed on the part of the path that exists, so a link that points
// outside is reported with a sentence the model can act on, and an
// absolute link that points back inside (which os.Root alone would
// refuse) keeps working. This is a check by path, so it is advice, not
// the guard: see workspace.
func (w workspace) resolve(p string) (target, error) {
	if strings.ContainsRune(p, 0) {
		return target{}, failf("path %q contains a NUL byte", p)
	}
	lexical := p
	if !filepath.IsAbs(lexical) {
		lexical = filepath.Join(w.cwd, lexical)
	}
	lexical = filepath.Clean(lexical)
	// An absolute path written against the workspace as the host named it
	// is the same place as the resolved root.
	if rel, ok := within(w.givenAbs, lexical); ok {
		lexical = filepath.Join(w.root, rel)
	}
	if _, ok := within(w.root, lexical); !ok {
		return target{}, failf("path %q is outside the workspace", p)
	}
	real, err := realPath(lexical)
	if err != nil {
		return target{}, failf("path %q cannot be resolved: %v", p, stripPath(err))
	}
	rel, ok := within(w.root, real)
	if !ok {
		return target{}, failf("path %q leads outside the workspace through a symbolic link", p)
	}
	return target{path: real, rel: filepath.ToSlash(rel), name: rel, fsys: w.fsys}, nil
}

// relCwd is the current directory relative to the workspace root.
func (w workspace) relCwd() string {
	rel, _ := within(w.root, w.cwd)
	return filepath.ToSlash(rel)
}

// hostPath expresses a resolved path inside root under the workspace as
// the host named it.
func (w workspace) hostPath(real string) (string, bool) {
	rel, ok := within(w.root, real)
	if !ok {
		return "", false
	}
	return filepath.Join(w.given, rel), true
}

// realPath resolves the symbolic links of the longest existing prefix of an
// absolute, clean path and appends the rest.
func realPath(p string) (string, error) {
	existing, rest := p, ""
	for {
		if _, err := os.Lstat(existing); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(existing)
		if parent == existing {
			break
		}
		rest = filepath.Join(filepath.Base(existing), rest)
		existing = parent
	}
	// EvalSymlinks fails on a dangling link; refusing it matters, since
	// writing through one would create its target wherever it points.
	resolved, err := filepath.EvalSymlinks(existing)
	if err != nil {
		return "", err
	}
	return filepath.Join(resolved, rest), nil
}

// within reports whether p is root or below it, and p relative to root.
func within(root, p string) (string, bool) {
	rel, err := filepath.Rel(root, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", false
	}
	return rel, true
}

// stripPath keeps the reason of a *fs.PathError or *os.LinkError but
// drops the path, which would tell the model where the workspace lives.
// os.Root nests one PathError in another, hence the loop.
func stripPath(err error) error {
	for {
		var pe *fs.PathError
		var le *os.LinkError
		switch {
		case errors.As(err, &pe):
			err = pe.Err
		case errors.As(err, &le):
			err = le.Err
		default:
			return err
		}
	}
}

// escapes reports whether err is os.Root refusing a name that leaves the
// root. The os package keeps that error unexported, so it is recognised
// by its text, at every level of wrapping.
func escapes(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if e.Error() == "path escapes from parent" {
			return true
		}
	}
	return false
}

// escaped is what the model reads when os.Root refused t although resolve
// let it through: a link was put in the way after the check.
func escaped(t target) error {
	return failf("path %q leads outside the workspace through a symbolic link", t.rel)
}
