package main

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/tollgate-dev/tollgate"
)

// ModelLimitsVar caps model calls per provider across the fleet.
const ModelLimitsVar = "TOLLGATE_MODEL_LIMITS"

// modelLimit is one provider's cap: calls per second for the whole task
// queue (the server enforces it across workers) and calls in flight on
// each worker (0: the SDK's default).
type modelLimit struct {
	provider  string
	perSecond float64
	inFlight  int
}

// parseModelLimits reads "openai=5/8,anthropic=2": provider=calls per
// second, then optionally /calls in flight per worker.
func parseModelLimits(s string) ([]modelLimit, error) {
	var out []modelLimit
	seen := map[string]bool{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		provider, spec, ok := strings.Cut(item, "=")
		provider = strings.TrimSpace(provider)
		if !ok || provider == "" || strings.ContainsAny(provider, ": /") {
			return nil, fmt.Errorf("%s: %q must be provider=calls-per-second[/in-flight], for example openai=5/8", ModelLimitsVar, item)
		}
		if seen[provider] {
			return nil, fmt.Errorf("%s: %s is limited twice", ModelLimitsVar, provider)
		}
		seen[provider] = true
		rate, inflight, _ := strings.Cut(spec, "/")
		l := modelLimit{provider: provider}
		var err error
		if l.perSecond, err = strconv.ParseFloat(strings.TrimSpace(rate), 64); err != nil || l.perSecond <= 0 {
			return nil, fmt.Errorf("%s: %s's calls per second must be a number above 0, not %q", ModelLimitsVar, provider, rate)
		}
		if inflight != "" {
			if l.inFlight, err = strconv.Atoi(strings.TrimSpace(inflight)); err != nil || l.inFlight <= 0 {
				return nil, fmt.Errorf("%s: %s's calls in flight must be a whole number above 0, not %q", ModelLimitsVar, provider, inflight)
			}
		}
		out = append(out, l)
	}
	return out, nil
}

// startModelWorkers gives each limited provider its own task queue,
// <task queue>/model/<provider>, polled by a worker that runs only
// CallModel under the provider's limits; turns this worker starts send
// that provider's calls there. The returned func stops them.
func startModelWorkers(c client.Client, plugin *tollgate.Plugin, taskQueue string, logger *slog.Logger) (func(), error) {
	limits, err := parseModelLimits(os.Getenv(ModelLimitsVar))
	if err != nil {
		return nil, err
	}
	var started []worker.Worker
	stop := func() {
		for _, w := range started {
			w.Stop()
		}
	}
	for _, l := range limits {
		queue := tollgate.ModelQueue(taskQueue, l.provider)
		if err := plugin.RouteModelCalls(l.provider, queue); err != nil {
			stop()
			return nil, err
		}
		w := worker.New(c, queue, worker.Options{
			DisableWorkflowWorker:              true,
			TaskQueueActivitiesPerSecond:       l.perSecond,
			MaxConcurrentActivityExecutionSize: l.inFlight,
		})
		plugin.RegisterModelCalls(w)
		if err := w.Start(); err != nil {
			stop()
			return nil, fmt.Errorf("start the model worker on %s: %w", queue, err)
		}
		started = append(started, w)
		logger.Info("Model calls limited", "provider", l.provider, "task_queue", queue, "per_second", l.perSecond, "in_flight_per_worker", l.inFlight)
	}
	return stop, nil
}
