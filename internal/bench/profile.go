package bench

import (
	"bytes"
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/google/pprof/profile"
)

// profileCommand runs a subprocess worker's profiling command: "heap
// <path>" writes a heap profile after a GC, "cpu <path>" starts a CPU
// profile and "cpustop" ends it.
func profileCommand(cmd, path string) error {
	switch cmd {
	case "heap":
		runtime.GC()
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		defer f.Close()
		return pprof.Lookup("heap").WriteTo(f, 0)
	case "cpu":
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return err
		}
		cpuFile = f
		return nil
	case "cpustop":
		pprof.StopCPUProfile()
		if cpuFile == nil {
			return nil
		}
		err := cpuFile.Close()
		cpuFile = nil
		return err
	}
	return fmt.Errorf("unknown profile command %q", cmd)
}

// cpuFile is the subprocess worker's running CPU profile; only the stdin
// loop touches it.
var cpuFile *os.File

// profile asks the subprocess worker to run a profiling command writing
// to name in p.profiles; without a profile directory it does nothing.
func (p *workerProc) profile(cmd, name string) error {
	if p.profiles == "" {
		return nil
	}
	line := cmd
	if name != "" {
		line += " " + filepath.Join(p.profiles, name)
	}
	if _, err := fmt.Fprintln(p.stdin, line); err != nil {
		return err
	}
	msg, ok := <-p.acks
	if !ok {
		return fmt.Errorf("bench worker exited")
	}
	if msg != "" {
		return fmt.Errorf("bench worker %s: %s", cmd, msg)
	}
	return nil
}

// CPUProfile summarises a CPU profile of this process taken while it ran
// Calls tool calls (with everything else it ran meanwhile: the embedded
// server, the client, both workers).
type CPUProfile struct {
	// Calls is how many tool calls ran while it was taken, Wall how long
	// it took and CPU the CPU time sampled.
	Calls     int
	Wall, CPU time.Duration
	// Top are the functions with the most CPU time of their own.
	Top []ProfileFunc
	// Areas split the CPU time by whose code ran (the leaf frame's
	// package), largest first.
	Areas []ProfileFunc
	// Path is where the raw profile was written, empty if nowhere.
	Path string
}

// ProfileFunc is one function's (or area's) CPU time: Flat of its own,
// Cum including what it called.
type ProfileFunc struct {
	Name      string
	Flat, Cum time.Duration
}

// PerCall is the CPU time per tool call.
func (c *CPUProfile) PerCall() time.Duration {
	if c.Calls == 0 {
		return 0
	}
	return c.CPU / time.Duration(c.Calls)
}

// profileCPU runs f under this process's CPU profiler and summarises
// the profile; dir, if set, keeps the raw profile as name there.
func profileCPU(dir, name string, calls int, f func() error) (*CPUProfile, error) {
	var buf bytes.Buffer
	if err := pprof.StartCPUProfile(&buf); err != nil {
		return nil, fmt.Errorf("start the CPU profile: %w", err)
	}
	t0 := time.Now()
	err := f()
	wall := time.Since(t0)
	pprof.StopCPUProfile()
	if err != nil {
		return nil, err
	}
	c, err := summarize(buf.Bytes(), 10)
	if err != nil {
		return nil, err
	}
	c.Calls, c.Wall = calls, wall
	if dir != "" {
		c.Path = filepath.Join(dir, name)
		if err := os.WriteFile(c.Path, buf.Bytes(), 0o644); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// summarize parses a CPU profile and returns its total, its top n
// functions by their own time, and the time by area.
func summarize(data []byte, n int) (*CPUProfile, error) {
	p, err := profile.ParseData(data)
	if err != nil {
		return nil, fmt.Errorf("parse the CPU profile: %w", err)
	}
	vi, err := cpuIndex(p)
	if err != nil {
		return nil, err
	}
	flat, cum, areas := map[string]int64{}, map[string]int64{}, map[string]int64{}
	var total int64
	for _, s := range p.Sample {
		v := s.Value[vi]
		total += v
		seen := map[string]bool{}
		for i, loc := range s.Location {
			// Inlined calls share a location; the first line is the
			// innermost.
			for j, line := range loc.Line {
				if line.Function == nil {
					continue
				}
				name := line.Function.Name
				if i == 0 && j == 0 {
					flat[name] += v
					areas[area(name)] += v
				}
				if !seen[name] {
					seen[name] = true
					cum[name] += v
				}
			}
		}
	}
	c := &CPUProfile{CPU: time.Duration(total)}
	for name, v := range flat {
		c.Top = append(c.Top, ProfileFunc{Name: name, Flat: time.Duration(v), Cum: time.Duration(cum[name])})
	}
	byFlat := func(a, b ProfileFunc) int {
		return cmp.Or(cmp.Compare(b.Flat, a.Flat), strings.Compare(a.Name, b.Name))
	}
	slices.SortFunc(c.Top, byFlat)
	c.Top = c.Top[:min(n, len(c.Top))]
	for name, v := range areas {
		c.Areas = append(c.Areas, ProfileFunc{Name: name, Flat: time.Duration(v)})
	}
	slices.SortFunc(c.Areas, byFlat)
	return c, nil
}

// cpuIndex is the index of a CPU profile's samples' CPU time.
func cpuIndex(p *profile.Profile) (int, error) {
	for i, st := range p.SampleType {
		if st.Type == "cpu" && st.Unit == "nanoseconds" {
			return i, nil
		}
	}
	return 0, fmt.Errorf("the profile has no cpu/nanoseconds samples")
}

// area names whose code a function is, from its package path.
func area(fn string) string {
	switch {
	case strings.HasPrefix(fn, "github.com/tollgate-dev/tollgate/"):
		return "Tollgate"
	case strings.HasPrefix(fn, "go.temporal.io/server/"):
		return "Temporal server"
	case strings.HasPrefix(fn, "go.temporal.io/sdk/"):
		return "Temporal Go SDK"
	case strings.HasPrefix(fn, "google.golang.org/grpc"), strings.HasPrefix(fn, "golang.org/x/net/"):
		return "gRPC and HTTP/2"
	case strings.HasPrefix(fn, "google.golang.org/protobuf/"), strings.HasPrefix(fn, "github.com/gogo/protobuf/"), strings.HasPrefix(fn, "go.temporal.io/api/"):
		return "protobuf (Temporal API types)"
	case strings.HasPrefix(fn, "modernc.org/"), strings.HasPrefix(fn, "github.com/jmoiron/sqlx"):
		return "SQLite (the server's store)"
	case strings.HasPrefix(fn, "encoding/json."):
		return "encoding/json"
	case strings.HasPrefix(fn, "runtime."), strings.HasPrefix(fn, "internal/runtime/"), strings.HasPrefix(fn, "gcWriteBarrier"):
		return "Go runtime (GC, scheduler, allocation)"
	case strings.HasPrefix(fn, "syscall."), strings.HasPrefix(fn, "internal/poll."), strings.HasPrefix(fn, "os."):
		return "system calls"
	}
	return "other"
}

// roles name who a CPU sample worked for, by the frames on its stack,
// first match wins: the server's request handling and background queues,
// NATS, the worker's workflow code (the SDK's coroutines, with the
// decoding and encoding they do), its activities, its workflow-task
// processing around them, and the garbage collector. Everything else
// (gRPC clients, pollers, the scheduler) is "other".
var roles = []struct {
	name   string
	frames []string
}{
	{"Temporal server", []string{"go.temporal.io/server/"}},
	{"NATS", []string{"github.com/nats-io/"}},
	{"workflow code", []string{"go.temporal.io/sdk/internal.(*coroutineState).run"}},
	{"activities", []string{"go.temporal.io/sdk/internal.(*activityTaskPoller).ProcessTask"}},
	{"workflow tasks", []string{"go.temporal.io/sdk/internal.(*workflowTaskProcessor)", "go.temporal.io/sdk/internal.(*workflowTaskPoller)"}},
	{"garbage collector", []string{"runtime.gcBgMarkWorker"}},
}

// roleNames are the roles splitByRole reports, in order, "other" last.
func roleNames() []string {
	names := make([]string, 0, len(roles)+1)
	for _, r := range roles {
		names = append(names, r.name)
	}
	return append(names, "other")
}

// splitByRole sums a CPU profile's samples by role (roleNames).
func splitByRole(p *profile.Profile) (map[string]time.Duration, error) {
	vi, err := cpuIndex(p)
	if err != nil {
		return nil, err
	}
	out := map[string]time.Duration{}
	for _, s := range p.Sample {
		out[roleOf(s)] += time.Duration(s.Value[vi])
	}
	return out, nil
}

func roleOf(s *profile.Sample) string {
	for _, r := range roles {
		for _, loc := range s.Location {
			for _, line := range loc.Line {
				if line.Function == nil {
					continue
				}
				for _, f := range r.frames {
					if strings.HasPrefix(line.Function.Name, f) {
						return r.name
					}
				}
			}
		}
	}
	return "other"
}
