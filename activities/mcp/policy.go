package mcp

import (
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate-dev/tollgate/tool"
)

// Policy is what Tollgate does with one MCP tool: whether a person
// approves each call first, whether a lost or failed run is retried, and
// whether calls may run beside others of the same step.
type Policy struct {
	Approval   tool.Approval
	Idempotent bool
	Concurrent bool
}

// PolicyFor derives a tool's policy from its annotations, then applies
// the operator's override, which always wins.
//
//	annotations                               approval  retried  concurrent
//	readOnlyHint: true                        never     yes      yes
//	idempotentHint: true (not read-only)      always    yes      no
//	destructiveHint: false (not read-only)    always    no*      no
//	destructive, or no annotations at all     always    no*      no
//	(* yes when idempotentHint is true)
//
// Only a read-only tool runs without a person: a tool that changes
// anything, even additively, is approved first unless the operator says
// otherwise. Annotations come from the server and are only hints; an
// operator who does not trust a server's hints sets "*": {"approval":
// "always"} for it. The turn's policy may still raise approval, never
// lower it.
func PolicyFor(a *mcpsdk.ToolAnnotations, o Override) Policy {
	p := Policy{Approval: tool.ApprovalAlways}
	if a != nil {
		if a.ReadOnlyHint {
			// Nothing changes, so a repeat costs nothing and order does
			// not matter.
			p = Policy{Approval: tool.ApprovalNever, Idempotent: true, Concurrent: true}
		} else {
			p.Idempotent = a.IdempotentHint
		}
	}
	if o.Approval != "" {
		p.Approval = o.Approval
	}
	if o.Idempotent != nil {
		p.Idempotent = *o.Idempotent
	}
	return p
}
