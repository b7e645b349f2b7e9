package builtin

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"sort"
	"strings"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

// maxListEntries bounds one list_dir answer; a model rarely needs more and
// a node_modules listing would drown the conversation.
const maxListEntries = 2000

type readFileArgs struct {
	Path   string `json:"path" jsonschema:"file to read, relative to the current directory or absolute inside the workspace"`
	Offset int    `json:"offset,omitempty" jsonschema:"first line to return, counting from 1 (default 1)"`
	Limit  int    `json:"limit,omitempty" jsonschema:"maximum number of lines to return (default all)"`
}

func readFileTool(opts Options) (tool.Tool, error) {
	return tool.Func(tool.Spec{
		Name:        ReadFile,
		Description: "Read a file in the workspace. Text comes back as is; optionally only lines offset..offset+limit-1. PNG, JPEG, GIF and WebP images come back as images.",
		Idempotent:  true,
		Concurrent:  true,
		// A read is short and safe to repeat: a local activity.
		Local:     true,
		Workspace: true,
	}, func(ctx context.Context, call tool.Call, args readFileArgs) (results.Outcome, error) {
		if args.Path == "" {
			return results.FailTool("path is empty"), nil
		}
		if args.Offset < 0 || args.Limit < 0 {
			return results.FailTool("offset and limit must not be negative"), nil
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
		out, err := readFile(t, args, opts)
		if err != nil {
			return outcome(err)
		}
		return out, nil
	})
}

func readFile(t target, args readFileArgs, opts Options) (results.Outcome, error) {
	f, info, err := openIn(t)
	if err != nil {
		return results.Outcome{}, openFailure(t, err, "read")
	}
	defer f.Close()
	if info.IsDir() {
		return results.Outcome{}, failf("%s is a directory; use %s", t.rel, ListDir)
	}
	if !info.Mode().IsRegular() {
		return results.Outcome{}, notRegular(t, info)
	}
	br := bufio.NewReaderSize(f, 64*1024)
	head, _ := br.Peek(512)
	if mediaType := imageType(head); mediaType != "" {
		if info.Size() > int64(opts.MaxImageBytes) {
			return results.Outcome{}, failf("%s is a %s image of %d bytes, more than the %d bytes read_file returns", t.rel, mediaType, info.Size(), opts.MaxImageBytes)
		}
		data, err := io.ReadAll(io.LimitReader(br, int64(opts.MaxImageBytes)+1))
		if err != nil {
			return results.Outcome{}, fmt.Errorf("read %s: %w", t.rel, err)
		}
		return results.Succeed(
			results.TextPart(fmt.Sprintf("%s (%s, %d bytes)", t.rel, mediaType, len(data))),
			results.MediaPart(mediaType, data),
		), nil
	}
	if isBinary(head) {
		return results.Outcome{}, failf("%s is a binary file (%s); read_file returns text and images only", t.rel, http.DetectContentType(head))
	}
	if info.Size() == 0 {
		return results.SucceedText(fmt.Sprintf("(%s is empty)", t.rel)), nil
	}

	first := max(args.Offset, 1)
	var out strings.Builder
	line, taken := 0, 0
	for {
		s, err := br.ReadString('\n')
		if s != "" {
			line++
			if line >= first {
				if args.Limit > 0 && taken == args.Limit {
					fmt.Fprintf(&out, "\n[more lines follow; continue with offset=%d]", line)
					break
				}
				if out.Len()+len(s) > opts.MaxReadBytes {
					fmt.Fprintf(&out, "\n[stopped after %d bytes; continue with offset=%d]", out.Len(), line)
					break
				}
				out.WriteString(s)
				taken++
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return results.Outcome{}, fmt.Errorf("read %s: %w", t.rel, err)
		}
	}
	if taken == 0 {
		return results.Outcome{}, failf("%s has %d lines; offset %d is past the end", t.rel, line, first)
	}
	return results.SucceedText(strings.ToValidUTF8(out.String(), "\uFFFD")), nil
}

type listDirArgs struct {
	Path string `json:"path,omitempty" jsonschema:"directory to list (default the current directory)"`
}

func listDirTool(Options) (tool.Tool, error) {
	return tool.Func(tool.Spec{
		Name:        ListDir,
		Description: "List a directory in the workspace, sorted by name. Directories end with '/'.",
		Idempotent:  true,
		Concurrent:  true,
		Local:       true,
		Workspace:   true,
	}, func(ctx context.Context, call tool.Call, args listDirArgs) (results.Outcome, error) {
		w, err := openFiles(call)
		if err != nil {
			return outcome(err)
		}
		defer w.close()
		p := args.Path
		if p == "" {
			p = "."
		}
		t, err := w.resolve(p)
		if err != nil {
			return outcome(err)
		}
		text, err := listDir(t)
		if err != nil {
			return outcome(err)
		}
		return results.SucceedText(text), nil
	})
}

func listDir(t target) (string, error) {
	f, info, err := openIn(t)
	if err != nil {
		return "", openFailure(t, err, "listed")
	}
	defer f.Close()
	if !info.IsDir() {
		return "", failf("%s is not a directory; use %s", t.rel, ReadFile)
	}
	entries, err := f.ReadDir(-1)
	if err != nil {
		return "", fmt.Errorf("list %s: %w", t.rel, err)
	}
	if len(entries) == 0 {
		return fmt.Sprintf("(%s is empty)", t.rel), nil
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
		if e.IsDir() {
			names[i] += "/"
		}
	}
	sort.Strings(names)
	more := ""
	if len(names) > maxListEntries {
		more = fmt.Sprintf("\n[%d more entries not shown]", len(names)-maxListEntries)
		names = names[:maxListEntries]
	}
	return strings.Join(names, "\n") + more, nil
}

// openIn opens t for reading through the workspace's os.Root and reports
// the type of what it opened. Only that type counts: one checked by path
// beforehand may belong to another file by now. openNoBlock keeps a FIFO
// from blocking the open, so that the caller can refuse it.
func openIn(t target) (*os.File, fs.FileInfo, error) {
	f, err := t.fsys.OpenFile(t.name, os.O_RDONLY|openNoBlock, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open %s: %w", t.rel, err)
	}
	info, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, nil, fmt.Errorf("stat %s: %w", t.rel, err)
	}
	return f, info, nil
}

// openFailure turns the failures of openIn that the model can act on into
// tool errors; verb ("read", "listed") says what could not be done.
func openFailure(t target, err error, verb string) error {
	switch {
	case escapes(err):
		return escaped(t)
	case errors.Is(err, fs.ErrNotExist):
		return failf("%s does not exist", t.rel)
	case errors.Is(err, fs.ErrPermission):
		return failf("%s cannot be %s: permission denied", t.rel, verb)
	}
	return err
}

// notRegular refuses devices, FIFOs and sockets, which would block or
// never end when read.
func notRegular(t target, info fs.FileInfo) error {
	return failf("%s is not a regular file (%s)", t.rel, info.Mode().Type())
}

// imageType recognises the image formats model providers accept inline.
func imageType(head []byte) string {
	switch ct := http.DetectContentType(head); ct {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
		return ct
	}
	return ""
}

// isBinary applies git's rule of thumb: a NUL byte in the first 8000
// bytes. Text in another encoding than UTF-8 still reads, with
// replacement characters.
func isBinary(data []byte) bool {
	return bytes.IndexByte(data[:min(len(data), 8000)], 0) >= 0
}

// isDir reports whether p is a directory. Only the shell uses it, to
// choose where to start; the file tools open through os.Root instead.
func isDir(p string) bool {
	info, err := os.Stat(p)
	return err == nil && info.IsDir()
}
