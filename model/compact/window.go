package compact

import "strings"

// Threshold is the share of the context window past which a turn
// compacts before its next model call: the last call's input tokens, its
// reply and the messages added since, estimated, over 80% of the window.
// The rest leaves room for the reply and for the estimate's error.
const (
	ThresholdPercent = 80
	// KeepPercent of the window is what compaction keeps verbatim at
	// most (the last exchange is always kept).
	KeepPercent = 25
)

// windows are the context windows, in tokens, of model families the
// providers name most, keyed by model name prefix (after "provider:").
// A turn sets policy.context_tokens for any other model, or for a
// deployment that serves a family with a smaller window.
var windows = []struct {
	prefix string
	tokens int
}{
	{"gpt-4.1", 1_047_576},
	{"gpt-5", 400_000},
	{"gpt-4o", 128_000},
	{"o3", 200_000},
	{"o4", 200_000},
	{"claude", 200_000},
	{"anthropic.claude", 200_000},
	{"gemini", 1_048_576},
	{"amazon.nova-pro", 300_000},
	{"amazon.nova-lite", 300_000},
	{"amazon.nova-micro", 128_000},
}

// Window is the context window of a turn's model ("openai:gpt-4.1"), or
// zero when the family is not known. Bedrock's cross-region prefixes
// ("us.", "eu.", "apac.", "global.") are ignored.
func Window(modelString string) int {
	_, name, ok := strings.Cut(modelString, ":")
	if !ok {
		return 0
	}
	for _, geo := range []string{"us.", "eu.", "apac.", "global."} {
		if rest, ok := strings.CutPrefix(name, geo); ok {
			name = rest
			break
		}
	}
	for _, w := range windows {
		if strings.HasPrefix(name, w.prefix) {
			return w.tokens
		}
	}
	return 0
}
