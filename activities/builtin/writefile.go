package builtin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/tollgate-dev/tollgate/activities/tool"
	"github.com/tollgate-dev/tollgate/results"
)

type writeFileArgs struct {
	Path    string `json:"path" jsonschema:"file to write; missing parent directories are created"`
	Content string `json:"content" jsonschema:"the complete new content of the file"`
}

func writeFileTool(Options) (tool.Tool, error) {
	return tool.Func(tool.Spec{
		Name:        WriteFile,
		Description: "Create or overwrite a file in the workspace with the given content. Returns a diff of the change.",
		Approval:    tool.ApprovalAlways,
		// Writing the same content twice leaves the same file.
		Idempotent: true,
	}, func(ctx context.Context, call tool.Call, args writeFileArgs) (results.Outcome, error) {
		if args.Path == "" {
			return results.FailTool("path is empty"), nil
		}
		w, err := openFiles(call)
		if err != nil {
			return outcome(err)
		}
		defer w.close()
		t, err := w.resolve(args.Path)
		if err != nil {
			return outcome(err)
		}
		old, existed, err := readForChange(t)
		if err != nil {
			return outcome(err)
		}
		if existed && old == args.Content {
			return results.SucceedText(fmt.Sprintf("%s already has this content; nothing changed", t.rel)), nil
		}
		if err := replaceFile(t, args.Content); err != nil {
			return outcome(err)
		}
		verb := "updated"
		if !existed {
			verb = "created"
		}
		text := fmt.Sprintf("%s %s (%d bytes)", verb, t.rel, len(args.Content))
		return results.SucceedText(text).WithDiffs(fileDiff(t.rel, old, args.Content, existed)), nil
	})
}

type editFileArgs struct {
	Path      string `json:"path" jsonschema:"file to edit"`
	OldString string `json:"old_string" jsonschema:"exact text to replace; must occur exactly once in the file"`
	NewString string `json:"new_string" jsonschema:"text to put in its place"`
}

func editFileTool(Options) (tool.Tool, error) {
	return tool.Func(tool.Spec{
		Name:        EditFile,
		Description: "Replace one exact occurrence of old_string with new_string in a workspace file. old_string must match exactly once, including whitespace; add surrounding lines to make it unique. Returns a diff of the change.",
		Approval:    tool.ApprovalAlways,
		// Not idempotent: once applied, the same edit no longer matches.
	}, func(ctx context.Context, call tool.Call, args editFileArgs) (results.Outcome, error) {
		if args.Path == "" {
			return results.FailTool("path is empty"), nil
		}
		if args.OldString == "" {
			return results.FailTool("old_string is empty; use %s to create a file", WriteFile), nil
		}
		if args.OldString == args.NewString {
			return results.FailTool("old_string and new_string are the same; nothing to change"), nil
		}
		w, err := openFiles(call)
		if err != nil {
			return outcome(err)
		}
		defer w.close()
		t, err := w.resolve(args.Path)
		if err != nil {
			return outcome(err)
		}
		old, existed, err := readForChange(t)
		if err != nil {
			return outcome(err)
		}
		if !existed {
			return results.FailTool("%s does not exist", t.rel), nil
		}
		switch n := strings.Count(old, args.OldString); n {
		case 1:
		case 0:
			return results.FailTool("old_string was not found in %s; read the file and copy the text exactly", t.rel), nil
		default:
			return results.FailTool("old_string occurs %d times in %s; include more surrounding text so it matches exactly once", n, t.rel), nil
		}
		updated := strings.Replace(old, args.OldString, args.NewString, 1)
		if err := replaceFile(t, updated); err != nil {
			return outcome(err)
		}
		text := fmt.Sprintf("edited %s", t.rel)
		return results.SucceedText(text).WithDiffs(fileDiff(t.rel, old, updated, true)), nil
	})
}

// readForChange reads the current content of a file about to be written,
// through the workspace's os.Root.
func readForChange(t target) (content string, existed bool, err error) {
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
	data, err := io.ReadAll(f)
	if err != nil {
		return "", false, fmt.Errorf("read %s: %w", t.rel, err)
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
