package main

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/stream"
	"github.com/tollgate-dev/tollgate/workflows"
)

// watch prints the reply's text from the stream as it arrives, on a line
// of its own before the cards and the result that polling finds.
func TestWatchPrintsStreamedText(t *testing.T) {
	srv, err := stream.StartEmbedded(t.TempDir(), 0)
	require.NoError(t, err)
	t.Cleanup(srv.Shutdown)
	pub, err := stream.Connect(stream.Config{URL: srv.URL()})
	require.NoError(t, err)
	t.Cleanup(pub.Close)
	for _, piece := range []string{"Reading", " the", " notes."} {
		pub.Publish(stream.Event{Type: stream.TypeText, Turn: "T", Call: "5", Step: 1, Text: piece})
	}
	pub.Publish(stream.Event{Type: stream.TypeReset, Turn: "T", Call: "5", Step: 1, Attempt: 2})
	pub.Publish(stream.Event{Type: stream.TypeText, Turn: "T", Call: "5", Step: 1, Text: "Again."})
	pub.Publish(stream.Event{Type: stream.TypeText, Turn: "T", Call: "9", Step: 2, Text: "Next call."})
	pub.Publish(stream.Event{Type: stream.TypeText, Turn: "other", Call: "5", Text: "not this turn"})
	pub.Publish(stream.Event{Type: stream.TypeResult, Turn: "T", Status: "completed"})
	require.NoError(t, pub.Flush(context.Background()))

	fake := newFake(workflows.State{Status: workflows.StatusRunning, Step: 1})
	progress(fake, func(f *fakeTurns) { f.finishLocked(workflows.StatusCompleted, "Again.") })
	h := newHarness(t, fake)
	h.env["TOLLGATE_NATS_URL"] = srv.URL()
	o := h.run("", "watch", "T")
	require.Equal(t, 0, o.code, o.stderr)
	require.Contains(t, o.stdout, "» Reading the notes.\n  (the model call is retried; its reply starts again)\n» Again.\n» Next call.\n")
	require.NotContains(t, o.stdout, "not this turn")
	require.Less(t, strings.Index(o.stdout, "» Again."), strings.Index(o.stdout, "turn T completed"))
}

// Without a reachable NATS, watch polls as before and says nothing of it.
func TestWatchWithoutNATSPolls(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	url := "nats://" + l.Addr().String()
	require.NoError(t, l.Close())
	fake := newFake(workflows.State{Status: workflows.StatusRunning, Step: 1})
	progress(fake, func(f *fakeTurns) { f.finishLocked(workflows.StatusCompleted, "Done.") })
	h := newHarness(t, fake)
	h.env["TOLLGATE_NATS_URL"] = url
	o := h.run("", "watch", "T")
	require.Equal(t, 0, o.code, o.stderr)
	require.Contains(t, o.stdout, "turn T completed")
	require.NotContains(t, o.stdout, "»")
}

// A line printed while streamed text is mid-line breaks it; the text goes
// on, marked, on the next line.
func TestLiveWriterKeepsLinesApart(t *testing.T) {
	var b strings.Builder
	l := &liveWriter{w: &b}
	l.live("» Hello")
	_, _ = l.Write([]byte("✓ a card\n"))
	l.live(" world")
	l.endLine()
	require.Equal(t, "» Hello\n✓ a card\n»  world\n", b.String())
}

// Card changes come from the stream: a card that no poll of the state
// ever shows is printed as the stream carries it.
func TestWatchPrintsCardsFromTheStream(t *testing.T) {
	srv, err := stream.StartEmbedded(t.TempDir(), 0)
	require.NoError(t, err)
	t.Cleanup(srv.Shutdown)
	pub, err := stream.Connect(stream.Config{URL: srv.URL()})
	require.NoError(t, err)
	t.Cleanup(pub.Close)
	running, done := readCard(), succeeded(readCard(), "the notes")
	pub.Publish(stream.Event{Type: stream.TypeCard, Turn: "T", Card: &running})
	pub.Publish(stream.Event{Type: stream.TypeCard, Turn: "T", Card: &done})
	pub.Publish(stream.Event{Type: stream.TypeCard, Turn: "other", Card: &results.Card{CallID: "x", Tool: "not_this_turn", State: results.StateRunning}})
	require.NoError(t, pub.Flush(context.Background()))

	// The polled state never has a card, and neither has the result.
	fake := newFake(workflows.State{Status: workflows.StatusRunning, Step: 1})
	progress(fake, func(f *fakeTurns) { time.Sleep(300 * time.Millisecond) }, func(f *fakeTurns) { f.finishLocked(workflows.StatusCompleted, "Read.") })
	h := newHarness(t, fake)
	h.env["TOLLGATE_NATS_URL"] = srv.URL()
	o := h.run("", "watch", "T")
	require.Equal(t, 0, o.code, o.stderr)
	require.Contains(t, o.stdout, running.Summary())
	require.Contains(t, o.stdout, done.Summary())
	require.NotContains(t, o.stdout, "not_this_turn")
	require.Less(t, strings.Index(o.stdout, done.Summary()), strings.Index(o.stdout, "turn T completed"))
}
