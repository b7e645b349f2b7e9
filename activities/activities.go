package activities

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"go.temporal.io/sdk/temporal"

	conns "github.com/tollgate-dev/tollgate/connections"
	"github.com/tollgate-dev/tollgate/grants"
	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/model/pricing"
	"github.com/tollgate-dev/tollgate/storage/transcript"
	"github.com/tollgate-dev/tollgate/stream"
	"github.com/tollgate-dev/tollgate/tool"
)

// Activity type names, as registered by RegisterActivity on *Activities.
const (
	RunToolName       = "RunTool"
	CallModelName     = "CallModel"
	DescribeToolsName = "DescribeTools"
	CompactName       = "Compact"
)

// Application error types the workflow branches on.
const (
	// ErrTypeUnknownTool: a turn asked for a tool this worker does not have.
	ErrTypeUnknownTool = "UnknownTool"
	// ErrTypeTranscriptMissing: the stored conversation could not be found;
	// the workflow resends the whole conversation.
	ErrTypeTranscriptMissing = "TranscriptMissing"
	// ErrTypeToolsMissing: the stored tool definitions a model call was
	// pointed at could not be found; the workflow sends them again.
	ErrTypeToolsMissing = "ToolsMissing"
	// ErrTypeModelRejected: the provider refused the request (bad request,
	// authentication, unknown model); retrying will not help.
	ErrTypeModelRejected = "ModelRejected"
	// ErrTypeModelUnavailable: a transient provider failure.
	ErrTypeModelUnavailable = "ModelUnavailable"
	// ErrTypeModelContextLength: the conversation does not fit the model's
	// context window. Not retried as it is; a shorter conversation may pass.
	ErrTypeModelContextLength = "ModelContextLength"
)

// ModelResolver finds the provider for a "provider:name" model string.
type ModelResolver interface {
	Resolve(model string) (model.Provider, string, error)
}

// Activities holds what the activities need. Register it with
// worker.RegisterActivity; the method names are the activity types.
type Activities struct {
	Tools       *tool.Registry
	Models      ModelResolver
	Transcripts *transcript.Store
	// Workspace is the directory file and shell tools are confined to.
	Workspace string
	// Outputs keeps whole tool outputs over MaxInlineRaw, so the result in
	// history and the call's card carry a reference instead. Nil keeps them
	// inline, and cards then drop them.
	Outputs OutputStore
	// Prices prices each model call's usage; nil, or a model without a
	// price, leaves CallModelResult.Cost unset (unknown, not zero).
	Prices *pricing.Table
	// Events receives the live events of model calls and tool runs (text
	// as it streams, tool progress). Nil streams nothing.
	Events stream.Publisher
	// Connections are the users' account connections; a remembered
	// grant records the one its tool acts through (grants.go). Nil: no
	// tool's grant depends on a connection.
	Connections conns.Store
	// Grants keeps remembered grants; nil keeps them in each user's
	// grants workflow, through the activity's Temporal client.
	Grants grants.Store
}

// MaxInlineRaw bounds the raw output a tool result and a call's card carry
// inline. Cards travel in every query answer and in the turn's result.
const MaxInlineRaw = 64 << 10

// OutputStore keeps a tool's whole output and names it by a reference a
// person can later read it back with (starter raw).
type OutputStore interface {
	PutRaw(ctx context.Context, raw string) (ref string, err error)
}

// DescribeTools returns the specs of the named tools, in the order asked.
// The workflow records them so that approval defaults, retries and
// timeouts stay fixed for the whole turn even if the worker changes.
func (a *Activities) DescribeTools(_ context.Context, names []string) ([]tool.Spec, error) {
	specs := make([]tool.Spec, 0, len(names))
	var unknown []string
	for _, n := range names {
		t, ok := a.Tools.Get(n)
		if !ok {
			unknown = append(unknown, n)
			continue
		}
		// Describe also says whether the tool previews, so the workflow
		// knows whether to ask PreviewTool when a call waits for approval.
		specs = append(specs, tool.Describe(t))
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("unknown tool(s) %s; this worker offers: %s", strings.Join(unknown, ", "), strings.Join(a.Tools.Names(), ", ")),
			ErrTypeUnknownTool, nil)
	}
	return specs, nil
}
