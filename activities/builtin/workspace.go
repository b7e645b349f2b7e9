package builtin

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/tollgate-dev/tollgate/activities/tool"
)

// workspace is the directory tree one call is confined to.
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
}

// target is a path that stays inside the workspace.
type target struct {
	// path is the real location, symbolic links resolved.
	path string
	// rel names it for people and the model: slash-separated, relative to
	// the workspace root.
	rel string
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

// resolve confines p (relative to the current directory, or absolute) to
// the workspace. Symbolic links are followed on the part of the path that
// exists, so a link that points outside is caught before anything is read
// or written through it; the part that does not exist yet cannot contain
// a link.
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
	return target{path: real, rel: filepath.ToSlash(rel)}, nil
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

// stripPath keeps the operation and reason of a *fs.PathError but drops the
// absolute path, which would tell the model where the workspace lives.
func stripPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
