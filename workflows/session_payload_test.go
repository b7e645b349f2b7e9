package workflows

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/storage/transcript"
)

// A send or end whose text is not UTF-8 is refused with a sentence, as
// an Update and as a Signal; so is a payload that is not an object.
func TestSessionTextMustBeUTF8(t *testing.T) {
	h := newSessionHarness(t, results.AssistantText("hello"))
	var badText, badBy, notObject, badEnd sendOutcome
	h.at(time.Minute, func() {
		h.update(SendName, rawJSON("{\"text\":\"hi \xff\"}"), &badText)
		h.update(SendName, rawJSON(`{"text":"hi","by":"\udfff"}`), &badBy)
		h.update(SendName, "hello", &notObject)
		h.update(EndName, rawJSON("{\"by\":\"\xfe\"}"), &badEnd)
		h.env.SignalWorkflow(SendName, rawJSON("{\"text\":\"hi \xff\"}"))
	})
	var c Conversation
	h.at(2*time.Minute, func() { c = h.conversation() })
	h.end(3*time.Minute, End{By: "ada"}, nil)
	res := h.run(SessionInput{})

	require.ErrorContains(t, badText.rejected, "text is not valid UTF-8 text")
	require.ErrorContains(t, badBy.rejected, "by is not valid UTF-8 text")
	require.ErrorContains(t, notObject.rejected, "the payload is not a send object: it is a JSON string")
	require.NotContains(t, notObject.rejected.Error(), "Go ")
	require.ErrorContains(t, badEnd.rejected, "by is not valid UTF-8 text")
	for _, o := range []sendOutcome{badText, badBy, notObject, badEnd} {
		require.Equal(t, ErrTypeInvalidMessage, o.rejectedKind)
	}
	require.Equal(t, 1, c.InvalidSignals)
	require.Contains(t, c.LastInvalidSignal, "text is not valid UTF-8 text")
	require.Zero(t, res.TurnsStarted, "no message was taken")
	require.Equal(t, "ada", res.EndedBy)
}

// Carried was bounded by count only: a caller could hand a new session
// megabytes in each carried message or field, and turn ids of any name.
// Every field is bounded now, by what a session carries itself.
func TestSessionCarriedIsBoundedBySize(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	ok := func() *Carried {
		return &Carried{Next: 3, Recent: []TurnRecord{{ID: sessionID + "/turn-1", Status: StatusCompleted, Text: "a"}}, Pending: []Queued{{TurnID: sessionID + "/turn-2", Text: "b"}}}
	}
	cases := []struct {
		name   string
		change func(*Carried)
		want   string
	}{
		{"pending text", func(c *Carried) { c.Pending[0].Text = big }, fmt.Sprintf("pending[0].text is %d bytes; a session carries at most %d", len(big), MaxMessageBytes)},
		{"pending by", func(c *Carried) { c.Pending[0].By = big }, "pending[0].by is 1048576 bytes"},
		{"pending id", func(c *Carried) { c.Pending[0].TurnID = "elsewhere/turn-2" }, `pending[0].turn_id: "elsewhere/turn-2" is not an id this session gave a turn`},
		{"pending id not below next", func(c *Carried) { c.Pending[0].TurnID = sessionID + "/turn-3" }, "is not an id this session gave a turn"},
		{"recent text", func(c *Carried) { c.Recent[0].Text = big }, "recent[0].text is 1048576 bytes"},
		{"recent reply", func(c *Carried) { c.Recent[0].Reply = big }, "recent[0].reply is 1048576 bytes"},
		{"recent error", func(c *Carried) { c.Recent[0].Error = big }, "recent[0].error is 1048576 bytes"},
		{"recent transfer", func(c *Carried) { c.Recent[0].Transfer = &results.Transfer{Target: "b", Message: big} }, "recent[0].transfer.message is 1048576 bytes"},
		{"recent waiting", func(c *Carried) {
			c.Recent[0].Waiting = []results.Card{{CallID: "x", Tool: "write", State: results.StatePendingApproval}}
		}, "recent[0].waiting is filled by the client"},
		{"recent id", func(c *Carried) { c.Recent[0].ID = big }, "recent[0].id"},
		{"recent status", func(c *Carried) { c.Recent[0].Status = "weird" }, `recent[0].status "weird" is not a turn's status`},
		{"last invalid signal", func(c *Carried) { c.LastInvalidSignal = big }, "last_invalid_signal is 1048576 bytes"},
		{"earlier statuses", func(c *Carried) { c.Earlier.ByStatus = map[Status]int{Status(big): 1} }, "earlier.by_status counts 1 turns as"},
		{"send update id", func(c *Carried) { c.Sends = []SentUpdate{{UpdateID: big, TurnID: sessionID + "/turn-1"}} }, "sends[0].update_id is 1048576 bytes"},
		{"send without update id", func(c *Carried) { c.Sends = []SentUpdate{{TurnID: sessionID + "/turn-1"}} }, "sends[0].update_id is empty"},
		{"send turn id", func(c *Carried) { c.Sends = []SentUpdate{{UpdateID: "u", TurnID: sessionID + "/turn-3"}} }, "sends[0].turn_id:"},
		{"sends", func(c *Carried) { c.Sends = make([]SentUpdate, rememberedSends+1) }, fmt.Sprintf("sends has %d entries; a session remembers at most %d", rememberedSends+1, rememberedSends)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := ok()
			tc.change(c)
			h := newSessionHarness(t)
			h.env.ExecuteWorkflow(SessionWorkflowName, SessionInput{Turn: Input{Model: "m"}, Carried: c})
			err := h.env.GetWorkflowError()
			require.ErrorContains(t, err, "carried is not a state a session hands on")
			require.ErrorContains(t, err, tc.want)
			var app *temporal.ApplicationError
			require.True(t, errors.As(err, &app))
			require.Equal(t, ErrTypeInvalidInput, app.Type())
		})
	}
}

// What a session carries itself always fits those bounds: a full queue
// of the longest messages, and a turn that failed with a provider's
// endless error (the record keeps an excerpt).
func TestSessionCarriesOnlyWhatFits(t *testing.T) {
	store, err := transcript.NewStore(t.TempDir())
	require.NoError(t, err)
	m := &fakeModel{replies: []results.Message{calls("", writeCall)}, failWith: map[int]string{1: strings.Repeat("the provider says no. ", 10_000)}}
	h := newSessionHarnessWith(t, m, store, Features{})
	h.send(time.Minute, "write a", nil)
	longest := Send{Text: strings.Repeat("\u00e9", MaxMessageBytes/2), By: strings.Repeat("b", maxByBytes)}
	h.at(2*time.Minute, func() {
		for range MaxPending {
			h.update(SendName, longest, nil)
		}
	})
	h.respond(3*time.Minute, sessionID+"/turn-1", Response{CallID: "w1", Decision: results.DecisionDeny, Reason: "no"}, nil)
	next := h.continued(SessionInput{Turn: Input{Tools: []string{"write"}}, TurnsPerRun: 1})

	require.Len(t, next.Carried.Pending, MaxPending)
	require.Equal(t, longest.Text, next.Carried.Pending[0].Text)
	rec := next.Carried.Recent[0]
	require.Equal(t, StatusFailed, rec.Status)
	require.Contains(t, rec.Error, "the provider says no.")
	require.Contains(t, rec.Error, "[truncated]")
	require.NoError(t, checkCarried(sessionID, next.Carried))

	h2 := newSessionHarnessWith(t, &fakeModel{}, store, Features{})
	after := h2.continued(next)
	require.Equal(t, 2, after.Carried.Runs, "the next run took the carried state")
	require.Len(t, after.Carried.Pending, MaxPending-1)
}
