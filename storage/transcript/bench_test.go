package transcript

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"gocloud.dev/blob/memblob"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/storage/blobstore"
)

// BenchmarkAppend stores one step of a conversation (a 512-byte tool
// output and the assistant's next call) after the previous head, on the
// disk t.TempDir is on: what CallModel does once per model call. Back to
// back, the directory store's files created ahead run out, and most
// appends create their own file as a model call then would.
func BenchmarkAppend(b *testing.B) {
	b.ReportAllocs()
	benchAppend(b, 0)
}

// BenchmarkAppendPaced is BenchmarkAppend with a pause between appends,
// as between a turn's model calls: the directory store's files created
// ahead are ready, as they are for a model call. It reports no
// allocations: counting them reads memory statistics at every pause.
func BenchmarkAppendPaced(b *testing.B) { benchAppend(b, time.Millisecond) }

// benchAppend appends steps to one chain, pausing between appends with
// the timer stopped.
func benchAppend(b *testing.B, pause time.Duration) {
	s, err := NewStore(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	head := ""
	i := 0
	for b.Loop() {
		i++
		if head, err = s.Append(head, step(i)); err != nil {
			b.Fatal(err)
		}
		if pause > 0 {
			b.StopTimer()
			time.Sleep(pause)
			b.StartTimer()
		}
	}
}

// BenchmarkLoadBucket loads a 20-step conversation from a bucket, as
// every model call does on a remote blob URL, with and without the
// chunk cache. memblob has no network: each chunk the cache saves is a
// read and a hash here, and a round trip on S3.
func BenchmarkLoadBucket(b *testing.B) {
	for _, cached := range []int64{0, 64 << 20} {
		b.Run(fmt.Sprintf("cache=%dMiB", cached>>20), func(b *testing.B) {
			bucket := memblob.OpenBucket(nil)
			defer bucket.Close()
			s := New(blobstore.NewBucket(bucket, nil), Options{CacheBytes: cached})
			head := ""
			for i := range 20 {
				var err error
				if head, err = s.Append(head, step(i)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Load(head); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// step is one step of a conversation: a 512-byte tool output and the
// assistant's next call.
func step(i int) []results.Message {
	return []results.Message{
		{Role: results.RoleTool, ToolCallID: fmt.Sprintf("call_%d", i), ToolName: "blob", Parts: []results.Part{results.TextPart(strings.Repeat("x", 512))}},
		{Role: results.RoleAssistant, ToolCalls: []results.ToolCall{{ID: fmt.Sprintf("call_%d", i+1), Name: "blob", Arguments: `{"bytes":512}`}}},
	}
}
