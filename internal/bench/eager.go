package bench

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/tollgate-dev/tollgate"
)

// EagerStart is row 2d: from asking to start a turn to its first model
// call starting, with eager workflow start (the start response carries
// the first workflow task to this process's worker) and without (the
// task goes through matching), and the same for a bare workflow's first
// activity.
type EagerStart struct {
	Eager, Plain         []time.Duration
	BareEager, BarePlain []time.Duration
}

// EagerStart alternates eager and plain starts, samples of each per
// kind, one at a time; sample 0 of each warms up and is dropped. The
// Tollgate turns start through tollgate.Client, as an embedding program
// would; their first activity is CallModel (the turn has no tools, so no
// DescribeTools local activity runs first).
func (e *Env) EagerStart(ctx context.Context, samples int) (*EagerStart, error) {
	model, err := e.Script(0, 0, NoopTool, struct{}{})
	if err != nil {
		return nil, err
	}
	r := &EagerStart{}
	for i := 0; i <= samples; i++ {
		for k := 0; k < 4; k++ {
			// Rotate which kind goes first.
			kind := (i + k) % 4
			eager := kind%2 == 0
			var d time.Duration
			var err error
			if kind < 2 {
				d, err = e.startToFirstActivity(ctx, id("eager-tollgate"), func(wid string) error {
					in := TurnInput(model, 0, false)
					in.Tools = nil
					c := tollgate.Client{Temporal: e.Client, TaskQueue: TollgateQueue, EagerStart: eager}
					_, err := c.Start(ctx, wid, Unique(in, wid))
					return err
				})
			} else {
				d, err = e.startToFirstActivity(ctx, id("eager-bare"), func(wid string) error {
					_, err := e.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: wid, TaskQueue: BareQueue, EnableEagerStart: eager}, BareSeqName, 1)
					return err
				})
			}
			if err != nil {
				return nil, err
			}
			if i == 0 {
				continue
			}
			switch kind {
			case 0:
				r.Eager = append(r.Eager, d)
			case 1:
				r.Plain = append(r.Plain, d)
			case 2:
				r.BareEager = append(r.BareEager, d)
			case 3:
				r.BarePlain = append(r.BarePlain, d)
			}
		}
	}
	return r, nil
}

// startToFirstActivity starts a workflow with start and returns the time
// from the start request to its first activity's start, as the worker
// stamps it; then it waits for the workflow to finish.
func (e *Env) startToFirstActivity(ctx context.Context, wid string, start func(wid string) error) (time.Duration, error) {
	started, done := e.Stamps.Arm(StartKey(wid)), e.Stamps.Arm(DoneKey(wid))
	defer e.Stamps.Disarm(StartKey(wid))
	defer e.Stamps.Disarm(DoneKey(wid))
	t0 := time.Now()
	if err := start(wid); err != nil {
		return 0, err
	}
	var first time.Time
	select {
	case first = <-started:
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(30 * time.Second):
		return 0, fmt.Errorf("%s: no activity started within 30s", wid)
	}
	if err := e.Wait(ctx, wid, done, nil); err != nil {
		return 0, err
	}
	return first.Sub(t0), nil
}
