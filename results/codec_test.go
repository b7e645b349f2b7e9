package results_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/results"
)

var update = flag.Bool("update", false, "rewrite golden files and the fuzz seed corpus")

func encodeIndented(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	require.NoError(t, err)
	return append(b, '\n')
}

func checkGolden[T any](t *testing.T, name string, want T) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name+".json")
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, encodeIndented(t, want), 0o644))
	}
	file, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./results/ -run Golden -update to create it")

	var got T
	require.NoError(t, json.Unmarshal(file, &got))
	require.Equal(t, want, got, "decoded golden differs from the fixture")
	require.Equal(t, string(file), string(encodeIndented(t, got)), "re-encoding changed the bytes")
}

func TestGoldenOutcomes(t *testing.T) {
	for _, g := range goldenOutcomes() {
		t.Run(g.name, func(t *testing.T) { checkGolden(t, g.name, g.o) })
	}
}

func TestGoldenCards(t *testing.T) {
	for _, g := range goldenCards() {
		t.Run(g.name, func(t *testing.T) { checkGolden(t, g.name, g.c) })
	}
}

// TestGoldenFilesAreAllChecked keeps a stray golden file from going stale
// unnoticed: each one must belong to a fixture.
func TestGoldenFilesAreAllChecked(t *testing.T) {
	known := map[string]bool{}
	for _, g := range goldenOutcomes() {
		known[g.name+".json"] = true
	}
	for _, g := range goldenCards() {
		known[g.name+".json"] = true
	}
	entries, err := os.ReadDir(filepath.Join("testdata", "golden"))
	require.NoError(t, err)
	require.Len(t, entries, len(known))
	for _, e := range entries {
		require.True(t, known[e.Name()], "unexpected golden file %s", e.Name())
	}
}

func TestGoldenWireShape(t *testing.T) {
	// Spot checks on the bytes a non-Go reader relies on: the version and
	// discriminator are top-level fields next to the body.
	b, err := json.Marshal(results.FailTool("nope"))
	require.NoError(t, err)
	require.JSONEq(t, `{"v":1,"kind":"tool_error","tool_error":{"message":"nope"}}`, string(b))

	b, err = json.Marshal(results.Card{CallID: "c", Tool: "t", State: results.StateRunning})
	require.NoError(t, err)
	require.JSONEq(t, `{"v":1,"call_id":"c","tool":"t","arguments":null,"state":"running"}`, string(b))

	// A pointer encodes like the value.
	o := results.SucceedText("x")
	viaPtr, err := json.Marshal(&o)
	require.NoError(t, err)
	viaVal, err := json.Marshal(o)
	require.NoError(t, err)
	require.Equal(t, viaVal, viaPtr)
}

func TestRoundTripCanonicalises(t *testing.T) {
	// What a decoder reads is canonical, so the encode/decode cycle is a
	// fixed point from the first decode on.
	in := `{"v":1,"kind":"success","success":{"parts":[{"type":"json","json":{ "a" : "<b>" }},{"type":"media","media_type":"image/png","data":""}],"sources":[],"diffs":[],"details":{ "x" : [ 1 , 2 ] }}}`
	var o results.Outcome
	require.NoError(t, json.Unmarshal([]byte(in), &o))
	require.Equal(t, results.Outcome{Kind: results.KindSuccess, Success: &results.Success{Parts: []results.Part{
		{Type: results.PartJSON, JSON: json.RawMessage(`{"a":"\u003cb\u003e"}`)},
		{Type: results.PartMedia, MediaType: "image/png"},
	}, Details: json.RawMessage(`{"x":[1,2]}`)}}, o)

	in = `{"v":1,"kind":"interrupt","interrupt":{"type":"approval","prompt":"p","options":[],"schema":{ }}}`
	require.NoError(t, json.Unmarshal([]byte(in), &o))
	require.Equal(t, results.Outcome{Kind: results.KindInterrupt, Interrupt: &results.Interrupt{Type: results.InterruptApproval, Prompt: "p", Schema: json.RawMessage(`{}`)}}, o)

	in = `{"v":1,"kind":"connection_required","connection_required":{"provider":"p","scopes":[]}}`
	require.NoError(t, json.Unmarshal([]byte(in), &o))
	require.Equal(t, results.NeedConnection("p", ""), o)

	in = `{"v":1,"call_id":"c","tool":"t","state":"waiting_connection","connection":{"provider":"p","scopes":[]},` +
		`"edited_arguments":{ "a" : 1 },"decisions":[{"decision":"answer","at":"2025-03-14T17:09:26.5+02:00","answer":[ 1 ],"arguments":{ }}]}`
	var c results.Card
	require.NoError(t, json.Unmarshal([]byte(in), &c))
	require.Equal(t, results.Card{CallID: "c", Tool: "t", State: results.StateWaitingConnection,
		Connection:      &results.ConnectionRequired{Provider: "p"},
		EditedArguments: json.RawMessage(`{"a":1}`),
		Decisions:       []results.Decision{{Decision: results.DecisionAnswer, At: t0, Answer: json.RawMessage(`[1]`), Arguments: json.RawMessage(`{}`)}},
	}, c)
	require.Equal(t, time.UTC, c.Decisions[0].At.Location())

	in = `{"v":1,"call_id":"c","tool":"t","state":"running","arguments":null,"decisions":[]}`
	require.NoError(t, json.Unmarshal([]byte(in), &c))
	require.Equal(t, results.Card{CallID: "c", Tool: "t", State: results.StateRunning}, c)

	in = `{"v":1,"call_id":"c","tool":"t","state":"succeeded","output":{"parts":[]}}`
	require.NoError(t, json.Unmarshal([]byte(in), &c))
	require.Equal(t, results.Card{CallID: "c", Tool: "t", State: results.StateSucceeded, Output: &results.Success{}}, c)
}

func TestRoundTripEveryFixture(t *testing.T) {
	for _, g := range goldenOutcomes() {
		b, err := json.Marshal(g.o)
		require.NoError(t, err)
		var got results.Outcome
		require.NoError(t, json.Unmarshal(b, &got))
		require.Equal(t, g.o, got, g.name)
	}
	for _, g := range goldenCards() {
		b, err := json.Marshal(g.c)
		require.NoError(t, err)
		var got results.Card
		require.NoError(t, json.Unmarshal(b, &got))
		require.Equal(t, g.c, got, g.name)
	}
}

func TestCardEncodeRejectsInvalidRawJSON(t *testing.T) {
	base := results.Card{CallID: "c", Tool: "t", State: results.StateRunning}
	tests := []struct {
		name    string
		mod     func(*results.Card)
		wantErr string
	}{
		{"arguments", func(c *results.Card) { c.Arguments = json.RawMessage(`{"a":`) }, "card c arguments are not valid JSON"},
		{"edited arguments", func(c *results.Card) { c.EditedArguments = json.RawMessage(`nope`) }, "card c edited_arguments are not valid JSON"},
		{"decision arguments", func(c *results.Card) {
			c.Decisions = []results.Decision{{Decision: results.DecisionApprove, Arguments: json.RawMessage(`{`)}}
		}, "card c decision 0 holds invalid JSON"},
		{"decision answer", func(c *results.Card) {
			c.Decisions = []results.Decision{{Decision: results.DecisionAnswer, Answer: json.RawMessage(`'x'`)}}
		}, "card c decision 0 holds invalid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base
			tt.mod(&c)
			_, err := json.Marshal(c)
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

// decodeErrors are inputs each decoder must reject. The golden bodies make
// the otherwise-valid cases, so each case breaks exactly one thing.
func outcomeDecodeErrors() []struct{ name, in, wantErr string } {
	return []struct{ name, in, wantErr string }{
		{"unknown kind", `{"v":1,"kind":"teleport"}`, `unknown outcome kind "teleport"`},
		{"unknown kind with its own body", `{"v":1,"kind":"teleport","teleport":{"to":"mars"}}`, `unknown outcome kind "teleport"`},
		{"no kind", `{"v":1,"success":{}}`, "outcome has no kind"},
		{"missing version", `{"kind":"success","success":{}}`, `missing format version "v"`},
		{"version zero", `{"v":0,"kind":"success","success":{}}`, `missing format version "v"`},
		{"negative version", `{"v":-1,"kind":"success","success":{}}`, "unknown format version -1"},
		{"version of another type", `{"v":"1","kind":"success","success":{}}`, "cannot unmarshal string"},
		{"unknown top-level field", `{"v":1,"kind":"success","success":{},"colour":"red"}`, `unknown field "colour"`},
		{"unknown body field", `{"v":1,"kind":"tool_error","tool_error":{"message":"m","code":7}}`, `unknown field "code"`},
		{"body not matching kind", `{"v":1,"kind":"success","tool_error":{"message":"m"}}`, `kind "success" has no success body`},
		{"two bodies", `{"v":1,"kind":"success","success":{},"tool_error":{"message":"m"}}`, "more than one body"},
		{"null body", `{"v":1,"kind":"transfer","transfer":null}`, "has no transfer body"},
		{"invalid body", `{"v":1,"kind":"transfer","transfer":{"target":""}}`, "transfer names no target"},
		{"invalid part", `{"v":1,"kind":"success","success":{"parts":[{"type":"video"}]}}`, `unknown part type "video"`},
		{"trailing object", `{"v":1,"kind":"success","success":{}}{}`, "trailing data"},
		{"trailing brace", `{"v":1,"kind":"success","success":{}}}`, "trailing data"},
		{"trailing bracket", `{"v":1,"kind":"success","success":{}}]`, "trailing data"},
		{"trailing word", `{"v":1,"kind":"success","success":{}} x`, "trailing data"},
		{"truncated", `{"v":1,"kind":"succ`, "unexpected EOF"},
		{"not an object", `[1,2]`, "cannot unmarshal array"},
		{"string", `"success"`, "cannot unmarshal string"},
		{"null", `null`, `missing format version "v"`},
		{"empty", ``, "no JSON value"},
		{"kind of another type", `{"v":1,"kind":5}`, "cannot unmarshal number"},
	}
}

func TestDecodeOutcomeErrors(t *testing.T) {
	for _, tt := range outcomeDecodeErrors() {
		t.Run(tt.name, func(t *testing.T) {
			// The decoder writes nothing on error: a caller that ignores the
			// error still does not get a plausible-looking zero value
			// replacing what it had.
			o := results.FailTool("untouched")
			err := o.UnmarshalJSON([]byte(tt.in))
			require.Error(t, err)
			require.ErrorContains(t, err, tt.wantErr)
			require.Contains(t, err.Error(), "decode outcome")
			require.Equal(t, results.FailTool("untouched"), o)

			// Through encoding/json (which checks syntax first) it is an
			// error too.
			require.Error(t, json.Unmarshal([]byte(tt.in), &o))
		})
	}
}

func TestDecodeNewerVersion(t *testing.T) {
	// A newer writer may add kinds, states and fields; the version is what
	// the reader should be told about, not the first thing it does not know.
	for _, in := range []string{
		`{"v":2,"kind":"success","success":{}}`,
		`{"v":2,"kind":"teleport","teleport":{}}`,
		`{"v":99,"kind":"success","success":{},"new_field":true}`,
	} {
		var o results.Outcome
		err := json.Unmarshal([]byte(in), &o)
		require.ErrorIs(t, err, results.ErrUnknownVersion, in)
		require.ErrorContains(t, err, "this build reads up to 1")
		require.Equal(t, results.Outcome{}, o)
	}
	for _, in := range []string{
		`{"v":2,"call_id":"c","tool":"t","state":"running"}`,
		`{"v":2,"call_id":"c","tool":"t","state":"paused","paused_until":"tomorrow"}`,
	} {
		var c results.Card
		err := json.Unmarshal([]byte(in), &c)
		require.ErrorIs(t, err, results.ErrUnknownVersion, in)
		require.Equal(t, results.Card{}, c)
	}
}

func TestDecodeCardErrors(t *testing.T) {
	tests := []struct{ name, in, wantErr string }{
		{"unknown state", `{"v":1,"call_id":"c","tool":"t","state":"teleport"}`, `unknown card state "teleport"`},
		{"unknown state with its own field", `{"v":1,"call_id":"c","tool":"t","state":"paused","paused_until":"x"}`, `unknown card state "paused"`},
		{"no state", `{"v":1,"call_id":"c","tool":"t"}`, "card c has no state"},
		{"missing version", `{"call_id":"c","tool":"t","state":"running"}`, `missing format version "v"`},
		{"unknown field", `{"v":1,"call_id":"c","tool":"t","state":"running","colour":"red"}`, `unknown field "colour"`},
		{"field not allowed in state", `{"v":1,"call_id":"c","tool":"t","state":"running","reason":"x"}`, "in state running must not carry reason"},
		{"failed without failure", `{"v":1,"call_id":"c","tool":"t","state":"failed"}`, "failed without a failure"},
		{"unknown failure reason", `{"v":1,"call_id":"c","tool":"t","state":"failed","failure":{"reason":"gremlins"}}`, `unknown failure reason "gremlins"`},
		{"unknown decision", `{"v":1,"call_id":"c","tool":"t","state":"running","decisions":[{"decision":"maybe","at":"2025-01-01T00:00:00Z"}]}`, `unknown decision "maybe"`},
		{"bad time", `{"v":1,"call_id":"c","tool":"t","state":"running","decisions":[{"decision":"approve","at":"yesterday"}]}`, "cannot parse"},
		{"no call id", `{"v":1,"tool":"t","state":"running"}`, "card has no call_id"},
		{"trailing data", `{"v":1,"call_id":"c","tool":"t","state":"running"}}`, "trailing data"},
		{"malformed", `{"v":1,"call_id":`, "unexpected EOF"},
		{"null", `null`, `missing format version "v"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := results.Card{CallID: "untouched"}
			err := c.UnmarshalJSON([]byte(tt.in))
			require.ErrorContains(t, err, tt.wantErr)
			require.Contains(t, err.Error(), "decode card")
			require.Equal(t, results.Card{CallID: "untouched"}, c)
			require.Error(t, json.Unmarshal([]byte(tt.in), &c))
		})
	}
}

func TestDecodeOutcomeInsideAnotherValue(t *testing.T) {
	// Outcomes travel inside other payloads (activity results, queries);
	// an error deep inside must surface, and null must not become a zero
	// outcome that looks like a result.
	type envelope struct {
		Out results.Outcome `json:"out"`
	}
	var e envelope
	err := json.Unmarshal([]byte(`{"out":{"v":1,"kind":"teleport"}}`), &e)
	require.ErrorContains(t, err, `unknown outcome kind "teleport"`)
	require.Error(t, json.Unmarshal([]byte(`{"out":null}`), &e))

	b, err := json.Marshal(envelope{Out: results.TransferTo("x", "")})
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &e))
	require.Equal(t, results.TransferTo("x", ""), e.Out)

	_, err = json.Marshal(envelope{})
	require.ErrorContains(t, err, "encode outcome: outcome has no kind")
}

// fuzzSeed is the "go test fuzz v1" file format for one []byte argument.
func fuzzSeed(data []byte) []byte {
	return fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", data)
}

func cardDecodeErrorSeeds() map[string]string {
	return map[string]string{
		"unknown_state":     `{"v":1,"call_id":"c","tool":"t","state":"teleport"}`,
		"missing_version":   `{"call_id":"c","tool":"t","state":"running"}`,
		"newer_version":     `{"v":2,"call_id":"c","tool":"t","state":"running"}`,
		"unknown_field":     `{"v":1,"call_id":"c","tool":"t","state":"running","colour":"red"}`,
		"forbidden_field":   `{"v":1,"call_id":"c","tool":"t","state":"running","reason":"x"}`,
		"trailing_brace":    `{"v":1,"call_id":"c","tool":"t","state":"running"}}`,
		"malformed":         `{"v":1,"call_id":`,
		"offset_time":       `{"v":1,"call_id":"c","tool":"t","state":"running","decisions":[{"decision":"approve","at":"2025-03-14T17:09:26.50+02:00"}]}`,
		"zero_offset_time":  `{"v":1,"call_id":"c","tool":"t","state":"running","decisions":[{"decision":"approve","at":"2025-03-14T17:09:26+00:00"}]}`,
		"empty_lists":       `{"v":1,"call_id":"c","tool":"t","state":"waiting_connection","connection":{"provider":"p","scopes":[]},"decisions":[]}`,
		"spaced_raw_json":   `{"v":1,"call_id":"c","tool":"t","state":"running","arguments":{ "a" : "<&>" },"edited_arguments":[ ]}`,
		"absent_arguments":  `{"v":1,"call_id":"c","tool":"t","state":"running"}`,
		"upper_case_fields": `{"V":1,"Call_ID":"c","TOOL":"t","State":"running"}`,
	}
}

func outcomeSeedName(name string) string {
	return strings.NewReplacer(" ", "_", "-", "_").Replace(name)
}

// TestFuzzCorpus writes (with -update) and checks the committed seed
// corpus: the goldens, which decode, and the malformed inputs above, which
// must not.
func TestFuzzCorpus(t *testing.T) {
	want := map[string][]byte{}
	for _, g := range goldenOutcomes() {
		b, err := os.ReadFile(filepath.Join("testdata", "golden", g.name+".json"))
		require.NoError(t, err)
		want[filepath.Join("FuzzDecodeOutcome", "golden_"+g.name)] = b
	}
	for _, e := range outcomeDecodeErrors() {
		want[filepath.Join("FuzzDecodeOutcome", "bad_"+outcomeSeedName(e.name))] = []byte(e.in)
	}
	want[filepath.Join("FuzzDecodeOutcome", "canonical_forms")] = []byte(
		`{"v":1,"kind":"success","success":{"parts":[{"type":"json","json":{ "a" : "<b>\u2028" }},{"type":"media","media_type":"x","data":""}],"sources":[],"details":null}}`)
	for _, g := range goldenCards() {
		b, err := os.ReadFile(filepath.Join("testdata", "golden", g.name+".json"))
		require.NoError(t, err)
		want[filepath.Join("FuzzDecodeCard", "golden_"+g.name)] = b
	}
	for name, in := range cardDecodeErrorSeeds() {
		want[filepath.Join("FuzzDecodeCard", "seed_"+name)] = []byte(in)
	}

	for name, data := range want {
		path := filepath.Join("testdata", "fuzz", name)
		if *update {
			require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
			require.NoError(t, os.WriteFile(path, fuzzSeed(data), 0o644))
		}
		got, err := os.ReadFile(path)
		require.NoError(t, err, "run go test ./results/ -run FuzzCorpus -update")
		require.True(t, bytes.Equal(fuzzSeed(data), got), "%s is stale; rerun with -update", path)
	}
}

func TestErrUnknownVersionIsDistinct(t *testing.T) {
	var o results.Outcome
	err := json.Unmarshal([]byte(`{"kind":"success","success":{}}`), &o)
	require.Error(t, err)
	require.False(t, errors.Is(err, results.ErrUnknownVersion), "a missing version is not a newer one")
}

func TestCompactJSON(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{`{ "b": 1,
		    "a": [1, 2.50] }`, `{"b":1,"a":[1,2.50]}`},
		{`{"x": 12345678901234567890}`, `{"x":12345678901234567890}`},
		{`not json {`, `not json {`},
	} {
		if got := string(results.CompactJSON(json.RawMessage(c.in))); got != c.want {
			t.Errorf("CompactJSON(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if results.CompactJSON(nil) != nil {
		t.Error("CompactJSON(nil) is not nil")
	}
}
