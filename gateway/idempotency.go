package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

// An Idempotency-Key becomes the respond Update's id, and Temporal
// answers every later Update with that id with the first one's outcome,
// whatever its body. The outcome is the card as the first response left
// it, decision included, and Temporal keeps it for the run: so a gateway
// (restarted, or another replica) tells a retry from another response
// by reading the card, and needs no store of its own.

// keyReused says, for the card an Idempotency-Key's Update answered
// with, why resp is not the response that key first carried; "" when it
// is (or nothing on the card shows otherwise).
func keyReused(card results.Card, resp workflows.Response) string {
	if card.CallID != resp.CallID {
		return fmt.Sprintf("it answered call %s", card.CallID)
	}
	if len(card.Decisions) == 0 {
		// The call ended without any decision (the turn was cancelled
		// while the response waited): nothing shows another body.
		return ""
	}
	for _, d := range card.Decisions {
		if d.Decision == resp.Decision && d.By == resp.By && d.Reason == resp.Reason &&
			sameJSON(d.Arguments, resp.Arguments) && sameJSON(d.Answer, resp.Answer) {
			return ""
		}
	}
	d := card.Decisions[len(card.Decisions)-1]
	return fmt.Sprintf("it carried %s for call %s", d.Decision, card.CallID)
}

// sameJSON compares two JSON values by meaning: key order and spacing
// differ between a retry and the card's compacted copy.
func sameJSON(a, b json.RawMessage) bool {
	a, b = bytes.TrimSpace(a), bytes.TrimSpace(b)
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(va, vb)
}

// keyFits refuses, with 422, a response whose Idempotency-Key's Update
// answered with the card of another response.
func (s *Server) keyFits(w http.ResponseWriter, r *http.Request, key string, card results.Card, resp workflows.Response) bool {
	why := keyReused(card, resp)
	if why == "" {
		return true
	}
	fail(w, r, http.StatusUnprocessableEntity, fmt.Sprintf("Idempotency-Key %s was already used for another response (%s); this one was not applied. A new response needs a new key", key, why))
	return false
}
