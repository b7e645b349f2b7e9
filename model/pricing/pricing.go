// Package pricing prices model usage: a table of per-model prices in US
// dollars per million tokens, with defaults for the models the providers
// name most, and a deployment's own table (a JSON file named by
// TOLLGATE_PRICES) laid over them.
//
// A model without a price is unknown, never free: Cost says so, and a
// budget can then refuse to count it as zero.
//
// Model strings are the turn's own ("openai:gpt-4.1"). A price's key
// matches a model exactly, or as the longest key the model string starts
// with followed by "-" or ":" (so "anthropic:claude-sonnet-4-5" prices
// "anthropic:claude-sonnet-4-5-20250929"), or "provider:*" for a whole
// provider. "responses:" models take "openai:" prices and "vertex:"
// models "gemini:" prices unless the table has their own; Bedrock's
// cross-region prefixes ("us.", "eu.", "apac.", "global.") are ignored.
package pricing

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/tollgate-dev/tollgate/model"
)

// FileVar names a deployment's price file.
const FileVar = "TOLLGATE_PRICES"

// Price is what a model costs, in US dollars per million tokens.
type Price struct {
	Input  float64 `json:"input"`
	Output float64 `json:"output"`
	// CachedInput is the price of input tokens read from the provider's
	// prompt cache.
	CachedInput float64 `json:"cached_input"`
}

// Table maps model keys to prices. The zero Table knows no price.
type Table struct {
	prices map[string]Price
}

// defaults are list prices for standard (not batch, not priority) use,
// for prompts under any long-context tier. A deployment that pays other
// prices sets its own in TOLLGATE_PRICES.
var defaults = map[string]Price{
	"openai:gpt-5":        {Input: 1.25, CachedInput: 0.125, Output: 10},
	"openai:gpt-5-mini":   {Input: 0.25, CachedInput: 0.025, Output: 2},
	"openai:gpt-5-nano":   {Input: 0.05, CachedInput: 0.005, Output: 0.40},
	"openai:gpt-4.1":      {Input: 2, CachedInput: 0.50, Output: 8},
	"openai:gpt-4.1-mini": {Input: 0.40, CachedInput: 0.10, Output: 1.60},
	"openai:gpt-4.1-nano": {Input: 0.10, CachedInput: 0.025, Output: 0.40},
	"openai:gpt-4o":       {Input: 2.50, CachedInput: 1.25, Output: 10},
	"openai:gpt-4o-mini":  {Input: 0.15, CachedInput: 0.075, Output: 0.60},
	"openai:o3":           {Input: 2, CachedInput: 0.50, Output: 8},
	"openai:o4-mini":      {Input: 1.10, CachedInput: 0.275, Output: 4.40},

	"anthropic:claude-opus-4-5":   {Input: 5, CachedInput: 0.50, Output: 25},
	"anthropic:claude-opus-4-1":   {Input: 15, CachedInput: 1.50, Output: 75},
	"anthropic:claude-sonnet-4-5": {Input: 3, CachedInput: 0.30, Output: 15},
	"anthropic:claude-sonnet-4":   {Input: 3, CachedInput: 0.30, Output: 15},
	"anthropic:claude-haiku-4-5":  {Input: 1, CachedInput: 0.10, Output: 5},
	"anthropic:claude-3-5-haiku":  {Input: 0.80, CachedInput: 0.08, Output: 4},

	"gemini:gemini-2.5-pro":        {Input: 1.25, CachedInput: 0.125, Output: 10},
	"gemini:gemini-2.5-flash":      {Input: 0.30, CachedInput: 0.03, Output: 2.50},
	"gemini:gemini-2.5-flash-lite": {Input: 0.10, CachedInput: 0.01, Output: 0.40},

	"bedrock:anthropic.claude-sonnet-4-5": {Input: 3, CachedInput: 0.30, Output: 15},
	"bedrock:anthropic.claude-sonnet-4":   {Input: 3, CachedInput: 0.30, Output: 15},
	"bedrock:anthropic.claude-haiku-4-5":  {Input: 1, CachedInput: 0.10, Output: 5},
	"bedrock:amazon.nova-pro":             {Input: 0.80, CachedInput: 0.20, Output: 3.20},
	"bedrock:amazon.nova-lite":            {Input: 0.06, CachedInput: 0.015, Output: 0.24},
	"bedrock:amazon.nova-micro":           {Input: 0.035, CachedInput: 0.00875, Output: 0.14},

	// Local models and the scripted model cost nothing per token.
	"ollama:*":        {},
	"ollama-native:*": {},
	"scripted:*":      {},
}

// Default returns the built-in table.
func Default() *Table {
	t := &Table{prices: make(map[string]Price, len(defaults))}
	for k, v := range defaults {
		t.prices[k] = v
	}
	return t
}

// FromEnv returns the built-in table with the file named by
// TOLLGATE_PRICES, if set, laid over it.
func FromEnv() (*Table, error) {
	t := Default()
	path := strings.TrimSpace(os.Getenv(FileVar))
	if path == "" {
		return t, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: cannot read the price file: %w", FileVar, err)
	}
	if err := t.Merge(data); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", FileVar, path, err)
	}
	return t, nil
}

// fileEntry is one price as a file writes it; a missing cached_input
// means cached tokens cost what other input tokens cost.
type fileEntry struct {
	Input       *float64 `json:"input"`
	Output      *float64 `json:"output"`
	CachedInput *float64 `json:"cached_input"`
}

// Merge lays a JSON object of prices over the table:
//
//	{"openai:gpt-4.1": {"input": 2, "output": 8, "cached_input": 0.5},
//	 "acme:*": {"input": 0, "output": 0}}
//
// Each entry replaces the table's entry of that key whole. input and
// output are required; a negative price is an error.
func (t *Table) Merge(data []byte) error {
	var entries map[string]fileEntry
	if err := json.Unmarshal(data, &entries); err != nil {
		return fmt.Errorf("prices must be a JSON object of \"provider:model\": {\"input\", \"output\", \"cached_input\"} in US dollars per million tokens: %w", err)
	}
	if t.prices == nil {
		t.prices = map[string]Price{}
	}
	for key, e := range entries {
		if _, _, err := model.ParseName(key); err != nil {
			return fmt.Errorf("price key %q: %w", key, err)
		}
		if e.Input == nil || e.Output == nil {
			return fmt.Errorf("price %q needs both input and output", key)
		}
		p := Price{Input: *e.Input, Output: *e.Output, CachedInput: *e.Input}
		if e.CachedInput != nil {
			p.CachedInput = *e.CachedInput
		}
		if p.Input < 0 || p.Output < 0 || p.CachedInput < 0 {
			return fmt.Errorf("price %q is negative", key)
		}
		t.prices[key] = p
	}
	return nil
}

// Lookup returns the price of a model string and whether it is known.
func (t *Table) Lookup(modelString string) (Price, bool) {
	if t == nil || t.prices == nil {
		return Price{}, false
	}
	provider, name, err := model.ParseName(modelString)
	if err != nil {
		return Price{}, false
	}
	if provider == "bedrock" {
		name = withoutGeoPrefix(name)
	}
	if p, ok := t.find(provider, name); ok {
		return p, true
	}
	if alias, ok := map[string]string{"responses": "openai", "vertex": "gemini"}[provider]; ok {
		return t.find(alias, name)
	}
	return Price{}, false
}

func (t *Table) find(provider, name string) (Price, bool) {
	full := provider + ":" + name
	if p, ok := t.prices[full]; ok {
		return p, true
	}
	best, bestLen := Price{}, -1
	for key, p := range t.prices {
		if len(key) > bestLen && strings.HasPrefix(full, key) {
			if next := full[len(key)]; next == '-' || next == ':' {
				best, bestLen = p, len(key)
			}
		}
	}
	if bestLen >= 0 {
		return best, true
	}
	p, ok := t.prices[provider+":*"]
	return p, ok
}

// withoutGeoPrefix drops a Bedrock cross-region inference profile's
// prefix ("us.anthropic.claude-..." is priced as "anthropic.claude-...").
func withoutGeoPrefix(name string) string {
	for _, geo := range []string{"us.", "eu.", "apac.", "us-gov.", "global.", "jp.", "au.", "ca."} {
		if rest, ok := strings.CutPrefix(name, geo); ok && strings.Contains(rest, ".") {
			return rest
		}
	}
	return name
}

// Cost returns what u cost in US dollars for the model string, and false
// when the model has no price (the cost is then unknown, not zero).
func (t *Table) Cost(modelString string, u model.Usage) (float64, bool) {
	p, ok := t.Lookup(modelString)
	if !ok {
		return 0, false
	}
	return p.Cost(u), true
}

// Cost prices u. InputTokens includes the cached ones.
func (p Price) Cost(u model.Usage) float64 {
	cached := min(u.CachedTokens, u.InputTokens)
	fresh := u.InputTokens - cached
	return (float64(fresh)*p.Input + float64(cached)*p.CachedInput + float64(u.OutputTokens)*p.Output) / 1e6
}
