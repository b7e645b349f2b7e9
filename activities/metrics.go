package activities

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/tollgate-dev/tollgate/metrics"
	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/storage/transcript"
)

// MaxModelLabels bounds the model label: the model names come from
// whoever starts turns, so a worker labels the first this many it sees
// and counts the rest as metrics.Other.
const MaxModelLabels = 32

// modelLabels is per process, as the series they label are.
var modelLabels = metrics.NewCapped(MaxModelLabels)

// timeToolRun, deferred in RunTool once the tool is found in the
// registry (so its name is a registered one), times the run.
func timeToolRun(ctx context.Context, name string, start time.Time) {
	metrics.Time(activity.GetMetricsHandler(ctx), metrics.ToolRun, time.Since(start), map[string]string{metrics.Tool: name})
}

// countModelCall counts one provider call of CallModel and the tokens
// it reported. modelString resolved, so its provider is one the worker
// has.
func countModelCall(ctx context.Context, modelString string, resp model.Response, err error) {
	provider, name, perr := model.ParseName(modelString)
	if perr != nil {
		provider, name = metrics.Other, metrics.Other
	}
	tags := map[string]string{metrics.Provider: provider, metrics.Model: modelLabels.Label(name)}
	h := activity.GetMetricsHandler(ctx)
	if err != nil {
		metrics.Count(h, metrics.ModelCalls, 1, with(tags, metrics.Outcome, metrics.Error))
		return
	}
	metrics.Count(h, metrics.ModelCalls, 1, with(tags, metrics.Outcome, metrics.OK))
	metrics.Count(h, metrics.ModelTokens, int64(resp.Usage.InputTokens), with(tags, metrics.Direction, metrics.Input))
	metrics.Count(h, metrics.ModelTokens, int64(resp.Usage.OutputTokens), with(tags, metrics.Direction, metrics.Output))
}

// countModelCost counts a priced call's cost, in millionths of a dollar
// (counters count whole numbers).
func countModelCost(ctx context.Context, modelString string, usd float64) {
	provider, name, err := model.ParseName(modelString)
	if err != nil {
		provider, name = metrics.Other, metrics.Other
	}
	tags := map[string]string{metrics.Provider: provider, metrics.Model: modelLabels.Label(name)}
	h := activity.GetMetricsHandler(ctx)
	metrics.Count(h, metrics.ModelCost, int64(usd*1e6+0.5), tags)
	costSums.Add(h, metrics.ModelCostTotal, usd, tags)
}

// costSums are this process's model costs so far, by provider and model.
var costSums metrics.Sums

// countStored counts bytes RunTool moved to the output store.
func countStored(ctx context.Context, n int) {
	metrics.Count(activity.GetMetricsHandler(ctx), metrics.PayloadStoreBytes, int64(n), map[string]string{metrics.Store: metrics.StoreOutput})
}

// countTranscriptMiss counts a stored conversation CallModel could not
// find (err is its load error; a corrupt one is no miss).
func countTranscriptMiss(ctx context.Context, err error) {
	if !errors.Is(err, transcript.ErrMissing) {
		return
	}
	metrics.Count(activity.GetMetricsHandler(ctx), metrics.PayloadStoreMisses, 1, map[string]string{metrics.Store: metrics.StoreTranscript})
}

func with(tags map[string]string, k, v string) map[string]string {
	out := make(map[string]string, len(tags)+1)
	for tk, tv := range tags {
		out[tk] = tv
	}
	out[k] = v
	return out
}
