package workflows

import (
	"fmt"
	"sort"
	"unicode/utf8"
)

// Bounds of Input.Metadata: labels for rules to read, not a store.
const (
	MaxMetadataKeys       = 32
	MaxMetadataKeyBytes   = 64
	MaxMetadataValueBytes = 512
)

// validateMetadata refuses metadata over the bounds, keys that are not
// plain names (rules index them as turn.metadata.key) and text that is
// not UTF-8.
func validateMetadata(md map[string]string) error {
	if len(md) > MaxMetadataKeys {
		return fmt.Errorf("metadata has %d keys; at most %d are allowed", len(md), MaxMetadataKeys)
	}
	keys := make([]string, 0, len(md))
	//workflowcheck:ignore keys are sorted before use
	for k := range md {
		keys = append(keys, k)
	}
	// Sorted, so that with several bad entries the same one is reported.
	sort.Strings(keys)
	for _, k := range keys {
		if k == "" || len(k) > MaxMetadataKeyBytes || !metadataKey(k) {
			return fmt.Errorf("metadata key %q must be 1 to %d letters, digits, '_', '-' or '.', starting with a letter", clip(k), MaxMetadataKeyBytes)
		}
		v := md[k]
		if len(v) > MaxMetadataValueBytes {
			return fmt.Errorf("metadata[%q] is %d bytes; a value may be at most %d", k, len(v), MaxMetadataValueBytes)
		}
		if !utf8.ValidString(v) {
			return fmt.Errorf("metadata[%q] is not UTF-8 text", k)
		}
	}
	return nil
}

func metadataKey(k string) bool {
	for i, r := range k {
		letter := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		if i == 0 && !letter {
			return false
		}
		if !letter && !(r >= '0' && r <= '9') && r != '_' && r != '-' && r != '.' {
			return false
		}
	}
	return true
}

// agentName is the named agent the turn runs, as rules read it
// (turn.agent): the one it resolved at start, else the one it names.
func (t *turn) agentName() string {
	if t.in.Resolved != nil && t.in.Resolved.Agent != "" {
		return t.in.Resolved.Agent
	}
	return t.in.Agent
}
