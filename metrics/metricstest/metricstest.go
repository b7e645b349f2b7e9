// Package metricstest holds Recorder, an in-memory Temporal metrics
// handler for tests that check what was counted and timed.
package metricstest

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
)

// Recorder keeps every counter increment, gauge update and timer record,
// by series name and tags. Handlers derived with WithTags share it. It is
// safe for concurrent use.
type Recorder struct {
	tags map[string]string
	data *data
}

type data struct {
	mu       sync.Mutex
	counters map[string]*series[int64]
	timers   map[string]*series[[]time.Duration]
	gauges   map[string]*series[float64]
}

// series is one name with one set of tags, and what was recorded on it.
type series[T any] struct {
	name  string
	tags  map[string]string
	value T
}

// get returns the series of name and tags in m, creating it.
func get[T any](m map[string]*series[T], name string, tags map[string]string) *series[T] {
	key := Key(name, tags)
	s, ok := m[key]
	if !ok {
		s = &series[T]{name: name, tags: tags}
		m[key] = s
	}
	return s
}

var _ client.MetricsHandler = (*Recorder)(nil)

// New returns an empty recorder.
func New() *Recorder {
	return &Recorder{data: &data{counters: map[string]*series[int64]{}, timers: map[string]*series[[]time.Duration]{}, gauges: map[string]*series[float64]{}}}
}

// Key is how a series with tags is filed: name{k=v,...}, keys sorted.
func Key(name string, tags map[string]string) string {
	keys := slices.Sorted(maps.Keys(tags))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + tags[k]
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}

func (r *Recorder) WithTags(tags map[string]string) client.MetricsHandler {
	merged := maps.Clone(r.tags)
	if merged == nil {
		merged = map[string]string{}
	}
	maps.Copy(merged, tags)
	return &Recorder{tags: merged, data: r.data}
}

func (r *Recorder) Counter(name string) client.MetricsCounter {
	return counterFunc(func(n int64) {
		r.data.mu.Lock()
		defer r.data.mu.Unlock()
		get(r.data.counters, name, r.tags).value += n
	})
}

func (r *Recorder) Gauge(name string) client.MetricsGauge {
	return gaugeFunc(func(v float64) {
		r.data.mu.Lock()
		defer r.data.mu.Unlock()
		get(r.data.gauges, name, r.tags).value = v
	})
}

func (r *Recorder) Timer(name string) client.MetricsTimer {
	return timerFunc(func(d time.Duration) {
		r.data.mu.Lock()
		defer r.data.mu.Unlock()
		t := get(r.data.timers, name, r.tags)
		t.value = append(t.value, d)
	})
}

// Counters are the counters of series name, by Key, with only the tags
// named in keep (all of them when keep is empty): the SDK adds its own
// (namespace, task queue, workflow type) that tests seldom care about.
func (r *Recorder) Counters(name string, keep ...string) map[string]int64 {
	r.data.mu.Lock()
	defer r.data.mu.Unlock()
	out := map[string]int64{}
	for _, s := range r.data.counters {
		if s.name == name {
			out[Key(name, only(s.tags, keep))] += s.value
		}
	}
	return out
}

// Gauges are the last values of the gauges of series name, by Key, with
// only the tags named in keep.
func (r *Recorder) Gauges(name string, keep ...string) map[string]float64 {
	r.data.mu.Lock()
	defer r.data.mu.Unlock()
	out := map[string]float64{}
	for _, s := range r.data.gauges {
		if s.name == name {
			out[Key(name, only(s.tags, keep))] = s.value
		}
	}
	return out
}

// Timers are the durations recorded on series name, by Key, with only
// the tags named in keep.
func (r *Recorder) Timers(name string, keep ...string) map[string][]time.Duration {
	r.data.mu.Lock()
	defer r.data.mu.Unlock()
	out := map[string][]time.Duration{}
	for _, s := range r.data.timers {
		if s.name == name {
			key := Key(name, only(s.tags, keep))
			out[key] = append(out[key], s.value...)
		}
	}
	return out
}

// LabelValues are the distinct values label took on series name, sorted.
func (r *Recorder) LabelValues(name, label string) []string {
	r.data.mu.Lock()
	defer r.data.mu.Unlock()
	seen := map[string]bool{}
	for _, s := range r.data.counters {
		if v, ok := s.tags[label]; ok && s.name == name {
			seen[v] = true
		}
	}
	for _, s := range r.data.timers {
		if v, ok := s.tags[label]; ok && s.name == name {
			seen[v] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

func only(tags map[string]string, keep []string) map[string]string {
	if len(keep) == 0 {
		return tags
	}
	out := map[string]string{}
	for _, k := range keep {
		if v, ok := tags[k]; ok {
			out[k] = v
		}
	}
	return out
}

type counterFunc func(int64)

func (f counterFunc) Inc(n int64) { f(n) }

type gaugeFunc func(float64)

func (f gaugeFunc) Update(v float64) { f(v) }

type timerFunc func(time.Duration)

func (f timerFunc) Record(d time.Duration) { f(d) }
