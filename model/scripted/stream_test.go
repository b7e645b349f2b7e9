package scripted

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/results"
)

func TestWordsJoinBackExactly(t *testing.T) {
	for _, s := range []string{"", "one", "Two words.", "  lead and trail  ", "line\nbreak\ttab"} {
		require.Equal(t, s, strings.Join(words(s), ""), "%q", s)
	}
	require.Equal(t, []string{"I'll", " start", " now."}, words("I'll start now."))
}

type recorder struct {
	mu    sync.Mutex
	got   []model.Delta
	times []time.Time
}

func (r *recorder) ctx(ctx context.Context) context.Context {
	return model.WithStream(ctx, func(d model.Delta) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.got = append(r.got, d)
		r.times = append(r.times, time.Now())
	})
}

func TestStreamedDemoRepliesAreTheUnstreamedOnesInPieces(t *testing.T) {
	s, err := Open("demo", "")
	require.NoError(t, err)
	p := New(s).WithPace(0)
	msgs := []results.Message{results.UserText("Summarise notes.txt into summary.md")}
	want, err := p.Complete(context.Background(), model.Request{Model: "demo", Messages: msgs})
	require.NoError(t, err)

	var r recorder
	got, err := p.Complete(r.ctx(context.Background()), model.Request{Model: "demo", Messages: msgs})
	require.NoError(t, err)
	require.Equal(t, want, got)

	var text strings.Builder
	args := map[int]string{}
	ids := map[int]string{}
	for _, d := range r.got {
		switch d.Kind {
		case model.DeltaText:
			text.WriteString(d.Text)
		case model.DeltaToolCall:
			if d.ToolCallID != "" {
				ids[d.Index] = d.ToolCallID + "/" + d.ToolName
			}
			args[d.Index] += d.Arguments
		}
	}
	require.Greater(t, len(r.got), 5, "the reply arrives in several pieces")
	require.Equal(t, want.Message.Text(), text.String())
	require.Len(t, ids, len(want.Message.ToolCalls))
	for i, c := range want.Message.ToolCalls {
		require.Equal(t, c.ID+"/"+c.Name, ids[i])
		require.Equal(t, c.Arguments, args[i])
	}
}

func TestPaceSpacesThePiecesOnlyWhenSomeoneWatches(t *testing.T) {
	s, err := Parse("paced", []byte(`{"pace_ms": 20, "replies": [{"text": "one two three four"}]}`))
	require.NoError(t, err)
	p := New(s)
	req := model.Request{Model: "paced", Messages: []results.Message{results.UserText("go")}}

	slow, err := Parse("slow", []byte(`{"pace_ms": 10000, "replies": [{"text": "one two three four"}]}`))
	require.NoError(t, err)
	start := time.Now()
	_, err = New(slow).Complete(context.Background(), req)
	require.NoError(t, err)
	require.Less(t, time.Since(start), 5*time.Second, "nobody watches: no pause")

	var r recorder
	start = time.Now()
	_, err = p.Complete(r.ctx(context.Background()), req)
	require.NoError(t, err)
	require.Len(t, r.got, 4)
	require.GreaterOrEqual(t, time.Since(start), 80*time.Millisecond, "four pieces, 20 ms before each")
	for i := 1; i < len(r.times); i++ {
		require.GreaterOrEqual(t, r.times[i].Sub(r.times[i-1]), 20*time.Millisecond)
	}
}

func TestPacedStreamStopsWhenTheCallIsCancelled(t *testing.T) {
	s, err := Parse("slow", []byte(`{"pace_ms": 10000, "replies": [{"text": "never said"}]}`))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var r recorder
	done := make(chan error, 1)
	go func() {
		_, err := New(s).Complete(r.ctx(ctx), model.Request{Model: "slow", Messages: []results.Message{results.UserText("go")}})
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		require.Error(t, err)
		require.True(t, model.AsError(err).Retryable)
	case <-time.After(5 * time.Second):
		t.Fatal("a cancelled call kept pausing")
	}
	require.Empty(t, r.got)
}

func TestPaceMustBeSane(t *testing.T) {
	_, err := Parse("bad", []byte(`{"pace_ms": -1, "replies": [{"text": "x"}]}`))
	require.ErrorContains(t, err, "pace_ms")
}
