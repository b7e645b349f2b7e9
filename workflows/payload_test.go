package workflows

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"

	"github.com/tollgate-dev/tollgate/results"
)

// rawJSON is a payload holding data as its JSON, byte for byte, as a
// client other than Go's encoder may send it.
func rawJSON(data string) converter.RawValue {
	return converter.NewRawValue(&commonpb.Payload{
		Metadata: map[string][]byte{converter.MetadataEncoding: []byte(converter.MetadataEncodingJSON)},
		Data:     []byte(data),
	})
}

// Text that is not UTF-8 used to be stored with U+FFFD in its place, so
// the card named someone other than who answered. It is refused, field
// by field, as an Update and as a Signal.
func TestRespondTextMustBeUTF8(t *testing.T) {
	cases := []struct {
		name, payload, want string
	}{
		{"by", "{\"call_id\":\"w1\",\"decision\":\"deny\",\"by\":\"m\xffllory\"}", "by is not valid UTF-8 text"},
		{"reason", "{\"call_id\":\"w1\",\"decision\":\"deny\",\"reason\":\"no \xc3\"}", "reason is not valid UTF-8 text"},
		{"lone surrogate", `{"call_id":"w1","decision":"deny","reason":"half \ud800 a pair"}`, "reason is not valid UTF-8 text"},
		{"trailing surrogate", `{"call_id":"w1","decision":"deny","by":"\udc00"}`, "by is not valid UTF-8 text"},
		{"answer", "{\"call_id\":\"w1\",\"decision\":\"deny\",\"answer\":\"\xff\"}", "answer is not valid UTF-8 text"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, calls("", writeCall), results.AssistantText("ok"))
			var got updateOutcome
			h.env.RegisterDelayedCallback(func() { h.updateArg("bad", rawJSON(tc.payload), &got) }, time.Minute)
			h.env.RegisterDelayedCallback(func() { h.env.SignalWorkflow(RespondName, rawJSON(tc.payload)) }, 2*time.Minute)
			var mid State
			h.env.RegisterDelayedCallback(func() { mid = h.state(t) }, 3*time.Minute)
			// A pair written as escapes is one character, and fine.
			h.respond(4*time.Minute, Response{CallID: "w1", Decision: results.DecisionDeny, By: "ada \U0001F600", Reason: "no"}, nil)
			res := h.run(t, Input{Prompt: "p", Tools: []string{"write"}})

			require.ErrorContains(t, got.rejected, tc.want)
			require.Equal(t, ErrTypeInvalidResponse, got.rejectedKind)
			require.Equal(t, 1, mid.InvalidSignals)
			require.Contains(t, mid.LastInvalidSignal, tc.want)
			c := res.Cards[0]
			require.Len(t, c.Decisions, 1, "neither the Update nor the Signal was taken")
			require.Equal(t, "ada \U0001F600", c.Decisions[0].By)
			require.Equal(t, "no", c.Reason)
		})
	}
}

func TestEscapedSurrogatePairsAreText(t *testing.T) {
	h := newHarness(t, calls("", writeCall), results.AssistantText("ok"))
	var got updateOutcome
	h.env.RegisterDelayedCallback(func() {
		h.updateArg("pair", rawJSON(`{"call_id":"w1","decision":"deny","by":"ada \ud83d\ude00","reason":"a \\ud800 is no escape here"}`), &got)
	}, time.Minute)
	res := h.run(t, Input{Prompt: "p", Tools: []string{"write"}})

	require.NoError(t, got.rejected)
	require.Equal(t, "ada \U0001F600", res.Cards[0].Decisions[0].By)
	require.Equal(t, `a \ud800 is no escape here`, res.Cards[0].Reason)
}

// A respond payload that is not an object was refused with the SDK's
// decode error, which names Go types; now with a sentence, as every
// other refusal.
func TestNonObjectRespondIsRefusedWithASentence(t *testing.T) {
	cases := []struct {
		name string
		arg  any
		want string
	}{
		{"string", "approve", `the payload is not a respond object: it is a JSON string; send an object such as {"call_id": "...", "decision": "approve"}`},
		{"array", []string{"w1"}, "the payload is not a respond object: it is a JSON array"},
		{"null", nil, "the payload is not a respond object: it is JSON null"},
		{"number", 7, "the payload is not a respond object: it is a JSON number"},
		{"wrong field type", map[string]any{"call_id": 5, "decision": "deny"}, "the payload is not a respond object: call_id is a JSON number; it must be a JSON string"},
		{"not JSON", converter.NewRawValue(&commonpb.Payload{Metadata: map[string][]byte{converter.MetadataEncoding: []byte(converter.MetadataEncodingBinary)}, Data: []byte("approve")}), `it is not JSON (its encoding is "binary/plain")`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, calls("", writeCall), results.AssistantText("ok"))
			var got updateOutcome
			h.env.RegisterDelayedCallback(func() { h.updateArg("bad", tc.arg, &got) }, time.Minute)
			h.env.RegisterDelayedCallback(func() { h.env.SignalWorkflow(RespondName, tc.arg) }, 2*time.Minute)
			var mid State
			h.env.RegisterDelayedCallback(func() { mid = h.state(t) }, 3*time.Minute)
			h.respond(4*time.Minute, Response{CallID: "w1", Decision: results.DecisionDeny, Reason: "no"}, nil)
			res := h.run(t, Input{Prompt: "p", Tools: []string{"write"}})

			require.Error(t, got.rejected)
			require.Contains(t, got.rejected.Error(), tc.want)
			require.NotContains(t, got.rejected.Error(), "Go ")
			require.Equal(t, ErrTypeInvalidResponse, got.rejectedKind)
			require.Contains(t, mid.LastInvalidSignal, tc.want)
			require.NotContains(t, mid.LastInvalidSignal, "Go ")
			require.Equal(t, "no", res.Cards[0].Reason)
		})
	}
}

// The largest response a turn takes fits MaxRespondBytes, written with
// every escape a client may use, and is applied; a payload over it
// (whatever it holds) is refused with its size.
func TestRespondPayloadIsBounded(t *testing.T) {
	content := strings.Repeat("c", maxArgumentBytes-len(`{"path":"a","content":""}`))
	args, err := json.Marshal(writeArgs{Path: "a", Content: content})
	require.NoError(t, err)
	require.Len(t, args, maxArgumentBytes)
	largest := fmt.Sprintf(`{"call_id":%s,"decision":%s,"arguments":%s,"reason":"%s","by":"%s"}`,
		escapeAll("w1"), escapeAll("approve"), args, strings.Repeat(`\u0001`, maxReasonBytes), strings.Repeat(`\u0002`, maxByBytes))
	require.Less(t, len(largest), MaxRespondBytes)
	require.Less(t, MaxRespondBytes, ServerBlobSizeLimit, "the servers take every valid respond")

	h := newHarness(t, calls("", writeCall), results.AssistantText("ok"))
	var over, fits updateOutcome
	tooBig := `{"call_id":"w1","decision":"approve","junk":"` + strings.Repeat("j", MaxRespondBytes) + `"}`
	h.env.RegisterDelayedCallback(func() { h.updateArg("over", rawJSON(tooBig), &over) }, time.Minute)
	h.env.RegisterDelayedCallback(func() { h.updateArg("fits", rawJSON(largest), &fits) }, 2*time.Minute)
	res := h.run(t, Input{Prompt: "p", Tools: []string{"write"}})

	require.ErrorContains(t, over.rejected, fmt.Sprintf("the payload is %d bytes; a respond payload is at most %d", len(tooBig), MaxRespondBytes))
	require.NoError(t, fits.rejected)
	require.Equal(t, results.StateSucceeded, res.Cards[0].State)
	require.Equal(t, []string{"write:a=" + content}, h.log.all())
}

// escapeAll writes s as a JSON string with every character escaped.
func escapeAll(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		fmt.Fprintf(&b, `\u%04x`, r)
	}
	b.WriteByte('"')
	return b.String()
}
