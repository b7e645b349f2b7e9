package bench

import (
	"crypto/sha256"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/require"
)

// TestProfileCPU profiles real work and checks the summary accounts for
// it: the busy function leads the top, and the areas add up to the
// total.
func TestProfileCPU(t *testing.T) {
	var sink [32]byte
	p, err := profileCPU(t.TempDir(), "cpu.pb.gz", 4, func() error {
		// A fixed amount of work (about 0.3 s of CPU), not of time: on
		// a loaded machine a time-bound loop may get little CPU.
		for i := 0; i < 1_500_000; i++ {
			sink = sha256.Sum256(sink[:])
		}
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, p.CPU, 50*time.Millisecond, "the hashing shows in the profile")
	require.Equal(t, p.CPU/4, p.PerCall())
	require.NotEmpty(t, p.Top)
	require.LessOrEqual(t, len(p.Top), 10)
	require.Contains(t, p.Top[0].Name, "sha256", "the hashing loop leads the top")
	var sum time.Duration
	for _, a := range p.Areas {
		sum += a.Flat
	}
	require.Equal(t, p.CPU, sum, "every sample is in one area")
	require.FileExists(t, p.Path)
}

func TestArea(t *testing.T) {
	for fn, want := range map[string]string{
		"github.com/tollgate-dev/tollgate/workflows.(*turn).run":          "Tollgate",
		"go.temporal.io/server/service/history.(*handler).RecordActivity": "Temporal server",
		"go.temporal.io/sdk/internal.(*coroutineState).run":               "Temporal Go SDK",
		"runtime.mallocgc":       "Go runtime (GC, scheduler, allocation)",
		"crypto/sha256.block":    "other",
		"encoding/json.Marshal":  "encoding/json",
		"modernc.org/sqlite.foo": "SQLite (the server's store)",
	} {
		require.Equal(t, want, area(fn), fn)
	}
}

// TestRoleOf checks a sample goes to the first role any frame of its
// stack names, and to "other" when none does.
func TestRoleOf(t *testing.T) {
	sample := func(names ...string) *profile.Sample {
		s := &profile.Sample{}
		for _, n := range names {
			s.Location = append(s.Location, &profile.Location{Line: []profile.Line{{Function: &profile.Function{Name: n}}}})
		}
		return s
	}
	for want, s := range map[string]*profile.Sample{
		"Temporal server": sample("runtime.memmove", "go.temporal.io/server/service/history.(*Handler).RespondWorkflowTaskCompleted"),
		"workflow code":   sample("encoding/json.Unmarshal", "github.com/tollgate-dev/tollgate/workflows.(*turn).run", "go.temporal.io/sdk/internal.(*coroutineState).run"),
		"activities":      sample("github.com/tollgate-dev/tollgate/activities.(*Activities).CallModel", "go.temporal.io/sdk/internal.(*activityTaskPoller).ProcessTask"),
		"workflow tasks":  sample("go.temporal.io/sdk/internal.(*workflowTaskProcessor).ProcessTask"),
		// A NATS client publishing from an activity is NATS's, not the
		// activity's: NATS comes first.
		"NATS":              sample("github.com/nats-io/nats%2ego.(*Conn).PublishMsg", "go.temporal.io/sdk/internal.(*activityTaskPoller).ProcessTask"),
		"garbage collector": sample("runtime.scanobject", "runtime.gcBgMarkWorker"),
		"other":             sample("runtime.futex", "google.golang.org/grpc.(*ClientConn).Invoke"),
	} {
		require.Equal(t, want, roleOf(s))
	}
	require.Equal(t, "other", roleNames()[len(roleNames())-1])
}
