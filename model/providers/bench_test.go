package providers_test

import (
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/model/providers/providerbench"
)

// BenchmarkEncodeStep encodes one step's request (ten messages, one
// image) per provider and sends it to an in-process transport; Chat
// Completions (openai) is the baseline.
func BenchmarkEncodeStep(b *testing.B) {
	for _, m := range providerbench.Models {
		prefix, _, _ := strings.Cut(m, ":")
		b.Run(prefix, func(b *testing.B) { providerbench.Bench(b, m) })
	}
}
