package builtin

import (
	"fmt"
	"os"
	"path/filepath"
)

// CheckApart refuses a data directory and a workspace that overlap. The
// file tools hand the model anything in the workspace without approval,
// and the data directory holds the connection tokens and every
// conversation's transcript; a workspace inside the data directory sits
// beside them and could become a store's directory. Both are compared
// after resolving symbolic links and, for parts that already exist, by
// identity, so "." against ".tollgate", an alias through a link, or a
// case-insensitive file system cannot hide an overlap. Runs before
// either directory is created.
func CheckApart(dataDir, ws string) error {
	data, err := resolveExisting(dataDir)
	if err != nil {
		return fmt.Errorf("resolve data directory %s: %w", dataDir, err)
	}
	work, err := resolveExisting(ws)
	if err != nil {
		return fmt.Errorf("resolve workspace %s: %w", ws, err)
	}
	d, w := show(dataDir, data), show(ws, work)
	const fix = "set --data (TOLLGATE_DATA) and --workspace (TOLLGATE_WORKSPACE) to separate directories side by side, " +
		"as the defaults .tollgate and workspace are"
	switch {
	case sameDir(data, work):
		return fmt.Errorf("the data directory %s and the workspace %s are the same directory, "+
			"so the file tools would hand the model the connection tokens and transcripts stored there; %s", d, w, fix)
	case contains(work, data):
		return fmt.Errorf("the data directory %s is inside the workspace %s, "+
			"so the file tools would hand the model the connection tokens and transcripts stored in it; %s", d, w, fix)
	case contains(data, work):
		return fmt.Errorf("the workspace %s is inside the data directory %s, "+
			"beside the connection tokens and transcripts the file tools must never reach; %s", w, d, fix)
	}
	return nil
}

// show names a directory as the operator gave it and, when that differs,
// as it resolved.
func show(given, resolved string) string {
	if filepath.Clean(given) == resolved {
		return resolved
	}
	return fmt.Sprintf("%s (%s)", given, resolved)
}

// resolveExisting makes dir absolute and resolves the symbolic links of
// its longest existing prefix; the rest, not created yet, cannot hold one.
func resolveExisting(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	return realPath(abs)
}

// contains reports whether inner is below outer (not equal to it): by
// name, or because one of inner's existing ancestors is outer itself.
func contains(outer, inner string) bool {
	for p := filepath.Dir(inner); ; p = filepath.Dir(p) {
		if sameDir(p, outer) {
			return true
		}
		if filepath.Dir(p) == p {
			return false
		}
	}
}

// sameDir reports whether a and b are one directory: equal names, or
// both existing and the same file (which catches case-insensitive file
// systems and bind mounts).
func sameDir(a, b string) bool {
	if a == b {
		return true
	}
	ai, err := os.Stat(a)
	if err != nil {
		return false
	}
	bi, err := os.Stat(b)
	return err == nil && os.SameFile(ai, bi)
}
