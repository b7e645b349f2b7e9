package workflows

import (
	"slices"
	"unicode/utf8"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Search attributes let outside systems find turns without asking each
// one: `TollgateStatus="waiting"` lists every turn a person must answer.
// The names are the contract; the server must have them registered
// (worker --dev and the compose setup do).
var (
	StatusAttr       = temporal.NewSearchAttributeKeyKeyword("TollgateStatus")
	WaitingCallsAttr = temporal.NewSearchAttributeKeyKeywordList("TollgateWaitingCalls")
	WaitingToolsAttr = temporal.NewSearchAttributeKeyKeywordList("TollgateWaitingTools")
	UserAttr         = temporal.NewSearchAttributeKeyKeyword("TollgateUser")
	SessionAttr      = temporal.NewSearchAttributeKeyKeyword("TollgateSession")
	// ParentAttr is set on the turn of an agent that another turn called
	// as a tool: the calling turn's id. Lists leave such turns out unless
	// asked, since they show under their caller.
	ParentAttr = temporal.NewSearchAttributeKeyKeyword("TollgateParent")
)

// SearchAttributes are the names and types a server must have registered
// before turns can keep them current.
func SearchAttributes() map[string]enumspb.IndexedValueType {
	return map[string]enumspb.IndexedValueType{
		StatusAttr.GetName():       enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		WaitingCallsAttr.GetName(): enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST,
		WaitingToolsAttr.GetName(): enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST,
		UserAttr.GetName():         enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		SessionAttr.GetName():      enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		ParentAttr.GetName():       enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	}
}

// Bounds that keep an upsert under the server's limits (2 KiB per value
// by default): an upsert the server refuses fails the workflow task again
// and again, so a turn with many waiting calls lists the first ones.
const (
	maxListedCalls      = 32
	maxListedBytes      = 1024
	maxUserAttrBytes    = 256
	maxKeywordAttrBytes = 256
)

// listing is what a turn last wrote to its search attributes.
type listing struct {
	status      Status
	calls       []string
	tools       []string
	userWritten bool
}

// publish keeps the turn's search attributes current: its status, the
// calls that wait for a person and their tools, and its user. It writes
// only what changed since the last upsert, so a turn pays one event per
// change of what it waits for.
func (t *turn) publish(ctx workflow.Context) {
	if !t.features.SearchAttributes {
		return
	}
	status := t.currentStatus()
	var calls, tools []string
	size := 0
	// Calls waiting in the agents this turn called count as its own.
	for _, card := range t.waitingTree() {
		id := clipBytes(card.CallID, maxKeywordAttrBytes)
		if len(calls) == maxListedCalls || size+len(id) > maxListedBytes {
			break
		}
		calls = append(calls, id)
		size += len(id)
		if tool := clipBytes(card.Tool, maxKeywordAttrBytes); !slices.Contains(tools, tool) {
			tools = append(tools, tool)
		}
	}
	slices.Sort(tools)
	var updates []temporal.SearchAttributeUpdate
	if status != t.listed.status {
		updates = append(updates, StatusAttr.ValueSet(string(status)))
	}
	if !slices.Equal(calls, t.listed.calls) {
		updates = append(updates, listUpdate(WaitingCallsAttr, calls))
	}
	if !slices.Equal(tools, t.listed.tools) {
		updates = append(updates, listUpdate(WaitingToolsAttr, tools))
	}
	if !t.listed.userWritten && t.in.User != "" {
		updates = append(updates, UserAttr.ValueSet(clipBytes(t.in.User, maxUserAttrBytes)))
	}
	if len(updates) == 0 {
		return
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, updates...); err != nil {
		// Only a malformed update fails here; the server's refusals come
		// back as a failed workflow task, which the bounds above prevent.
		workflow.GetLogger(ctx).Warn("Search attributes not updated", "error", err)
		return
	}
	t.listed = listing{status: status, calls: calls, tools: tools, userWritten: t.listed.userWritten || t.in.User != ""}
}

// listUpdate writes an empty list rather than unsetting the attribute, so
// "waits for nothing" reads the same in the UI on every turn.
func listUpdate(key temporal.SearchAttributeKeyKeywordList, values []string) temporal.SearchAttributeUpdate {
	return key.ValueSet(append([]string{}, values...))
}

// clipBytes shortens s to at most n bytes without splitting a character.
func clipBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
