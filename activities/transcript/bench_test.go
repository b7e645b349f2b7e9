package transcript

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/results"
)

// BenchmarkAppend stores one step of a conversation (a 512-byte tool
// output and the assistant's next call) after the previous head, on the
// disk t.TempDir is on: what CallModel does once per model call.
func BenchmarkAppend(b *testing.B) {
	s, err := NewStore(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	head := ""
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		msgs := []results.Message{
			{Role: results.RoleTool, ToolCallID: fmt.Sprintf("call_%d", i), ToolName: "blob", Parts: []results.Part{results.TextPart(strings.Repeat("x", 512))}},
			{Role: results.RoleAssistant, ToolCalls: []results.ToolCall{{ID: fmt.Sprintf("call_%d", i+1), Name: "blob", Arguments: `{"bytes":512}`}}},
		}
		if head, err = s.Append(head, msgs); err != nil {
			b.Fatal(err)
		}
	}
}
