// Command notes is a small MCP server over stdio for Tollgate's MCP demo:
// notes are Markdown files in one directory. It offers three tools, one
// of each kind Tollgate treats differently:
//
//   - list (read-only): runs without approval.
//   - append (destructive): a person approves each call first.
//   - rename: asks the user, through an MCP elicitation, what to do when
//     the new name is taken; Tollgate parks the call as a choice.
//
// Run it as Tollgate does, with examples/mcp/mcp.json:
//
//	go run ./examples/mcp/notes --dir workspace/notes --seed
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	dir := flag.String("dir", "notes", "directory of the notes (created if missing)")
	seed := flag.Bool("seed", false, "start a new directory with a todo note")
	flag.Parse()
	n, err := open(*dir, *seed)
	if err != nil {
		log.Fatal(err)
	}
	defer n.root.Close()
	if err := n.server().Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}

// notes is the directory, opened as an os.Root so that no name leads
// out of it.
type notes struct {
	root *os.Root
}

func open(dir string, seed bool) (*notes, error) {
	_, statErr := os.Stat(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	if seed && errors.Is(statErr, fs.ErrNotExist) {
		if err := root.WriteFile("todo.md", []byte("- water the plants\n"), 0o644); err != nil {
			return nil, err
		}
	}
	return &notes{root: root}, nil
}

var noteName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func file(name string) (string, error) {
	if !noteName.MatchString(name) {
		return "", fmt.Errorf("note name %q must be 1-64 letters, digits, '_' or '-'", name)
	}
	return name + ".md", nil
}

type listArgs struct{}

type appendArgs struct {
	Name string `json:"name" jsonschema:"the note to append to; created if missing"`
	Text string `json:"text" jsonschema:"the Markdown to append"`
}

type renameArgs struct {
	From string `json:"from" jsonschema:"the note to rename"`
	To   string `json:"to" jsonschema:"its new name"`
}

func (n *notes) server() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "1.0.0"}, nil)
	yes := true
	mcp.AddTool(s, &mcp.Tool{
		Name:        "list",
		Description: "List the notes with their first line.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, Title: "List notes"},
	}, n.list)
	mcp.AddTool(s, &mcp.Tool{
		Name:        "append",
		Description: "Append Markdown to a note, creating it if it does not exist.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes, Title: "Append to a note"},
	}, n.append)
	mcp.AddTool(s, &mcp.Tool{
		Name:        "rename",
		Description: "Rename a note. If the new name is taken, the user is asked whether to merge the notes or keep both.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes, Title: "Rename a note"},
	}, n.rename)
	return s
}

func text(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
}

func failed(format string, args ...any) *mcp.CallToolResult {
	r := text(format, args...)
	r.IsError = true
	return r
}

func (n *notes) list(_ context.Context, _ *mcp.CallToolRequest, _ listArgs) (*mcp.CallToolResult, any, error) {
	entries, err := fs.ReadDir(n.root.FS(), ".")
	if err != nil {
		return nil, nil, err
	}
	var lines []string
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".md")
		if !ok || e.IsDir() {
			continue
		}
		b, err := n.root.ReadFile(e.Name())
		if err != nil {
			return nil, nil, err
		}
		first, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
		lines = append(lines, fmt.Sprintf("%s: %s", name, first))
	}
	if len(lines) == 0 {
		return text("There are no notes."), nil, nil
	}
	slices.Sort(lines)
	return text("%d notes:\n%s", len(lines), strings.Join(lines, "\n")), nil, nil
}

func (n *notes) append(_ context.Context, _ *mcp.CallToolRequest, a appendArgs) (*mcp.CallToolResult, any, error) {
	f, err := file(a.Name)
	if err != nil {
		return failed("%v", err), nil, nil
	}
	w, err := n.root.OpenFile(f, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, nil, err
	}
	defer w.Close()
	body := strings.TrimRight(a.Text, "\n") + "\n"
	if _, err := w.WriteString(body); err != nil {
		return nil, nil, err
	}
	return text("Appended %d bytes to %s.", len(body), a.Name), nil, nil
}

// rename asks through a multi round-trip result, so the same handler
// serves clients of every protocol version: for older ones the SDK sends
// the question as an elicitation request and calls the handler again
// with the answer.
func (n *notes) rename(_ context.Context, req *mcp.CallToolRequest, a renameArgs) (*mcp.CallToolResult, any, error) {
	from, err := file(a.From)
	if err != nil {
		return failed("%v", err), nil, nil
	}
	to, err := file(a.To)
	if err != nil {
		return failed("%v", err), nil, nil
	}
	if _, err := n.root.Stat(from); err != nil {
		return failed("there is no note %s", a.From), nil, nil
	}
	if from == to {
		return text("%s already has that name.", a.From), nil, nil
	}
	if _, err := n.root.Stat(to); errors.Is(err, fs.ErrNotExist) {
		if err := n.root.Rename(from, to); err != nil {
			return nil, nil, err
		}
		return text("Renamed %s to %s.", a.From, a.To), nil, nil
	}
	answer, ok := req.Params.InputResponses["taken"].(*mcp.ElicitResult)
	if !ok {
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"taken": &mcp.ElicitParams{
			Message: fmt.Sprintf("There is already a note called %s. What should happen to %s?", a.To, a.From),
			RequestedSchema: &jsonschema.Schema{
				Type:     "object",
				Required: []string{"action"},
				Properties: map[string]*jsonschema.Schema{"action": {
					Type:  "string",
					Title: "Action",
					Enum:  []any{"merge", "keep_both"},
					Extra: map[string]any{"enumNames": []any{"Merge it into " + a.To, "Keep both (rename to " + a.To + "-2)"}},
				}},
			},
		}}}, nil, nil
	}
	if answer.Action != "accept" {
		return text("Left %s as it was (the user chose %s).", a.From, answer.Action), nil, nil
	}
	switch answer.Content["action"] {
	case "merge":
		b, err := n.root.ReadFile(from)
		if err != nil {
			return nil, nil, err
		}
		w, err := n.root.OpenFile(to, os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return nil, nil, err
		}
		defer w.Close()
		if _, err := w.Write(b); err != nil {
			return nil, nil, err
		}
		if err := n.root.Remove(from); err != nil {
			return nil, nil, err
		}
		return text("Merged %s into %s.", a.From, a.To), nil, nil
	default:
		alt := a.To + "-2"
		altFile, _ := file(alt)
		if err := n.root.Rename(from, altFile); err != nil {
			return nil, nil, err
		}
		return text("%s is taken; renamed %s to %s.", a.To, a.From, alt), nil, nil
	}
}
