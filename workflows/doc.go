// Package workflows holds the AgentTurn workflow and its wire contract:
// the names other systems use to start and talk to a turn (contract.go),
// the input, respond payload and result types, the approval policy
// (policy.go) and the validation of responses (respond.go).
//
// testdata/histories/ holds the replay corpus: histories recorded from
// real runs that every change to this package must still replay.
//
// # Local tools
//
// A tool whose spec sets Local and Idempotent (tool.Spec.RunsLocally; the
// built-in read_file and list_dir do) runs as a Temporal local activity,
// RunLocalTool, which is RunTool itself: the same schema validation,
// limits, typed outcome, output store and retry policy (five attempts
// with backoff). It runs in the worker that handles the model's reply, in
// the same workflow task, so a call costs no activity task round trip
// through the server. Everything before the run is unchanged: a call
// that needs approval parks first and runs locally once approved; a
// non-concurrent call still waits its turn.
//
// History: a local run leaves one marker event (MarkerRecorded, named
// LocalActivity) carrying its input and outcome, instead of the
// ActivityTaskScheduled, Started and Completed events of an activity. A
// local run whose retries outlast the workflow task keeps the task alive
// with heartbeats, as the SDK does for every local activity.
//
// Replay: the marker's outcome is used as recorded; the tool does not run
// again. Turns started before this behaviour (hardening version below
// fastToolsVersion) replay their tool calls as activities, as they ran.
//
// Crash: if the worker dies while a local tool runs, no marker was
// written and the workflow task is not completed. After the workflow task
// timeout (10s by default) the server gives the task to another worker,
// which replays the turn to that point and runs the tool again. A call is
// therefore never lost, and may run twice; that is why only idempotent
// tools run locally, whatever a tool's Local flag says. A tool that is
// not idempotent always runs as an activity with one attempt, whose lost
// worker the turn reports as "outcome unknown".
//
// Local tools should be short: a local activity holds its workflow task,
// so a long one delays answers to queries and updates of that turn.
//
// # Workspace affinity
//
// Calls of workspace tools (tool.Spec.Workspace: read_file, write_file,
// edit_file, list_dir, shell) must run where the turn's workspace is.
// Where each worker has its own disk, a worker pins its workspace
// (tollgate.Plugin.PinWorkspace; the worker binary does unless
// --shared-workspace): it polls a task queue of its own,
// <task queue>/ws/<worker id>, with a second Temporal worker that runs
// only RunTool and PreviewTool, and sets Features.WorkspaceQueue to that
// queue. The turn records its features in a SideEffect at its start, so
// the turn is pinned to the worker that ran its first workflow task, and
// replays with the same pin wherever it is replayed.
//
// Workspace tools' RunTool and PreviewTool activities then carry that
// task queue and a ScheduleToStart timeout (policy.workspace_timeout,
// default 1m). Model calls, MCP and HTTP tools and every other activity
// run on the turn's own queue, on any worker. A pinned worker that
// restarts under the same --worker-id takes its pinned calls again.
//
// A pinned worker gone for good: a call not taken within the timeout
// (Temporal does not retry a ScheduleToStart timeout) fails with the
// tool error "the workspace's worker is unavailable...", which names no
// worker or host; the model decides what to do. The turn then re-pins to
// the worker running the current workflow task, read through another
// SideEffect (recorded, so replay agrees), and resets its working
// directory; later calls run there, on a workspace that may lack what
// earlier calls wrote, and the error tells the model so. A turn waiting
// for a person is not affected until it runs a workspace call.
//
// Local tools and the pin: a local activity runs wherever the workflow
// task runs, which after sticky-cache loss or a worker restart may be a
// worker other than the pinned one. RunLocalTool therefore carries the
// pinned queue and runs the tool only on the worker that polls it;
// elsewhere it fails at once with ErrTypeWorkspaceElsewhere, and the turn
// sends the same call to the pinned queue as an ordinary activity. The
// check is made in the activity and recorded in its marker, so replay
// takes the same branch. Turns of an unpinned worker (shared workspace)
// run local tools on whichever worker runs the task.
//
// Each AgentTurn pins on its own first workflow task: the turns of one
// session may be pinned to different workers unless the workspace is
// shared.
package workflows
