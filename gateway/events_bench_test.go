package gateway_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/gateway/apikey"
	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/workflows"
)

// The streaming bench rows, measured against the provider's own stream:
// set TOLLGATE_STREAM_BENCH=1 (they open a thousand connections).
//
//	TOLLGATE_STREAM_BENCH=1 go test -run TestStreamBench -v ./gateway/
func TestStreamBench(t *testing.T) {
	if os.Getenv("TOLLGATE_STREAM_BENCH") == "" {
		t.Skip("set TOLLGATE_STREAM_BENCH=1 to measure streaming")
	}
	e := newEnv(t, envOptions{events: sharedNATS(t)})
	reader := e.key("bench", []apikey.Scope{apikey.Read})

	const tokens = 2000
	watchers := 100
	if n, err := strconv.Atoi(os.Getenv("TOLLGATE_STREAM_BENCH_WATCHERS")); err == nil && n > 0 {
		watchers = n
	}
	sent := make([]time.Time, tokens)
	start := make(chan struct{})
	name := fmt.Sprintf("bench-%d", seq.Add(1))
	liveModels.Store(name, func(ctx context.Context, _ model.Request) (model.Response, error) {
		select {
		case <-start:
		case <-ctx.Done():
			return model.Response{}, ctx.Err()
		}
		var text strings.Builder
		for i := range tokens {
			piece := strconv.Itoa(i) + " "
			sent[i] = time.Now()
			model.Emit(ctx, model.Delta{Kind: model.DeltaText, Text: piece})
			text.WriteString(piece)
			if i%10 == 9 {
				// A fast model: some hundreds of tokens a second.
				time.Sleep(time.Millisecond)
			}
		}
		return model.Response{Message: results.Message{Parts: []results.Part{results.TextPart(text.String())}}, StopReason: model.StopEnd}, nil
	})
	id := fmt.Sprintf("%s-bench-%d", e.name, seq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := tollgate.Client{Temporal: e.caller, TaskQueue: e.tq}.Start(ctx, id, workflows.Input{Prompt: "count", Model: "gw:" + name})
	require.NoError(t, err)
	e.turns = append(e.turns, id)

	// The watchers read in a process of their own (the test binary run
	// again), as real clients would: in this process their goroutines
	// would wait behind the gateway's for a CPU and for the network
	// poller, and the bench would time its own clients. Set
	// TOLLGATE_STREAM_BENCH_INPROCESS=1 to read from here instead.
	inProcess := os.Getenv("TOLLGATE_STREAM_BENCH_INPROCESS") != ""
	var recv [][]int64
	var cpu time.Duration
	if inProcess {
		recv = make([][]int64, watchers)
		var wg sync.WaitGroup
		var ready sync.WaitGroup
		ready.Add(watchers)
		for w := range watchers {
			wg.Go(func() { recv[w] = watchTurn(ctx, e.http.URL, id, reader, tokens, ready.Done) })
		}
		ready.Wait()
		cpu0 := cpuTime()
		close(start)
		wg.Wait()
		cpu = cpuTime() - cpu0
	} else {
		out := filepath.Join(t.TempDir(), "received")
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run", "^TestStreamBenchWatchers$", "-test.count=1")
		cmd.Env = append(os.Environ(), "TOLLGATE_STREAM_BENCH_WATCH="+strings.Join([]string{e.http.URL, id, reader, strconv.Itoa(watchers), strconv.Itoa(tokens), out}, " "))
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		// The child says "ready" once every watcher's stream is open.
		line, err := bufio.NewReader(stdout).ReadString('\n')
		require.NoError(t, err, "the watchers' process did not start")
		require.Equal(t, "ready\n", line)
		cpu0 := cpuTime()
		close(start)
		require.NoError(t, cmd.Wait(), "the watchers' process")
		cpu = cpuTime() - cpu0
		recv = readReceived(t, out, watchers, tokens)
	}

	type got struct {
		lat   []time.Duration
		order bool
		n     int
	}
	results := make([]got, watchers)
	for w, r := range recv {
		g := got{order: len(r) == tokens}
		for k, at := range r {
			if at == 0 {
				g.order = false
				continue
			}
			g.n++
			g.lat = append(g.lat, time.Unix(0, at).Sub(sent[k]))
		}
		results[w] = g
	}

	var all []time.Duration
	for w, r := range results {
		require.Equal(t, tokens, r.n, "watcher %d got every delta", w)
		require.True(t, r.order, "watcher %d got them in order", w)
		all = append(all, r.lat...)
	}
	slices.Sort(all)
	first := make([]time.Duration, 0, watchers)
	for _, r := range results {
		first = append(first, r.lat[0])
	}
	slices.Sort(first)
	t.Logf("per-delta latency provider→SSE client over %d watchers × %d deltas: p50 %s, p99 %s", watchers, tokens, all[len(all)/2], all[len(all)*99/100])
	t.Logf("first token: p50 %s, p99 %s", first[len(first)/2], first[len(first)*99/100])
	if inProcess {
		t.Logf("CPU of the whole process (worker, NATS, gateway, clients) for the turn: %s, %s per watcher", cpu, cpu/time.Duration(watchers))
	} else {
		t.Logf("CPU of the process (worker, NATS, gateway; the watchers read in another) for the turn: %s, %s per watcher", cpu, cpu/time.Duration(watchers))
	}

	// Idle watchers: a parked turn, a thousand streams open on it
	// (TOLLGATE_STREAM_BENCH_IDLE=0 leaves this part out).
	idle := 1000
	if n, err := strconv.Atoi(os.Getenv("TOLLGATE_STREAM_BENCH_IDLE")); err == nil && n >= 0 {
		idle = n
	}
	if idle == 0 {
		return
	}
	parked := e.park("", "one", "ann", 1)
	profile := os.Getenv("TOLLGATE_STREAM_BENCH_PROFILE")
	if profile != "" {
		// Every allocation from here on, so that the profile's in-use
		// bytes are the watchers' own (the figure below stays the MemStats one).
		runtime.MemProfileRate = 1
	}
	runtime.GC()
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	g0 := runtime.NumGoroutine()
	if profile != "" {
		f, err := os.Create(filepath.Join(profile, "heap0.pprof"))
		require.NoError(t, err)
		require.NoError(t, pprof.Lookup("heap").WriteTo(f, 0))
		require.NoError(t, f.Close())
	}
	conns := make([]net.Conn, 0, idle)
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	addr := strings.TrimPrefix(e.http.URL, "http://")
	opened := time.Now()
	for range idle {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		conns = append(conns, c)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(20*time.Second)))
		_, err = fmt.Fprintf(c, "GET /v1/turns/%s/events HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", parked, addr, reader)
		require.NoError(t, err)
		// Read up to the first card: the stream is open and caught up.
		br := bufio.NewReaderSize(c, 512)
		for {
			line, err := br.ReadString('\n')
			require.NoError(t, err, "watcher %d of %d", len(conns), idle)
			if strings.HasPrefix(line, "event: card") {
				break
			}
		}
	}
	openTime := time.Since(opened)
	runtime.GC()
	var m1 runtime.MemStats
	runtime.ReadMemStats(&m1)
	goroutines := float64(runtime.NumGoroutine()-g0) / float64(idle)
	if profile != "" {
		// Where an idle watcher's memory goes:
		// go tool pprof -sample_index=inuse_space -diff_base heap0.pprof heap.pprof
		for _, name := range []string{"heap", "goroutine"} {
			f, err := os.Create(filepath.Join(profile, name+".pprof"))
			require.NoError(t, err)
			require.NoError(t, pprof.Lookup(name).WriteTo(f, 0))
			require.NoError(t, f.Close())
		}
	}
	per := (int64(m1.HeapInuse+m1.StackInuse) - int64(m0.HeapInuse+m0.StackInuse)) / int64(idle)
	// The goal is under 64 KiB each, gateway and client together: the
	// watchers of a turn share one JetStream consumer (stream.Hub).
	// Reported, not asserted: the figure moves with the machine's load.
	t.Logf("idle watchers: %d opened in %s, %.1f KiB each (heap and stacks of gateway, NATS consumer and client together, one process), %.2f goroutines each (heap %.1f KiB, stacks %.1f KiB)", idle, openTime.Round(time.Millisecond), float64(per)/1024, goroutines,
		float64(int64(m1.HeapInuse)-int64(m0.HeapInuse))/float64(idle)/1024, float64(int64(m1.StackInuse)-int64(m0.StackInuse))/float64(idle)/1024)
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// watchTurn reads a turn's events as one watcher and returns, for each
// text delta the bench's model wrote ("<k> "), when its bytes were read
// off the connection (Unix nanoseconds; 0 for one that never came or
// came out of order). opened is called once the stream is open.
func watchTurn(ctx context.Context, base, id, key string, tokens int, opened func()) []int64 {
	got := make([]int64, tokens)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/turns/"+id+"/events", nil)
	if err != nil {
		opened()
		return got
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	opened()
	if err != nil {
		return got
	}
	defer resp.Body.Close()
	// Timed at the read that brought the bytes, not when a line of them
	// is parsed: a line is never stamped earlier than it arrived.
	body := &stampedReader{r: resp.Body}
	sc := bufio.NewScanner(body)
	next, event := 0, ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = line[7:]
		case strings.HasPrefix(line, "data: ") && event == "text":
			i := strings.Index(line, `"text":"`)
			s := line[i+8:]
			k, err := strconv.Atoi(s[:strings.IndexByte(s, ' ')])
			if err != nil || k != next || k >= tokens {
				return got
			}
			next = k + 1
			got[k] = body.at
		case strings.HasPrefix(line, "data: ") && event == "result":
			return got
		}
	}
	return got
}

// stampedReader notes when each read returned.
type stampedReader struct {
	r  io.Reader
	at int64
}

func (s *stampedReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	s.at = time.Now().UnixNano()
	return n, err
}

// TestStreamBenchWatchers is TestStreamBench's watchers, run by it in a
// process of their own: TOLLGATE_STREAM_BENCH_WATCH holds the gateway's
// URL, the turn, the key, the number of watchers and of deltas, and the
// file to write the receipt times to.
func TestStreamBenchWatchers(t *testing.T) {
	spec := strings.Fields(os.Getenv("TOLLGATE_STREAM_BENCH_WATCH"))
	if len(spec) != 6 {
		t.Skip("run by TestStreamBench")
	}
	watchers, err := strconv.Atoi(spec[3])
	require.NoError(t, err)
	tokens, err := strconv.Atoi(spec[4])
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	recv := make([][]int64, watchers)
	var wg, ready sync.WaitGroup
	ready.Add(watchers)
	for w := range watchers {
		wg.Go(func() { recv[w] = watchTurn(ctx, spec[0], spec[1], spec[2], tokens, ready.Done) })
	}
	ready.Wait()
	fmt.Println("ready")
	wg.Wait()
	buf := make([]byte, 0, watchers*tokens*8)
	for _, r := range recv {
		for _, at := range r {
			buf = binary.LittleEndian.AppendUint64(buf, uint64(at))
		}
	}
	require.NoError(t, os.WriteFile(spec[5], buf, 0o600))
}

// readReceived reads what TestStreamBenchWatchers wrote.
func readReceived(t *testing.T, path string, watchers, tokens int) [][]int64 {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Len(t, b, watchers*tokens*8)
	out := make([][]int64, watchers)
	for w := range out {
		out[w] = make([]int64, tokens)
		for k := range out[w] {
			out[w][k] = int64(binary.LittleEndian.Uint64(b[(w*tokens+k)*8:]))
		}
	}
	return out
}
