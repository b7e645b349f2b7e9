// Package metrics names Tollgate's own series and records them through the
// Temporal SDK's metrics handler (client.Options.MetricsHandler), so they
// go wherever the SDK's own metrics go: the worker's Prometheus endpoint,
// or the handler of your own worker. Workflow code records only through
// workflow.GetMetricsHandler, which drops what a replay re-executes, and
// activities through activity.GetMetricsHandler.
//
// Every label value comes from a closed set (statuses, decisions, outcome
// kinds) or a bounded one (the worker's registered tools, the first
// MaxModels model names a worker sees). Values a model or a caller chose
// beyond those become Other or UnknownTool, so a hostile model cannot make
// a series per string it invents.
//
// With the Prometheus exporter the names gain the usual suffixes: counters
// end in _total and timers (histograms, in seconds) in _seconds, so Turns
// is scraped as tollgate_turns_total and ToolRun as
// tollgate_tool_run_seconds_bucket, _sum and _count.
package metrics

import (
	"slices"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
)

// Series names, as given to the SDK's metrics handler.
const (
	// Turns counts turns as they end, by Status.
	Turns = "tollgate_turns"
	// ToolCalls counts tool calls as they reach a final state, by Tool and
	// Outcome.
	ToolCalls = "tollgate_tool_calls"
	// Wait times how long a call waited for a person, by WaitKind; the
	// wait ends with a decision, a timeout, a transfer or cancellation.
	Wait = "tollgate_wait"
	// Decisions counts how waits ended, by Decision.
	Decisions = "tollgate_decisions"
	// ModelCalls counts CallModel's provider calls, by Provider, Model and
	// Outcome (ok or error).
	ModelCalls = "tollgate_model_calls"
	// ModelTokens counts the tokens providers reported, by Provider, Model
	// and Direction (input or output).
	ModelTokens = "tollgate_model_tokens"
	// ModelCost counts what priced model calls cost, in millionths of a
	// US dollar, by Provider and Model.
	ModelCost = "tollgate_model_cost_microdollars"
	// ModelCostTotal is what priced model calls cost, in US dollars, by
	// Provider and Model, summed since the worker process started: a
	// gauge (counters count whole numbers) that only rises, read like a
	// counter (rate, increase). It keeps its name when scraped.
	ModelCostTotal = "tollgate_model_cost_total"
	// Compactions counts turns compacting their conversation, by
	// Strategy (summarize, drop_oldest) and Reason (threshold,
	// context_length).
	Compactions = "tollgate_compactions"
	// ToolRun times a tool's run inside RunTool, by Tool.
	ToolRun = "tollgate_tool_run"
	// PayloadStoreBytes counts the bytes sent to the payload store, by
	// Store: history (payloads too large for history) or output (whole
	// tool outputs too large for a card). A payload stored again (an
	// activity retry, the same output twice) counts again, although the
	// content-addressed store keeps it once: this is traffic, not size.
	PayloadStoreBytes = "tollgate_payload_store_bytes"
	// PayloadStoreMisses counts reads that found nothing, by Store:
	// history or transcript.
	PayloadStoreMisses = "tollgate_payload_store_misses"
)

// Label keys.
const (
	Status    = "status"
	Tool      = "tool"
	Outcome   = "outcome"
	WaitKind  = "kind"
	Decision  = "decision"
	Provider  = "provider"
	Model     = "model"
	Direction = "direction"
	Store     = "store"
	Strategy  = "strategy"
	Reason    = "reason"
)

// Label values shared by several series.
const (
	// Other stands for any value outside a label's known set.
	Other = "other"
	// UnknownTool is the tool label of a call that names no tool the
	// worker registered: the model's string never becomes a label.
	UnknownTool = "unknown"
	// OK and Error are ModelCalls outcomes.
	OK    = "ok"
	Error = "error"
	// Input and Output are ModelTokens directions.
	Input  = "input"
	Output = "output"
	// StoreHistory, StoreOutput and StoreTranscript name the stores.
	StoreHistory    = "history"
	StoreOutput     = "output"
	StoreTranscript = "transcript"
)

// OneOf is v when v is one of known, else Other.
func OneOf(v string, known ...string) string {
	if slices.Contains(known, v) {
		return v
	}
	return Other
}

// MaxLabelBytes bounds any label value a Capped admits.
const MaxLabelBytes = 64

// Capped admits the first max distinct values of a label whose values
// come from outside (the model names turns ask for); later values, and
// values longer than MaxLabelBytes, are Other. It is safe for concurrent
// use.
type Capped struct {
	max  int
	mu   sync.Mutex
	seen map[string]bool
}

// NewCapped admits max distinct values.
func NewCapped(max int) *Capped {
	return &Capped{max: max, seen: map[string]bool{}}
}

// Label returns v if it is admitted, else Other.
func (c *Capped) Label(v string) string {
	if v == "" || len(v) > MaxLabelBytes {
		return Other
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen[v] {
		return v
	}
	if len(c.seen) >= c.max {
		return Other
	}
	c.seen[v] = true
	return v
}

// Count adds n to the counter name with tags. A nil handler records
// nothing.
func Count(h client.MetricsHandler, name string, n int64, tags map[string]string) {
	if h == nil || n <= 0 {
		return
	}
	h.WithTags(tags).Counter(name).Inc(n)
}

// Sums keeps running totals of float values by series and labels, for
// gauges that stand for counters of amounts that are not whole (dollars).
// It is safe for concurrent use.
type Sums struct {
	mu   sync.Mutex
	sums map[string]float64
}

// Add adds v to the gauge name with tags and sets the gauge to the new
// total. A nil handler records nothing, but the total still grows.
func (s *Sums) Add(h client.MetricsHandler, name string, v float64, tags map[string]string) {
	if v <= 0 {
		return
	}
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	key := name
	for _, k := range keys {
		key += "\x00" + k + "=" + tags[k]
	}
	s.mu.Lock()
	if s.sums == nil {
		s.sums = map[string]float64{}
	}
	s.sums[key] += v
	total := s.sums[key]
	s.mu.Unlock()
	if h != nil {
		h.WithTags(tags).Gauge(name).Update(total)
	}
}

// Time records d on the timer name with tags. A nil handler records
// nothing.
func Time(h client.MetricsHandler, name string, d time.Duration, tags map[string]string) {
	if h == nil {
		return
	}
	h.WithTags(tags).Timer(name).Record(d)
}
