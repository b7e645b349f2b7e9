package workflows

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// maxExcerptBytes is the longest text excerpt makes.
const maxExcerptBytes = excerptBytes + len("\n[truncated]")

// checkCarried bounds what a run was handed, field by field: carried
// comes from the previous run's continue-as-new, but anyone who can start
// a session can write it, so nothing in it is bigger than what a session
// carries itself. Turn ids must be this session's, numbered below next,
// as the session numbers them.
func checkCarried(sessionID string, c *Carried) error {
	if c == nil {
		return nil
	}
	if err := carriedFields(sessionID, c); err != nil {
		return fmt.Errorf("carried is not a state a session hands on (leave it empty): %w", err)
	}
	return nil
}

func carriedFields(sessionID string, c *Carried) error {
	if c.Runs < 0 || c.InvalidSignals < 0 || c.Earlier.Total < 0 {
		return fmt.Errorf("runs, invalid_signals and earlier.total must not be negative")
	}
	if err := maxLen("last_invalid_signal", c.LastInvalidSignal, maxReasonBytes); err != nil {
		return err
	}
	if err := nonNegative("budget", c.Budget); err != nil {
		return err
	}
	if sp := c.Spent; sp != nil && (sp.Tokens < 0 || sp.Cost < 0 || sp.Unpriced < 0 || sp.ModelCalls < 0 || sp.ToolCalls < 0 || sp.WallTime < 0) {
		return fmt.Errorf("spent must not be negative")
	}
	if len(c.Earlier.ByStatus) > len(finalStatuses) {
		return fmt.Errorf("earlier.by_status has %d statuses; a turn ends in one of %d", len(c.Earlier.ByStatus), len(finalStatuses))
	}
	statuses := make([]string, 0, len(c.Earlier.ByStatus))
	//workflowcheck:ignore keys are sorted before use
	for st := range c.Earlier.ByStatus {
		statuses = append(statuses, string(st))
	}
	// Sorted, so that with several bad entries the same one is reported.
	sort.Strings(statuses)
	for _, name := range statuses {
		st := Status(name)
		if n := c.Earlier.ByStatus[st]; !finalStatuses[st] || n < 0 {
			return fmt.Errorf("earlier.by_status counts %d turns as %q; counts are of the statuses a turn ends in", n, truncatedForMessage(string(st)))
		}
	}
	last := 0
	for i, r := range c.Recent {
		name := fmt.Sprintf("recent[%d]", i)
		n, err := turnNumber(sessionID, r.ID, c.Next)
		if err != nil {
			return fmt.Errorf("%s.id: %w", name, err)
		}
		if n <= last {
			return fmt.Errorf("%s.id: the recent turns must be in the order they ran", name)
		}
		last = n
		if r.Status != StatusRunning && !finalStatuses[r.Status] {
			return fmt.Errorf("%s.status %q is not a turn's status", name, truncatedForMessage(string(r.Status)))
		}
		if len(r.Waiting) > 0 {
			return fmt.Errorf("%s.waiting is filled by the client, never carried", name)
		}
		for _, f := range []struct {
			field, v string
			max      int
		}{
			{"text", r.Text, maxExcerptBytes},
			{"by", r.By, maxByBytes},
			{"reply", r.Reply, maxExcerptBytes},
			{"error", r.Error, maxExcerptBytes},
		} {
			if err := maxLen(name+"."+f.field, f.v, f.max); err != nil {
				return err
			}
		}
		if r.Transfer != nil {
			if err := maxLen(name+".transfer.target", r.Transfer.Target, maxExcerptBytes); err != nil {
				return err
			}
			if err := maxLen(name+".transfer.message", r.Transfer.Message, maxExcerptBytes); err != nil {
				return err
			}
		}
	}
	if len(c.Sends) > rememberedSends {
		return fmt.Errorf("sends has %d entries; a session remembers at most %d", len(c.Sends), rememberedSends)
	}
	for i, r := range c.Sends {
		name := fmt.Sprintf("sends[%d]", i)
		if r.UpdateID == "" {
			return fmt.Errorf("%s.update_id is empty", name)
		}
		if err := maxLen(name+".update_id", r.UpdateID, maxUpdateIDBytes); err != nil {
			return err
		}
		if _, err := turnNumber(sessionID, r.TurnID, c.Next); err != nil {
			return fmt.Errorf("%s.turn_id: %w", name, err)
		}
	}
	if len(c.Holders) > RecentTurns {
		return fmt.Errorf("holders has %d entries; a session keeps at most %d", len(c.Holders), RecentTurns)
	}
	for i, h := range c.Holders {
		if err := maxLen(fmt.Sprintf("holders[%d].message", i), h.Message, maxExcerptBytes); err != nil {
			return err
		}
		if !validAgentName(h.Agent) || (h.From != "" && !validAgentName(h.From)) {
			return fmt.Errorf("holders[%d] names no valid agent", i)
		}
	}
	if c.Agent != "" && !validAgentName(c.Agent) {
		return fmt.Errorf("agent %q is not an agent's name", truncatedForMessage(c.Agent))
	}
	last = 0
	for i, q := range c.Pending {
		name := fmt.Sprintf("pending[%d]", i)
		n, err := turnNumber(sessionID, q.TurnID, c.Next)
		if err != nil {
			return fmt.Errorf("%s.turn_id: %w", name, err)
		}
		if n <= last {
			return fmt.Errorf("%s.turn_id: queued messages must be in the order they were numbered", name)
		}
		last = n
		if strings.TrimSpace(q.Text) == "" && !q.Handoff {
			return fmt.Errorf("%s.text is empty", name)
		}
		if err := maxLen(name+".text", q.Text, MaxMessageBytes); err != nil {
			return err
		}
		if err := maxLen(name+".by", q.By, maxByBytes); err != nil {
			return err
		}
	}
	return nil
}

var finalStatuses = map[Status]bool{
	StatusCompleted: true, StatusFailed: true, StatusCancelled: true, StatusTransferred: true, StatusMaxSteps: true, StatusBudgetExhausted: true,
}

func maxLen(field, v string, max int) error {
	if len(v) > max {
		return fmt.Errorf("%s is %d bytes; a session carries at most %d", field, len(v), max)
	}
	return nil
}

// turnNumber is n for the id <session id>/turn-<n> the session gave a
// turn, if 1 <= n < next.
func turnNumber(sessionID, id string, next int) (int, error) {
	rest, ok := strings.CutPrefix(id, sessionID+"/turn-")
	n, err := strconv.Atoi(rest)
	if !ok || err != nil || n < 1 || n >= next || strconv.Itoa(n) != rest {
		return 0, fmt.Errorf("%q is not an id this session gave a turn (%s/turn-<n>, n below next, %d)", truncatedForMessage(id), sessionID, next)
	}
	return n, nil
}

// truncatedForMessage keeps a caller's value short in a sentence.
func truncatedForMessage(s string) string { return prefix(s, 64) }
