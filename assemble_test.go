package tollgate

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/policy"
)

// TestNewPluginRefusesOverlap: with the workspace at "." and the
// default data directory in it, read_file (no approval) would return the
// stored connection tokens; the worker must refuse to start instead.
func TestNewPluginRefusesOverlap(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	ws := filepath.Join(base, "ws")
	data := filepath.Join(base, "data")
	require.NoError(t, os.MkdirAll(ws, 0o755))
	require.NoError(t, os.MkdirAll(data, 0o700))
	alias := filepath.Join(base, "alias")
	require.NoError(t, os.Symlink(ws, alias))

	tests := []struct {
		name, data, ws string
		want           []string
	}{
		{"default data dir in workspace dot", ".tollgate", ".", []string{"the data directory .tollgate (" + filepath.Join(ws, ".tollgate") + ") is inside the workspace . (" + ws + ")", "--data", "--workspace"}},
		{"data inside workspace", filepath.Join(ws, "state"), ws, []string{"is inside the workspace"}},
		{"data deep inside, not created yet", filepath.Join(ws, "a", "b", "state"), ws, []string{"is inside the workspace"}},
		{"data inside through a link", filepath.Join(alias, ".tollgate"), ws, []string{"is inside the workspace", alias}},
		{"workspace inside data", data, filepath.Join(data, "workspace"), []string{"the workspace " + filepath.Join(data, "workspace") + " is inside the data directory " + data}},
		{"same", data, data, []string{"are the same directory"}},
		{"same through a link", alias, ws + string(filepath.Separator) + ".", []string{"are the same directory"}},
		{"relative dotdot", filepath.Join("..", "ws", ".tollgate"), ".", []string{"is inside the workspace"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Chdir(ws)
			_, err := NewPlugin(Options{DataDir: tt.data, Workspace: tt.ws})
			require.Error(t, err)
			for _, w := range tt.want {
				require.ErrorContains(t, err, w)
			}
		})
	}
	// Refused before anything was created.
	for _, p := range []string{filepath.Join(ws, ".tollgate"), filepath.Join(ws, "state"), filepath.Join(ws, "a"), filepath.Join(data, "workspace")} {
		_, err := os.Lstat(p)
		require.ErrorIs(t, err, os.ErrNotExist, p)
	}
}

func TestNewPluginSeparateDirs(t *testing.T) {
	base := t.TempDir()
	t.Chdir(base)
	// Side by side, including a name that merely starts like the other.
	for _, pair := range [][2]string{{".tollgate", "workspace"}, {"ws-data", "ws"}, {filepath.Join(base, "d"), filepath.Join(base, "w")}} {
		_, err := NewPlugin(Options{DataDir: pair[0], Workspace: pair[1]})
		require.NoError(t, err, "data %s, workspace %s", pair[0], pair[1])
	}
	// The defaults, as the worker passes them.
	_, err := NewPlugin(Options{DataDir: ".tollgate"})
	require.NoError(t, err)
	require.DirExists(t, filepath.Join(base, "workspace"))
}

func TestNewPluginChoosesBuiltinsAndRefusesUnknownOnes(t *testing.T) {
	base := t.TempDir()
	dirs := func(o Options) Options {
		o.DataDir, o.Workspace = filepath.Join(base, "data"), filepath.Join(base, "ws")
		return o
	}
	p, err := NewPlugin(dirs(Options{Builtins: []string{"read_file", "list_dir"}}))
	require.NoError(t, err)
	require.Equal(t, []string{"list_dir", "read_file"}, p.acts.Tools.Names())

	p, err = NewPlugin(dirs(Options{NoBuiltins: true}))
	require.NoError(t, err)
	require.Empty(t, p.acts.Tools.Names())

	_, err = NewPlugin(dirs(Options{Builtins: []string{"read_file", "rm_rf"}}))
	require.ErrorContains(t, err, `no built-in tool "rm_rf"; the built-ins are`)
}

// A rule that reads a field write_file's arguments lack stops the worker
// at start, with a sentence naming the rule and the field; the example
// policy file starts, skipping (and reporting) its rule for a tool this
// worker does not offer.
func TestNewPluginRefusesABadRule(t *testing.T) {
	base := t.TempDir()
	o := Options{DataDir: filepath.Join(base, "data"), Workspace: filepath.Join(base, "ws")}
	o.Rules = []policy.Rule{{Name: "drafts", Tools: []string{"write_file"}, When: `args.pth.startsWith("drafts/")`, Action: policy.ActionAllow}}
	_, err := NewPlugin(o)
	require.ErrorContains(t, err, `tollgate: approval rules: rule "drafts" reads field "pth", which tool write_file does not have (its arguments are: content, path)`)

	o.Rules, err = policy.Load("examples/policy.yaml")
	require.NoError(t, err)
	p, err := NewPlugin(o)
	require.NoError(t, err)
	require.True(t, p.features.Rules)
	require.Equal(t, []string{
		`rule "large_refund" names tool "issue_refund", which this worker does not offer`,
		`rule "large_refund" names tool "refunds.issue_refund", which this worker does not offer`,
	}, p.SkippedRules())
}
