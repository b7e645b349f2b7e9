package tollgate

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	commandpb "go.temporal.io/api/command/v1"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/tollgate-dev/tollgate/workflows"
)

// MissingSearchAttributes lists, sorted, the Tollgate search attributes
// the namespace lacks (workflows.SearchAttributes). A worker runs turns
// without search attributes until none is missing; until then turns
// cannot be listed by status.
func MissingSearchAttributes(ctx context.Context, c client.Client, namespace string) ([]string, error) {
	resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return nil, fmt.Errorf("list the search attributes of namespace %s: %w", namespace, err)
	}
	var missing []string
	for name, typ := range workflows.SearchAttributes() {
		if got, ok := resp.GetCustomAttributes()[name]; !ok || got != typ {
			missing = append(missing, name)
		}
	}
	slices.Sort(missing)
	return missing, nil
}

// RegisterSearchAttributes adds the Tollgate search attributes the
// namespace lacks and returns once the server takes them, so workers can
// poll at once. It needs the operator permissions a development server
// gives everyone; production servers register them once, with the
// `temporal operator search-attribute create` commands docs/turns.md gives.
func RegisterSearchAttributes(ctx context.Context, c client.Client, namespace string) error {
	missing, err := MissingSearchAttributes(ctx, c, namespace)
	if err != nil || len(missing) == 0 {
		return err
	}
	all := workflows.SearchAttributes()
	add := map[string]enumspb.IndexedValueType{}
	for _, name := range missing {
		add[name] = all[name]
	}
	if _, err := c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: namespace, SearchAttributes: add}); err != nil {
		return fmt.Errorf("register search attributes %v in namespace %s: %w", missing, namespace, err)
	}
	return awaitSearchAttributes(ctx, c, namespace)
}

// searchAttributesReady bounds the wait for a server to take the search
// attributes it has just registered; each service reads the namespace's
// on its own refresh, every few seconds.
const searchAttributesReady = time.Minute

// awaitSearchAttributes returns once the server takes every Tollgate search
// attribute: its history service an upsert of each, and its frontend a
// query on each. The frontend records new attributes at once, but every
// service reads the namespace's mapping on its own refresh (2 s by
// default), and until the history service has, each workflow task that
// writes one fails BadSearchAttributes and is retried only after its
// timeout. So it asks the way turns do: a probe workflow, on a task queue
// of its own, completed by hand with one upsert of them all, then deleted.
func awaitSearchAttributes(ctx context.Context, c client.Client, namespace string) error {
	ctx, cancel := context.WithTimeout(ctx, searchAttributesReady)
	defer cancel()
	dc := converter.GetDefaultDataConverter()
	fields := map[string]*commonpb.Payload{}
	var query []string
	for name, typ := range workflows.SearchAttributes() {
		var v any = "probe"
		if typ == enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST {
			v = []string{"probe"}
		}
		p, err := dc.ToPayload(v)
		if err != nil {
			return fmt.Errorf("encode a probe value of search attribute %s: %w", name, err)
		}
		fields[name] = p
		query = append(query, fmt.Sprintf("%s = 'probe'", name))
	}
	slices.Sort(query)
	probe := searchAttributesProbe{svc: c.WorkflowService(), namespace: namespace, fields: fields, query: strings.Join(query, " AND ")}
	for attempt := 1; ; attempt++ {
		err := probe.try(ctx, attempt)
		var invalid *serviceerror.InvalidArgument
		if err == nil || !errors.As(err, &invalid) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("namespace %s registered Tollgate's search attributes, but the server did not take them within %s: %w", namespace, searchAttributesReady, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

type searchAttributesProbe struct {
	svc       workflowservice.WorkflowServiceClient
	namespace string
	fields    map[string]*commonpb.Payload
	query     string
}

// try runs one probe workflow. An InvalidArgument error is the server
// refusing the attributes (not yet, it is hoped); any other is trouble.
func (p searchAttributesProbe) try(ctx context.Context, attempt int) (err error) {
	if _, err := p.svc.CountWorkflowExecutions(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: p.namespace, Query: p.query}); err != nil {
		return fmt.Errorf("query by the search attributes: %w", err)
	}
	suffix := make([]byte, 8)
	_, _ = rand.Read(suffix)
	id := fmt.Sprintf("tollgate-search-attributes-probe-%x-%d", suffix, attempt)
	queue := &taskqueuepb.TaskQueue{Name: id, Kind: enumspb.TASK_QUEUE_KIND_NORMAL}
	started, err := p.svc.StartWorkflowExecution(ctx, &workflowservice.StartWorkflowExecutionRequest{
		Namespace:    p.namespace,
		WorkflowId:   id,
		WorkflowType: &commonpb.WorkflowType{Name: "TollgateSearchAttributesProbe"},
		TaskQueue:    queue,
		RequestId:    id,
		Identity:     probeIdentity,
	})
	if err != nil {
		return fmt.Errorf("start a search attributes probe: %w", err)
	}
	defer func() {
		// Deleting terminates a probe that is still open; either way it
		// leaves nothing for anyone to list.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_, derr := p.svc.DeleteWorkflowExecution(dctx, &workflowservice.DeleteWorkflowExecutionRequest{
			Namespace:         p.namespace,
			WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: started.GetRunId()},
		})
		if err == nil && derr != nil {
			err = fmt.Errorf("delete search attributes probe %s: %w", id, derr)
		}
	}()
	task, err := p.svc.PollWorkflowTaskQueue(ctx, &workflowservice.PollWorkflowTaskQueueRequest{Namespace: p.namespace, TaskQueue: queue, Identity: probeIdentity})
	if err != nil {
		return fmt.Errorf("take the search attributes probe's workflow task: %w", err)
	}
	_, err = p.svc.RespondWorkflowTaskCompleted(ctx, &workflowservice.RespondWorkflowTaskCompletedRequest{
		Namespace: p.namespace,
		TaskToken: task.GetTaskToken(),
		Identity:  probeIdentity,
		Commands: []*commandpb.Command{
			{
				CommandType: enumspb.COMMAND_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES,
				Attributes: &commandpb.Command_UpsertWorkflowSearchAttributesCommandAttributes{
					UpsertWorkflowSearchAttributesCommandAttributes: &commandpb.UpsertWorkflowSearchAttributesCommandAttributes{
						SearchAttributes: &commonpb.SearchAttributes{IndexedFields: p.fields},
					},
				},
			},
			{
				CommandType: enumspb.COMMAND_TYPE_COMPLETE_WORKFLOW_EXECUTION,
				Attributes: &commandpb.Command_CompleteWorkflowExecutionCommandAttributes{
					CompleteWorkflowExecutionCommandAttributes: &commandpb.CompleteWorkflowExecutionCommandAttributes{},
				},
			},
		},
	})
	if err != nil {
		return fmt.Errorf("upsert the search attributes in a probe: %w", err)
	}
	return nil
}

const probeIdentity = "tollgate-search-attributes-probe"
