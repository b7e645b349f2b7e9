package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tollgate-dev/tollgate/workflows"
)

// The histories here are built by hand, not recorded: the recorded corpus
// and its test belong to workflows/testdata. They are chosen to stay true
// whatever the workflow does next: a turn that has only been started
// replays (the first task has nothing recorded to compare against), and
// no AgentTurn ever starts a child workflow, so a history claiming it did
// must fail as nondeterministic.

func started(t *testing.T, workflowType string) []*historypb.HistoryEvent {
	t.Helper()
	input, err := converter.GetDefaultDataConverter().ToPayloads(workflows.Input{Prompt: "hi", Model: "scripted:demo"})
	require.NoError(t, err)
	now := timestamppb.New(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))
	tq := &taskqueuepb.TaskQueue{Name: workflows.DefaultTaskQueue, Kind: enumspb.TASK_QUEUE_KIND_NORMAL}
	return []*historypb.HistoryEvent{
		{EventId: 1, EventTime: now, EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
			Attributes: &historypb.HistoryEvent_WorkflowExecutionStartedEventAttributes{WorkflowExecutionStartedEventAttributes: &historypb.WorkflowExecutionStartedEventAttributes{
				WorkflowType:             &commonpb.WorkflowType{Name: workflowType},
				TaskQueue:                tq,
				Input:                    input,
				WorkflowTaskTimeout:      durationpb.New(10 * time.Second),
				OriginalExecutionRunId:   "run-1",
				FirstExecutionRunId:      "run-1",
				Attempt:                  1,
				WorkflowExecutionTimeout: durationpb.New(0),
			}}},
		{EventId: 2, EventTime: now, EventType: enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
			Attributes: &historypb.HistoryEvent_WorkflowTaskScheduledEventAttributes{WorkflowTaskScheduledEventAttributes: &historypb.WorkflowTaskScheduledEventAttributes{
				TaskQueue: tq, StartToCloseTimeout: durationpb.New(10 * time.Second), Attempt: 1,
			}}},
		{EventId: 3, EventTime: now, EventType: enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED,
			Attributes: &historypb.HistoryEvent_WorkflowTaskStartedEventAttributes{WorkflowTaskStartedEventAttributes: &historypb.WorkflowTaskStartedEventAttributes{
				ScheduledEventId: 2, Identity: "test", RequestId: "req-1",
			}}},
	}
}

// childStarted appends a completed first task whose only command started
// a child workflow.
func childStarted(events []*historypb.HistoryEvent) []*historypb.HistoryEvent {
	now := events[0].EventTime
	return append(events,
		&historypb.HistoryEvent{EventId: 4, EventTime: now, EventType: enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
			Attributes: &historypb.HistoryEvent_WorkflowTaskCompletedEventAttributes{WorkflowTaskCompletedEventAttributes: &historypb.WorkflowTaskCompletedEventAttributes{
				ScheduledEventId: 2, StartedEventId: 3, Identity: "test",
			}}},
		&historypb.HistoryEvent{EventId: 5, EventTime: now, EventType: enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED,
			Attributes: &historypb.HistoryEvent_StartChildWorkflowExecutionInitiatedEventAttributes{StartChildWorkflowExecutionInitiatedEventAttributes: &historypb.StartChildWorkflowExecutionInitiatedEventAttributes{
				Namespace: "default", WorkflowId: "child", WorkflowType: &commonpb.WorkflowType{Name: "Child"},
				TaskQueue: &taskqueuepb.TaskQueue{Name: workflows.DefaultTaskQueue}, WorkflowTaskCompletedEventId: 4,
			}}},
		&historypb.HistoryEvent{EventId: 6, EventTime: now, EventType: enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
			Attributes: &historypb.HistoryEvent_WorkflowTaskScheduledEventAttributes{WorkflowTaskScheduledEventAttributes: &historypb.WorkflowTaskScheduledEventAttributes{
				TaskQueue: &taskqueuepb.TaskQueue{Name: workflows.DefaultTaskQueue}, StartToCloseTimeout: durationpb.New(10 * time.Second), Attempt: 1,
			}}},
		&historypb.HistoryEvent{EventId: 7, EventTime: now, EventType: enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED,
			Attributes: &historypb.HistoryEvent_WorkflowTaskStartedEventAttributes{WorkflowTaskStartedEventAttributes: &historypb.WorkflowTaskStartedEventAttributes{
				ScheduledEventId: 6, Identity: "test", RequestId: "req-2",
			}}},
	)
}

func writeHistory(t *testing.T, dir, name string, events []*historypb.HistoryEvent) string {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, Write(&b, &historypb.History{Events: events}))
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, b.Bytes(), 0o644))
	return p
}

func opts(t *testing.T) Options { return Options{DataDir: t.TempDir()} }

func TestFilesReplaysAStartedTurn(t *testing.T) {
	dir := t.TempDir()
	p := writeHistory(t, dir, "started.json", started(t, workflows.WorkflowName))
	res := Files(context.Background(), []string{p}, opts(t))
	require.Len(t, res, 1)
	assert.NoError(t, res[0].Err)
	assert.True(t, res[0].OK())
	assert.Equal(t, 3, res[0].Events)
	assert.Equal(t, p, res[0].Path)
}

func TestFilesReportsNondeterminism(t *testing.T) {
	full := childStarted(started(t, workflows.WorkflowName))
	// Ending after the recorded command, after the next task was
	// scheduled, and while that task is in flight (the case the SDK
	// replayer alone misses).
	for _, n := range []int{5, 6, 7} {
		dir := t.TempDir()
		p := writeHistory(t, dir, "child.json", full[:n])
		res := Files(context.Background(), []string{p}, opts(t))
		require.Len(t, res, 1)
		require.Error(t, res[0].Err, "history of %d events", n)
		assert.Contains(t, strings.ToLower(res[0].Err.Error()), "nondetermin", "history of %d events", n)
		assert.Equal(t, n, res[0].Events)
	}
}

func TestFilesErrorPathsDoNotStopTheRest(t *testing.T) {
	dir := t.TempDir()
	good := writeHistory(t, dir, "a-good.json", started(t, workflows.WorkflowName))
	malformed := filepath.Join(dir, "b-malformed.json")
	require.NoError(t, os.WriteFile(malformed, []byte(`{"events": [`), 0o644))
	empty := filepath.Join(dir, "c-empty.json")
	require.NoError(t, os.WriteFile(empty, []byte(`{"events": []}`), 0o644))
	other := writeHistory(t, dir, "d-other.json", started(t, "SomethingElse"))
	missing := filepath.Join(dir, "missing.json")

	res := Files(context.Background(), []string{missing, good, malformed, empty, other}, opts(t))
	require.Len(t, res, 5)
	assert.ErrorIs(t, res[0].Err, os.ErrNotExist)
	assert.NoError(t, res[1].Err)
	assert.ErrorContains(t, res[2].Err, "temporal workflow show --output json")
	assert.ErrorContains(t, res[3].Err, "no events")
	assert.ErrorContains(t, res[4].Err, `workflow type "SomethingElse"`)
}

// Session histories replay too: the replayer gets the recorded workflow
// id the session names its turns after.
func TestFilesReplaysSessions(t *testing.T) {
	res := Files(context.Background(), []string{"../workflows/testdata/histories/sessions"}, opts(t))
	require.NotEmpty(t, res)
	for _, r := range res {
		assert.NoError(t, r.Err, r.Path)
	}
}

func TestFilesExpandsDirectoriesInNameOrder(t *testing.T) {
	dir := t.TempDir()
	b := writeHistory(t, dir, "b.json", started(t, workflows.WorkflowName))
	a := writeHistory(t, dir, "a.json", started(t, workflows.WorkflowName))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "README.md"), []byte("not a history"), 0o644))
	res := Files(context.Background(), []string{dir}, opts(t))
	require.Len(t, res, 2)
	assert.Equal(t, a, res[0].Path)
	assert.Equal(t, b, res[1].Path)

	emptyDir := t.TempDir()
	res = Files(context.Background(), []string{emptyDir}, opts(t))
	require.Len(t, res, 1)
	assert.ErrorContains(t, res[0].Err, "no *.json histories")
}

func TestFilesStopsReplayingWhenCancelled(t *testing.T) {
	dir := t.TempDir()
	p := writeHistory(t, dir, "a.json", started(t, workflows.WorkflowName))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := Files(ctx, []string{p}, opts(t))
	require.Len(t, res, 1)
	assert.ErrorIs(t, res[0].Err, context.Canceled)
}

func TestFileResultJSON(t *testing.T) {
	b, err := json.Marshal([]FileResult{{Path: "a.json", Events: 3}, {Path: "b.json", Err: errors.New("boom")}})
	require.NoError(t, err)
	assert.JSONEq(t, `[{"file":"a.json","events":3,"ok":true},{"file":"b.json","events":0,"ok":false,"error":"boom"}]`, string(b))
}

// fakeHistoryClient serves a fixed history through GetWorkflowHistory,
// the only call Export makes.
type fakeHistoryClient struct {
	client.Client
	events        []*historypb.HistoryEvent
	gotID, gotRun string
	gotFilter     enumspb.HistoryEventFilterType
	gotLongPoll   bool
}

func (f *fakeHistoryClient) GetWorkflowHistory(_ context.Context, id, run string, longPoll bool, filter enumspb.HistoryEventFilterType) client.HistoryEventIterator {
	f.gotID, f.gotRun, f.gotLongPoll, f.gotFilter = id, run, longPoll, filter
	return &sliceIter{events: f.events}
}

type sliceIter struct {
	events []*historypb.HistoryEvent
	err    error
}

func (s *sliceIter) HasNext() bool { return len(s.events) > 0 || s.err != nil }

func (s *sliceIter) Next() (*historypb.HistoryEvent, error) {
	if s.err != nil {
		return nil, s.err
	}
	e := s.events[0]
	s.events = s.events[1:]
	return e, nil
}

func TestExportWritesWhatHistoryFromJSONReadsAndReplays(t *testing.T) {
	events := started(t, workflows.WorkflowName)
	fc := &fakeHistoryClient{events: events}
	var b bytes.Buffer
	require.NoError(t, Export(context.Background(), fc, "wf-1", "", &b))
	assert.Equal(t, "wf-1", fc.gotID)
	assert.Equal(t, "", fc.gotRun)
	assert.False(t, fc.gotLongPoll)
	assert.Equal(t, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT, fc.gotFilter)

	// The CLI's shape: an indented {"events": [...]} document with the
	// temporalproto spellings (camelCase fields, enum names without
	// prefixes) and payloads left unshortened, ending in a newline.
	out := b.String()
	assert.True(t, strings.HasPrefix(out, "{\n  \"events\": [\n"), out[:40])
	assert.True(t, strings.HasSuffix(out, "}\n"))
	assert.Contains(t, out, `"eventType": "EVENT_TYPE_WORKFLOW_EXECUTION_STARTED"`)
	assert.Contains(t, out, `"metadata": {`)
	assert.Contains(t, out, `"encoding": "anNvbi9wbGFpbg=="`) // json/plain, base64

	h, err := client.HistoryFromJSON(bytes.NewReader(b.Bytes()), client.HistoryJSONOptions{})
	require.NoError(t, err)
	require.Len(t, h.Events, len(events))
	require.NoError(t, History(h, opts(t)))
}

func TestExportReportsIteratorErrors(t *testing.T) {
	fc := &errHistoryClient{}
	var b bytes.Buffer
	err := Export(context.Background(), fc, "wf-1", "", &b)
	assert.ErrorContains(t, err, "read history of wf-1")
	assert.ErrorIs(t, err, errNotFound)
	assert.Empty(t, b.String())
}

var errNotFound = errors.New("workflow not found")

type errHistoryClient struct{ client.Client }

func (errHistoryClient) GetWorkflowHistory(context.Context, string, string, bool, enumspb.HistoryEventFilterType) client.HistoryEventIterator {
	return &sliceIter{err: errNotFound}
}
