package results_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/results"
)

// A source is a link a person may open from a card: only an absolute
// http(s) URL with a host is one, whoever made the outcome.
func TestSourcesAreHTTPOnly(t *testing.T) {
	for _, bad := range []string{
		"javascript:alert(1)", "JavaScript:alert(1)", " javascript:alert(1)", "data:text/html,<script>alert(1)</script>",
		"file:///etc/passwd", "vbscript:x", "//evil.example/x", "/relative", "https://", "https:///path",
		"https://a.example/\nx", "https://a.example/ x", "a",
	} {
		o := results.SucceedText("x").WithSources(results.Source{URL: bad})
		require.ErrorContains(t, o.Validate(), "http", "%q", bad)
		_, err := json.Marshal(o)
		require.Error(t, err, "%q is never written", bad)
		c := results.Card{CallID: "c1", Tool: "t", State: results.StateSucceeded, Output: o.Success}
		require.Error(t, c.Validate(), "%q in a card", bad)
	}
	for _, good := range []string{"https://example.com", "http://example.com:8080/a?b=c#d", "HTTPS://Example.com/A"} {
		require.NoError(t, results.SucceedText("x").WithSources(results.Source{URL: good}).Validate(), good)
	}
}

// What was stored before sources were checked still decodes (a turn's
// history must replay), without the sources that are not http(s).
func TestDecodingDropsSourcesThatAreNotHTTP(t *testing.T) {
	var o results.Outcome
	require.NoError(t, json.Unmarshal([]byte(`{"v":1,"kind":"success","success":{"parts":[{"type":"text","text":"x"}],
		"sources":[{"url":"javascript:alert(1)","title":"click"},{"url":"https://example.com/a","title":"A"},{"url":"file:///notes/a.md"}]}}`), &o))
	require.Equal(t, []results.Source{{URL: "https://example.com/a", Title: "A"}}, o.Success.Sources)

	var c results.Card
	require.NoError(t, json.Unmarshal([]byte(`{"v":1,"call_id":"c1","tool":"t","state":"succeeded",
		"output":{"sources":[{"url":"data:text/html,x"}]}}`), &c))
	require.Empty(t, c.Output.Sources)
}
