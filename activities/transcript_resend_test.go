package activities_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/activities"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tollgatetest"
	"github.com/tollgate-dev/tollgate/tool"
	"github.com/tollgate-dev/tollgate/workflows"
)

type stepArgs struct {
	N int `json:"n"`
}

// Transcript chunks are not synced to disk, so a crash can leave one
// torn, truncated or gone. This runs whole turns through AgentTurn and the
// real CallModel and transcript store, damages every stored chunk while a
// tool runs (where a crash between model calls would), and shows that the
// next model call of a worker that kept nothing in memory (one just
// restarted) fails as TranscriptMissing, the workflow resends the whole
// conversation, the model sees all of it, and the turn completes. The
// worker that stored the chunks and still holds the conversation never
// reads them back: its turn goes on unaware.
func TestTurnCompletesWhenTranscriptChunksAreDamaged(t *testing.T) {
	for _, w := range []struct {
		name       string
		cache      int64
		callModels int32
	}{
		// Two model calls find their conversation damaged and are sent
		// again whole: five CallModel runs for three replies.
		{"restarted worker", -1, 5},
		{"same worker", 0, 3},
	} {
		t.Run(w.name, func(t *testing.T) { damagedTurn(t, w.cache, w.callModels) })
	}
}

func damagedTurn(t *testing.T, cacheBytes int64, wantCallModels int32) {
	damages := map[string]func(t *testing.T, path string){
		"deleted": func(t *testing.T, p string) { require.NoError(t, os.Remove(p)) },
		"truncated": func(t *testing.T, p string) {
			info, err := os.Stat(p)
			require.NoError(t, err)
			require.NoError(t, os.Truncate(p, info.Size()/2))
		},
		"emptied": func(t *testing.T, p string) { require.NoError(t, os.Truncate(p, 0)) },
		"flipped": func(t *testing.T, p string) {
			data, err := os.ReadFile(p)
			require.NoError(t, err)
			data[len(data)/2] ^= 0x20
			require.NoError(t, os.WriteFile(p, data, 0o600))
		},
	}
	for name, damage := range damages {
		t.Run(name, func(t *testing.T) {
			data := t.TempDir()
			var damaged atomic.Int32
			step := tool.MustFunc(tool.Spec{Name: "step", Description: "Take a step.", Approval: tool.ApprovalNever, Idempotent: true},
				func(_ context.Context, _ tool.Call, a stepArgs) (results.Outcome, error) {
					damaged.Add(int32(damageChunks(t, filepath.Join(data, "transcripts"), damage)))
					return results.SucceedText("step " + string(rune('0'+a.N)) + " done"), nil
				})
			m := tollgatetest.NewModel(
				tollgatetest.Reply("First.", tollgatetest.Call("c1", "step", stepArgs{N: 1})),
				tollgatetest.Reply("Second.", tollgatetest.Call("c2", "step", stepArgs{N: 2})),
				tollgatetest.Reply("All done."),
			)
			turn := tollgatetest.NewTurn(t, tollgate.Options{DataDir: data, ConversationCacheBytes: cacheBytes, Tools: []tool.Tool{step}, NoBuiltins: true}, m)
			var callModels atomic.Int32
			turn.Env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
				if info.ActivityType.Name == activities.CallModelName {
					callModels.Add(1)
				}
			})

			// A prompt over activities.InlineTailBytes, so that the
			// first reply and every resent conversation are stored
			// rather than left inline.
			prompt := "walk" + strings.Repeat(".", activities.InlineTailBytes)
			res, err := turn.Run(workflows.Input{Prompt: prompt, Tools: []string{"step"}})
			require.NoError(t, err)
			require.Equal(t, workflows.StatusCompleted, res.Status)
			require.Equal(t, "All done.", res.Text)
			require.Positive(t, damaged.Load(), "the tool damaged stored chunks")

			// Three replies, each paid for once: a failed load never
			// reaches the model.
			reqs := m.Requests()
			require.Len(t, reqs, 3)
			require.Equal(t, wantCallModels, callModels.Load())

			// The last request holds the whole conversation, in order.
			var seen []string
			for _, msg := range reqs[2].Messages {
				seen = append(seen, string(msg.Role)+":"+msg.Text())
			}
			require.Equal(t, []string{"user:" + prompt, "assistant:First.", "tool:step 1 done", "assistant:Second.", "tool:step 2 done"}, seen)
		})
	}
}

// damageChunks damages every transcript chunk under dir and returns how
// many it damaged.
func damageChunks(t *testing.T, dir string, damage func(*testing.T, string)) int {
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".json") {
			return err
		}
		damage(t, p)
		n++
		return nil
	})
	require.NoError(t, err)
	return n
}
