package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/model/providers/providerbench"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/storage/transcript"
)

// Micro is one micro benchmark: a function for testing.Benchmark and a
// line saying what it measures.
type Micro struct {
	Name string
	What string
	F    func(b *testing.B)
}

// sampleOutcome is a typical tool success: 1 KiB of text in two parts,
// sources, details and the raw output.
func sampleOutcome() results.Outcome {
	text := Blob("micro", 1024)
	return results.Succeed(results.TextPart(text[:512]), results.TextPart(text[512:])).
		WithSources(results.Source{URL: "https://example.com/a", Title: "A"}, results.Source{URL: "https://example.com/b", Title: "B"}).
		WithDetails(json.RawMessage(`{"status":200,"elapsed_ms":12}`))
}

func sampleCard() results.Card {
	out := sampleOutcome()
	return results.Card{
		CallID:    "call_1_1",
		Tool:      "http_fetch",
		Arguments: json.RawMessage(`{"url":"https://example.com/a"}`),
		State:     results.StateSucceeded,
		Output:    out.Success,
		Decisions: []results.Decision{{Decision: results.DecisionApprove, By: "alice", At: time.Unix(1700000000, 0).UTC()}},
	}
}

// Micros lists the micro benchmarks, in report order.
func Micros() []Micro {
	return append([]Micro{
		{"EncodeOutcome", "results.Outcome → JSON (1 KiB success, sources, details)", BenchEncodeOutcome},
		{"DecodeOutcome", "JSON → results.Outcome (strict, versioned)", BenchDecodeOutcome},
		{"EncodeCard", "results.Card → JSON (succeeded, one decision)", BenchEncodeCard},
		{"DecodeCard", "JSON → results.Card", BenchDecodeCard},
		{"RenderCard", "results.Render: card → the model's tool message", BenchRenderCard},
		{"TranscriptAppend", "transcript.Store.Append of one step (2 messages: one file created and written, not synced)", BenchTranscriptAppend},
		{"TranscriptLoad50", "transcript.Store.Load of a 50-step chain with 5 KiB tool outputs", BenchTranscriptLoad50},
	}, encodeStepMicros()...)
}

// encodeStepMicros are one row per model provider: one step's request
// (10 messages, one 64 KiB image) through the provider's mapping and SDK
// to an in-process transport, Chat Completions (openai) first.
func encodeStepMicros() []Micro {
	var out []Micro
	for _, m := range providerbench.Models {
		prefix, _, _ := strings.Cut(m, ":")
		out = append(out, Micro{"EncodeStep/" + prefix, "one step's request (10 messages, one image) through the " + prefix + ": provider, in process", func(b *testing.B) { providerbench.Bench(b, m) }})
	}
	return out
}

func BenchEncodeOutcome(b *testing.B) { benchEncode(b, sampleOutcome()) }
func BenchDecodeOutcome(b *testing.B) { benchDecode(b, sampleOutcome()) }
func BenchEncodeCard(b *testing.B)    { benchEncode(b, sampleCard()) }
func BenchDecodeCard(b *testing.B)    { benchDecode(b, sampleCard()) }

// benchEncode measures encoding v to JSON.
func benchEncode[T any](b *testing.B, v T) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(v); err != nil {
			b.Fatal(err)
		}
	}
}

// benchDecode measures decoding v's JSON into a fresh T.
func benchDecode[T any](b *testing.B, v T) {
	data, err := json.Marshal(v)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		var out T
		if err := json.Unmarshal(data, &out); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchRenderCard(b *testing.B) {
	c := sampleCard()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := results.Render(c); err != nil {
			b.Fatal(err)
		}
	}
}

func stepMessages(i, size int) []results.Message {
	return []results.Message{
		{Role: results.RoleTool, ToolCallID: fmt.Sprintf("call_%d_1", i), ToolName: BlobTool, Parts: []results.Part{results.TextPart(Blob(fmt.Sprint(i), size))}},
		{Role: results.RoleAssistant, ToolCalls: []results.ToolCall{{ID: fmt.Sprintf("call_%d_1", i+1), Name: BlobTool, Arguments: `{"bytes":5120}`}}},
	}
}

// transcriptStore is an empty transcript store in a temporary directory
// that goes when the benchmark ends.
func transcriptStore(b *testing.B) *transcript.Store {
	dir, err := os.MkdirTemp("", "tollgate-bench-transcript-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	s, err := transcript.NewStore(dir)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

func BenchTranscriptAppend(b *testing.B) {
	s := transcriptStore(b)
	msgs := stepMessages(0, 512)
	head := ""
	var err error
	b.ReportAllocs()
	for b.Loop() {
		if head, err = s.Append(head, msgs); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchTranscriptLoad50(b *testing.B) {
	s := transcriptStore(b)
	head := ""
	var err error
	for i := 0; i < 50; i++ {
		if head, err = s.Append(head, stepMessages(i, 5120)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		msgs, err := s.Load(head)
		if err != nil || len(msgs) != 100 {
			b.Fatal(err, len(msgs))
		}
	}
}
