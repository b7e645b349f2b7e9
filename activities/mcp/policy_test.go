package mcp

import (
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/tool"
)

func TestPolicyForAnnotationsAndOverrides(t *testing.T) {
	yes, no := true, false
	for _, tt := range []struct {
		name string
		a    *mcpsdk.ToolAnnotations
		o    Override
		want Policy
	}{
		{"no annotations", nil, Override{}, Policy{Approval: tool.ApprovalAlways}},
		{"read-only", &mcpsdk.ToolAnnotations{ReadOnlyHint: true}, Override{}, Policy{Approval: tool.ApprovalNever, Idempotent: true, Concurrent: true}},
		{"read-only wins over destructive", &mcpsdk.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: &yes}, Override{}, Policy{Approval: tool.ApprovalNever, Idempotent: true, Concurrent: true}},
		{"destructive", &mcpsdk.ToolAnnotations{DestructiveHint: &yes}, Override{}, Policy{Approval: tool.ApprovalAlways}},
		{"destructive unset", &mcpsdk.ToolAnnotations{}, Override{}, Policy{Approval: tool.ApprovalAlways}},
		{"additive still approved", &mcpsdk.ToolAnnotations{DestructiveHint: &no}, Override{}, Policy{Approval: tool.ApprovalAlways}},
		{"idempotent retried", &mcpsdk.ToolAnnotations{IdempotentHint: true}, Override{}, Policy{Approval: tool.ApprovalAlways, Idempotent: true}},
		{"operator waives approval", &mcpsdk.ToolAnnotations{DestructiveHint: &yes}, Override{Approval: tool.ApprovalNever}, Policy{Approval: tool.ApprovalNever}},
		{"operator distrusts read-only", &mcpsdk.ToolAnnotations{ReadOnlyHint: true}, Override{Approval: tool.ApprovalAlways, Idempotent: &no}, Policy{Approval: tool.ApprovalAlways, Concurrent: true}},
		{"operator declares idempotent", nil, Override{Idempotent: &yes}, Policy{Approval: tool.ApprovalAlways, Idempotent: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, PolicyFor(tt.a, tt.o))
		})
	}
}
