package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/tollgate-dev/tollgate/activities"
)

// inlineTailVersion of the turn's change marker lets a model call leave
// a short tail of the conversation unstored (activities.InlineTailBytes):
// the turn sends it again with the next call, which stores it with its
// own reply. A chunk's file was the largest single cost a tool call had
// over the bare loop of the same activities (bench row 1b); a short tail
// costs a few hundred bytes per call instead. Wherever the head must cover the conversation through
// the last reply (the turn's result, a hand-on), StoreTranscript stores
// what was left first. Only a turn that holds its whole conversation
// offers it: one that continues a stored conversation could not fall back
// to sending the conversation whole if storing the tail failed.
const inlineTailVersion = scriptedWindowVersion + 1

// offersInlineTail says whether this turn's model calls may leave their
// messages unstored.
func (t *turn) offersInlineTail() bool {
	return t.v >= inlineTailVersion && !t.partial()
}

// tailDeferred reports whether model calls left messages up to the last
// reply unstored (conv[sent:replyAt]).
func (t *turn) tailDeferred() bool { return t.sent < t.replyAt }

// tailDue reports whether the run would hand on but for a deferred tail.
func (t *turn) tailDue(ctx workflow.Context) bool {
	return t.tailDeferred() && t.handOnDue(ctx)
}

// storeTail stores the messages model calls left inline, so that the head
// covers the conversation through the last reply. If that fails, the
// turn carries its conversation whole from then on, as after a model
// call that could not store it: nothing is lost, the history grows.
func (t *turn) storeTail(ctx workflow.Context) {
	if !t.tailDeferred() {
		return
	}
	// A local activity: a turn that ends or hands on must not wait for
	// an activity worker (a cancelled turn's may be gone), and every
	// worker that runs the turn holds the store.
	actx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 5},
		Summary:             fmt.Sprintf("StoreTranscript step %d", t.step),
	})
	in := activities.StoreTranscriptInput{TurnID: t.id, Transcript: t.head, Messages: t.conv[t.sent:t.replyAt], Full: t.full}
	var res activities.StoreTranscriptResult
	if err := workflow.ExecuteLocalActivity(actx, activities.StoreTranscriptName, in).Get(ctx, &res); err != nil {
		workflow.GetLogger(ctx).Warn("Conversation's last messages not stored; the turn carries it whole", "error", err)
		t.head, t.sent, t.replyAt = "", 0, 0
		return
	}
	t.head, t.sent = res.Transcript, t.replyAt
	if in.Full != "" {
		t.full = res.Full
	}
}
