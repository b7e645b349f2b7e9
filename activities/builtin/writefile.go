package builtin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

type writeFileArgs struct {
	Path    string `json:"path" jsonschema:"file to write; missing parent directories are created"`
	Content string `json:"content" jsonschema:"the complete new content of the file"`
}

func writeFileTool(Options) (tool.Tool, error) {
	return tool.FuncWithPreview(tool.Spec{
		Name:        WriteFile,
		Description: "Create or overwrite a file in the workspace with the given content. Returns a diff of the change.",
		Approval:    tool.ApprovalAlways,
		// Writing the same content twice leaves the same file.
		Idempotent: true,
		Workspace:  true,
	}, func(ctx context.Context, call tool.Call, args writeFileArgs) (results.Outcome, error) {
		ch, err := planWrite(call, args, 0)
		if err != nil {
			return outcome(err)
		}
		defer ch.close()
		if ch.unchanged() {
			return results.SucceedText(fmt.Sprintf("%s already has this content; nothing changed", ch.t.rel)), nil
		}
		if err := replaceFile(ch.t, ch.updated); err != nil {
			return outcome(err)
		}
		verb := "updated"
		if !ch.existed {
			verb = "created"
		}
		text := fmt.Sprintf("%s %s (%d bytes)", verb, ch.t.rel, len(ch.updated))
		return results.SucceedText(text).WithDiffs(ch.diff()), nil
	}, func(ctx context.Context, call tool.Call, args writeFileArgs) ([]results.FileDiff, error) {
		return previewChange(planWrite(call, args, maxPreviewFileBytes))
	})
}

type editFileArgs struct {
	Path      string `json:"path" jsonschema:"file to edit"`
	OldString string `json:"old_string" jsonschema:"exact text to replace; must occur exactly once in the file"`
	NewString string `json:"new_string" jsonschema:"text to put in its place"`
}

func editFileTool(Options) (tool.Tool, error) {
	return tool.FuncWithPreview(tool.Spec{
		Name:        EditFile,
		Description: "Replace one exact occurrence of old_string with new_string in a workspace file. old_string must match exactly once, including whitespace; add surrounding lines to make it unique. Returns a diff of the change.",
		Approval:    tool.ApprovalAlways,
		Workspace:   true,
		// Not idempotent: once applied, the same edit no longer matches.
	}, func(ctx context.Context, call tool.Call, args editFileArgs) (results.Outcome, error) {
		ch, err := planEdit(call, args, 0)
		if err != nil {
			return outcome(err)
		}
		defer ch.close()
		if err := replaceFile(ch.t, ch.updated); err != nil {
			return outcome(err)
		}
		text := fmt.Sprintf("edited %s", ch.t.rel)
		return results.SucceedText(text).WithDiffs(ch.diff()), nil
	}, func(ctx context.Context, call tool.Call, args editFileArgs) ([]results.FileDiff, error) {
		return previewChange(planEdit(call, args, maxPreviewFileBytes))
	})
}

// fileChange is what write_file or edit_file would do to one file. Run
// works it out and then writes it; Preview works out the same and only
// shows it, so the approver sees what Run would do, refusals included.
type fileChange struct {
	// t is the file, resolved in the workspace; its fsys stays open until
	// close.
	t       target
	old     string
	updated string
	existed bool
}

func (c fileChange) close() {
	if c.t.fsys != nil {
		_ = c.t.fsys.Close()
	}
}

func (c fileChange) unchanged() bool { return c.existed && c.old == c.updated }

func (c fileChange) diff() results.FileDiff { return fileDiff(c.t.rel, c.old, c.updated, c.existed) }

// planWrite works out write_file's change without writing. maxRead bounds
// the current file (0: no bound); past it the error is a *tooLarge. On
// success the caller closes the change.
func planWrite(call tool.Call, args writeFileArgs, maxRead int64) (fileChange, error) {
	if args.Path == "" {
		return fileChange{}, failf("path is empty")
	}
	return planChange(call, args.Path, maxRead, func(t target, old string, existed bool) (string, error) {
		return args.Content, nil
	})
}

// planEdit works out edit_file's change without writing, refusing what
// Run refuses; maxRead as for planWrite.
func planEdit(call tool.Call, args editFileArgs, maxRead int64) (fileChange, error) {
	if args.Path == "" {
		return fileChange{}, failf("path is empty")
	}
	if args.OldString == "" {
		return fileChange{}, failf("old_string is empty; use %s to create a file", WriteFile)
	}
	if args.OldString == args.NewString {
		return fileChange{}, failf("old_string and new_string are the same; nothing to change")
	}
	return planChange(call, args.Path, maxRead, func(t target, old string, existed bool) (string, error) {
		if !existed {
			return "", failf("%s does not exist", t.rel)
		}
		switch n := strings.Count(old, args.OldString); n {
		case 1:
		case 0:
			return "", failf("old_string was not found in %s; read the file and copy the text exactly", t.rel)
		default:
			return "", failf("old_string occurs %d times in %s; include more surrounding text so it matches exactly once", n, t.rel)
		}
		return strings.Replace(old, args.OldString, args.NewString, 1), nil
	})
}

// planChange resolves path in the call's workspace, reads the file there
// (through the workspace's os.Root, as every file tool does) and asks
// apply for the new content.
func planChange(call tool.Call, path string, maxRead int64, apply func(t target, old string, existed bool) (string, error)) (fileChange, error) {
	w, err := openFiles(call)
	if err != nil {
		return fileChange{}, err
	}
	ch, err := func() (fileChange, error) {
		t, err := w.resolve(path)
		if err != nil {
			return fileChange{}, err
		}
		old, existed, err := readForChange(t, maxRead)
		if err != nil {
			return fileChange{}, err
		}
		updated, err := apply(t, old, existed)
		if err != nil {
			return fileChange{}, err
		}
		return fileChange{t: t, old: old, updated: updated, existed: existed}, nil
	}()
	if err != nil {
		w.close()
	}
	return ch, err
}

// readForChange reads the current content of a file about to be written,
// through the workspace's os.Root. A file over maxRead bytes (when
// maxRead > 0) is not read: the error is a *tooLarge.
func readForChange(t target, maxRead int64) (content string, existed bool, err error) {
	f, info, err := openIn(t)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, openFailure(t, err, "read")
	}
	defer f.Close()
	if info.IsDir() {
		return "", false, failf("%s is a directory", t.rel)
	}
	if !info.Mode().IsRegular() {
		return "", false, notRegular(t, info)
	}
	var r io.Reader = f
	if maxRead > 0 {
		if info.Size() > maxRead {
			return "", true, &tooLarge{rel: t.rel, size: info.Size(), limit: maxRead}
		}
		// The file may grow after the stat.
		r = io.LimitReader(f, maxRead+1)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return "", false, fmt.Errorf("read %s: %w", t.rel, err)
	}
	if maxRead > 0 && int64(len(data)) > maxRead {
		return "", true, &tooLarge{rel: t.rel, size: int64(len(data)), limit: maxRead}
	}
	return string(data), true, nil
}

// replaceFile writes content through a temp file and a rename, so that a
// crash or a full disk never leaves a half-written source file, and keeps
// the permissions of the file it replaces. Directories, temp file and
// rename all go through the workspace's os.Root.
func replaceFile(t target, content string) error {
	if dir := filepath.Dir(t.name); dir != "." {
		if err := t.fsys.MkdirAll(dir, 0o755); err != nil {
			if escapes(err) {
				return escaped(t)
			}
			// Usually a file where a directory should be: the model can fix it.
			return failf("cannot create the directory of %s: %v", t.rel, stripPath(err))
		}
	}
	mode := fs.FileMode(0o644)
	if info, err := t.fsys.Stat(t.name); err == nil {
		mode = info.Mode().Perm()
	}
	if err := writeInRoot(t.fsys, t.name, []byte(content), mode); err != nil {
		switch {
		case escapes(err):
			return escaped(t)
		case errors.Is(err, fs.ErrPermission):
			return failf("%s cannot be written: permission denied", t.rel)
		}
		return fmt.Errorf("write %s: %w", t.rel, err)
	}
	return nil
}

// fileDiff is the change shown to people approving or reviewing the call.
func fileDiff(rel, old, updated string, existed bool) results.FileDiff {
	from := "a/" + rel
	if !existed {
		from = "/dev/null"
	}
	if isBinary([]byte(old)) || isBinary([]byte(updated)) {
		return results.FileDiff{Path: rel, Diff: fmt.Sprintf("Binary files %s and b/%s differ\n", from, rel)}
	}
	return results.FileDiff{Path: rel, Diff: unifiedDiff(from, "b/"+rel, old, updated)}
}
