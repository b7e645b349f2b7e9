package workflows

import (
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/results"
)

// A conversation that goes on over several turns is carried by its
// transcript head (the id of the stored chain of messages) and the few
// messages after it that are not stored yet. The store holds a message
// once a model call has sent it, so the head covers the conversation up to
// a turn's last model reply; anything after that reply (tool results of a
// turn cancelled mid-step or stopped at max_steps, or the prompt of a turn
// that never got a reply) travels as Input.Messages to the next turn.

// headBytes is the length of a transcript head: a hex SHA-256.
const headBytes = 64

// checkHead rejects a head the transcript store could never hold, before
// a model call retries a load that cannot succeed.
func checkHead(head string) error {
	if head == "" {
		return nil
	}
	if len(head) != headBytes {
		return fmt.Errorf("head must be a transcript head (%d hex digits) from a turn's result; got %d characters", headBytes, len(head))
	}
	for i := 0; i < len(head); i++ {
		if c := head[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return fmt.Errorf("head must be a transcript head (%d lowercase hex digits) from a turn's result", headBytes)
		}
	}
	return nil
}

// headMissing ends a turn that continues a stored conversation the store
// no longer has (another machine's data directory, a deleted chunk).
func headMissing() error {
	return temporal.NewNonRetryableApplicationError(
		"the stored conversation this turn continues is missing or damaged in the transcript store; the turn holds only the messages since, so it stopped rather than answer without the conversation's history",
		activities.ErrTypeTranscriptMissing, nil)
}

// headUnstored ends a turn that continues a stored conversation when the
// worker could not store the model's reply (a full disk): without the
// store it cannot send the conversation again, and a reply that is not in
// the store would be missing from every later turn.
func headUnstored() error {
	return temporal.NewNonRetryableApplicationError(
		"the worker could not store the conversation with the model's reply, which a turn that continues a stored conversation needs; the reply was not kept",
		activities.ErrTypeTranscriptMissing, nil)
}

// continuation is where the conversation stands after a turn that started
// from in and returned res: the head to continue from and the messages
// after it that the store does not hold. Nothing the turn said or heard
// is left out.
func continuation(in Input, res Result) (head string, unstored []results.Message) {
	if res.Head == "" {
		// Nothing is stored (the worker could not store it, or the
		// conversation was never sent): carry all of it.
		return "", joined(in.Messages, res.Messages)
	}
	for i := len(res.Messages) - 1; i >= 0; i-- {
		if res.Messages[i].Role == results.RoleAssistant {
			return res.Head, joined(nil, res.Messages[i+1:])
		}
	}
	// The model never replied: the head is the one the turn started from,
	// and what it was given is still unsent.
	return res.Head, joined(in.Messages, res.Messages)
}

// joined copies a and b into one new slice, so the caller's slices are
// never shared with what a session carries.
func joined(a, b []results.Message) []results.Message {
	if len(a)+len(b) == 0 {
		return nil
	}
	out := make([]results.Message, 0, len(a)+len(b))
	return append(append(out, a...), b...)
}
