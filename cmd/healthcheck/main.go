// Command healthcheck is the worker container's health check: it exits 0
// when a worker on this host is polling Tollgate's task queue, as the
// Temporal server sees it. The worker image has no shell or curl, and a
// worker has no port of its own to probe; the server's list of pollers is
// what says whether turns can make progress here.
//
// It reads the worker's own configuration: the Temporal client's
// (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TLS, API key, temporal.toml, as
// envconfig loads them) and TOLLGATE_TASK_QUEUE. A poller counts when its
// identity names this host (the SDK's default identity is
// pid@host@queue) and the server saw it within the last two minutes.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
)

// recent is how long ago a poll still counts: a long poll lasts about a
// minute, so a live worker has always polled within two.
const recent = 2 * time.Minute

func main() {
	if err := check(); err != nil {
		fmt.Fprintln(os.Stderr, "unhealthy:", err)
		os.Exit(1)
	}
	fmt.Println("healthy")
}

func check() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	host, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("read the host name: %w", err)
	}
	opts, err := envconfig.LoadDefaultClientOptions()
	if err != nil {
		return fmt.Errorf("read the Temporal client configuration: %w", err)
	}
	if opts.Namespace == "" {
		opts.Namespace = client.DefaultNamespace
	}
	ns := opts.Namespace
	opts.Identity = "healthcheck@" + host
	queue := envOr("TOLLGATE_TASK_QUEUE", "tollgate")
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return fmt.Errorf("reach Temporal: %w", err)
	}
	defer c.Close()
	for _, kind := range []enumspb.TaskQueueType{enumspb.TASK_QUEUE_TYPE_WORKFLOW, enumspb.TASK_QUEUE_TYPE_ACTIVITY} {
		resp, err := c.WorkflowService().DescribeTaskQueue(ctx, &workflowservice.DescribeTaskQueueRequest{
			Namespace: ns, TaskQueue: &taskqueuepb.TaskQueue{Name: queue, Kind: enumspb.TASK_QUEUE_KIND_NORMAL}, TaskQueueType: kind,
		})
		if err != nil {
			return fmt.Errorf("describe task queue %s: %w", queue, err)
		}
		if !pollingHere(resp.GetPollers(), host, time.Now()) {
			return fmt.Errorf("no worker on %s has polled the %s task queue %s in the last %s", host, kindName(kind), queue, recent)
		}
	}
	return nil
}

// pollingHere reports whether a poller from host was seen recently.
func pollingHere(pollers []*taskqueuepb.PollerInfo, host string, now time.Time) bool {
	for _, p := range pollers {
		if strings.Contains(p.GetIdentity(), "@"+host) && now.Sub(p.GetLastAccessTime().AsTime()) < recent {
			return true
		}
	}
	return false
}

func kindName(k enumspb.TaskQueueType) string {
	if k == enumspb.TASK_QUEUE_TYPE_WORKFLOW {
		return "workflow"
	}
	return "activity"
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
