package model

import (
	"context"
	"fmt"
	"strings"
)

// WireNames wraps a provider whose API takes tool names of letters,
// digits, '_' and '-' only (OpenAI's and Anthropic's) for tools named
// with dots, such as MCP tools ("notes.append"). Each request gets its
// own mapping: dotted names go out with '_' instead, made unique against
// every other tool of the request, and the reply's calls come back under
// the names the turn knows.
func WireNames(p Provider) Provider { return WireNamed{Next: p} }

// WireNamed is a provider wrapped by WireNames.
type WireNamed struct{ Next Provider }

func (w WireNamed) Complete(ctx context.Context, req Request) (Response, error) {
	m := newNameMap(req.Tools)
	if m == nil {
		return w.Next.Complete(ctx, req)
	}
	req.Tools = append([]ToolDef(nil), req.Tools...)
	for i := range req.Tools {
		req.Tools[i].Name = m.toWire[req.Tools[i].Name]
	}
	req.Messages = append(req.Messages[:0:0], req.Messages...)
	for i, msg := range req.Messages {
		if len(msg.ToolCalls) == 0 {
			continue
		}
		msg.ToolCalls = append(msg.ToolCalls[:0:0], msg.ToolCalls...)
		for j, c := range msg.ToolCalls {
			if wire, ok := m.toWire[c.Name]; ok {
				msg.ToolCalls[j].Name = wire
			}
		}
		req.Messages[i] = msg
	}
	resp, err := w.Next.Complete(ctx, req)
	if err != nil {
		return resp, err
	}
	calls := append(resp.Message.ToolCalls[:0:0], resp.Message.ToolCalls...)
	for i, c := range calls {
		if name, ok := m.fromWire[c.Name]; ok {
			calls[i].Name = name
		}
	}
	resp.Message.ToolCalls = calls
	return resp, nil
}

type nameMap struct{ toWire, fromWire map[string]string }

// newNameMap maps every tool's name to its wire name; nil when no name
// needs changing.
func newNameMap(defs []ToolDef) *nameMap {
	taken := map[string]bool{}
	dotted := false
	for _, d := range defs {
		taken[d.Name] = true
		dotted = dotted || strings.Contains(d.Name, ".")
	}
	if !dotted {
		return nil
	}
	m := &nameMap{toWire: map[string]string{}, fromWire: map[string]string{}}
	for _, d := range defs {
		wire := d.Name
		if strings.Contains(wire, ".") {
			base := strings.ReplaceAll(wire, ".", "_")
			wire = base
			for n := 2; taken[wire]; n++ {
				wire = fmt.Sprintf("%s_%d", base, n)
			}
			taken[wire] = true
		}
		m.toWire[d.Name], m.fromWire[wire] = wire, d.Name
	}
	return m
}
