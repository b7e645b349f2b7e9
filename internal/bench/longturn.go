package bench

import (
	"context"
	"errors"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate-dev/tollgate/activities"
)

// LongTurnSize is row 5e: a turn of many model calls whose tool outputs
// together pass the model's context window, so it compacts. Its history
// a step should stay flat from the first half of the turn to the second:
// each step carries only its own messages, whatever the conversation's
// length.
type LongTurnSize struct {
	Steps, OutputBytes, Window int
	// OutputTokens is what the tool outputs add up to, at the scripted
	// model's four bytes a token.
	OutputTokens int
	Compactions  int
	// FirstBytes and LastBytes are the history bytes a step took in the
	// first and the second half of the turn (from one CallModel's
	// scheduling to the next); Events and Bytes the whole history.
	FirstBytes, LastBytes float64
	Events                int
	Bytes                 int64
	Elapsed               time.Duration
}

// Growth is the second half's bytes a step over the first half's.
func (l LongTurnSize) Growth() float64 { return ratio(l.LastBytes, l.FirstBytes) }

// Flat: the second half's steps cost within 15% of the first half's.
func (l LongTurnSize) Flat() bool { g := l.Growth(); return g >= 0.85 && g <= 1.15 }

// LongTurn runs a turn of steps model calls, each with one tool call
// returning outputBytes, with policy.context_tokens window.
func (e *Env) LongTurn(ctx context.Context, steps, outputBytes, window int) (LongTurnSize, error) {
	l := LongTurnSize{Steps: steps, OutputBytes: outputBytes, Window: window, OutputTokens: steps * outputBytes / 4}
	model, err := e.ScriptWindow(steps, 1, BlobTool, blobArgs{Bytes: outputBytes}, window)
	if err != nil {
		return l, err
	}
	in := TurnInput(model, steps, false)
	in.Policy.ContextTokens = window
	wid := id("history-long")
	start := time.Now()
	res, err := e.RunTurn(ctx, wid, in)
	if err != nil {
		return l, err
	}
	l.Elapsed, l.Compactions = time.Since(start), res.Compactions
	// Bytes from each CallModel's scheduling to the next one's.
	var calls []int64
	it := e.Client.GetWorkflowHistory(ctx, wid, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return l, err
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == activities.CallModelName {
			calls = append(calls, l.Bytes)
		}
		l.Events++
		l.Bytes += int64(proto.Size(ev))
	}
	if len(calls) < steps+1 {
		return l, errors.New("the long turn's history has fewer model calls than steps (did it continue as new?)")
	}
	half := steps / 2
	l.FirstBytes = float64(calls[half]-calls[0]) / float64(half)
	l.LastBytes = float64(calls[steps]-calls[half]) / float64(steps-half)
	return l, nil
}
