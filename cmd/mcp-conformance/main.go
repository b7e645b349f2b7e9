// Command mcp-conformance is Tollgate's MCP client as the protocol's
// conformance suite (@modelcontextprotocol/conformance, client mode)
// drives one: the suite starts a scenario's server and runs
//
//	mcp-conformance <server-url>
//
// with MCP_CONFORMANCE_SCENARIO naming the scenario. The command opens
// the server as a worker would (package activities/mcp: discovery
// session, tool list), then calls every tool it offers through the same
// tool.Tool interface a turn's activity uses, and plays the person: an
// interrupt (an elicitation) is answered and the call resumed, as the
// workflow would after the inbox's answer, and a connection_required
// outcome is connected through the connection flow's connect link. It
// exits non-zero when a call does not end in a success.
//
// `make test-mcp` runs every client scenario of the suite against it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/activities/mcp"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: mcp-conformance <server-url> (MCP_CONFORMANCE_SCENARIO names the scenario)")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := run(ctx, os.Args[len(os.Args)-1], os.Getenv("MCP_CONFORMANCE_SCENARIO"), os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "mcp-conformance:", err)
		os.Exit(1)
	}
}

// maxRounds bounds how often one call is resumed: a server that keeps
// asking is a failure, not a reason to loop.
const maxRounds = 10

func run(ctx context.Context, serverURL, scenario string, log io.Writer) error {
	logger := slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	logger.Info("conformance scenario", "scenario", scenario, "url", serverURL)
	h, err := newHarness(ctx, scenario, serverURL, logger)
	if err != nil {
		return err
	}
	defer h.close()
	cfg := mcp.Config{Servers: map[string]mcp.Server{"conformance": {URL: serverURL, OAuth: h.preRegistered}}}
	// A server that lists its tools only to an authorized client gets
	// the discovery user connected, as an operator would before starting
	// the worker again.
	var ts *mcp.Toolset
	for attempt := 0; ; attempt++ {
		ts, err = mcp.Open(ctx, cfg, h.options(logger))
		var need *mcp.ConnectionNeeded
		if !errors.As(err, &need) || attempt == 2 {
			break
		}
		if err := h.connect(ctx, need.User, need.Provider); err != nil {
			return fmt.Errorf("connect %s for the tool list: %w", need.Provider, err)
		}
	}
	if err != nil {
		return fmt.Errorf("open the server: %w", err)
	}
	defer ts.Close()
	for _, s := range ts.Skipped() {
		logger.Info("tool not offered", "tool", s.Tool, "reason", s.Reason)
	}
	var failed []error
	for _, t := range ts.Tools() {
		if err := h.call(ctx, t); err != nil {
			failed = append(failed, fmt.Errorf("%s: %w", t.Spec().Name, err))
		}
	}
	return errors.Join(failed...)
}

// call runs one tool to its end, answering what it asks.
func (h *harness) call(ctx context.Context, t tool.Tool) error {
	name := t.Spec().Name
	c := tool.Call{TurnID: "conformance-turn", CallID: name, Arguments: arguments(name), User: user}
	for round := 0; round < maxRounds; round++ {
		out, err := t.Run(ctx, c)
		if err != nil {
			return fmt.Errorf("run: %w", err)
		}
		b, _ := json.Marshal(out)
		h.logger.Info("outcome", "tool", name, "round", round, "outcome", string(b))
		switch out.Kind {
		case results.KindSuccess:
			return nil
		case results.KindInterrupt:
			r, err := answer(out.Interrupt)
			if err != nil {
				return err
			}
			c.Resume = r
		case results.KindConnectionRequired:
			if err := h.connect(ctx, c.User, out.Connection.Provider); err != nil {
				return fmt.Errorf("connect %s: %w", out.Connection.Provider, err)
			}
			c.Resume = &tool.Resume{Decision: results.DecisionConnected}
		default:
			return fmt.Errorf("the call ended %s", out.Kind)
		}
	}
	return fmt.Errorf("the call was still asking after %d rounds", maxRounds)
}

// arguments are what the suite's tools expect; a tool it does not name
// gets none.
func arguments(name string) json.RawMessage {
	switch strings.TrimPrefix(name, "conformance.") {
	case "add_numbers":
		return json.RawMessage(`{"a":2,"b":3}`)
	}
	return json.RawMessage(`{}`)
}

// answer is what a person who accepts everything would answer: the
// first option of a choice, an empty object to a form question (so the
// server's defaults apply), "yes" to an approval.
func answer(in *results.Interrupt) (*tool.Resume, error) {
	if in == nil {
		return nil, errors.New("an interrupt outcome without an interrupt")
	}
	switch in.Type {
	case results.InterruptChoice:
		if len(in.Options) == 0 {
			return nil, errors.New("a choice without options")
		}
		b, _ := json.Marshal(in.Options[0].ID)
		return &tool.Resume{Decision: results.DecisionAnswer, Answer: b}, nil
	case results.InterruptQuestion:
		return &tool.Resume{Decision: results.DecisionAnswer, Answer: formAnswer(in.Schema)}, nil
	case results.InterruptApproval:
		return &tool.Resume{Decision: results.DecisionApprove}, nil
	}
	return nil, fmt.Errorf("an interrupt of type %q", in.Type)
}

// formAnswer fills what a form requires and nothing else, so that the
// server's defaults apply to the rest: the first option of a field with
// fixed values, else a value of the field's type.
func formAnswer(schema json.RawMessage) json.RawMessage {
	var sc struct {
		Type       string   `json:"type"`
		Required   []string `json:"required"`
		Properties map[string]struct {
			Type string `json:"type"`
			Enum []any  `json:"enum"`
		} `json:"properties"`
		Enum []any `json:"enum"`
	}
	if json.Unmarshal(schema, &sc) != nil {
		return json.RawMessage(`{}`)
	}
	value := func(typ string, enum []any) any {
		switch {
		case len(enum) > 0:
			return enum[0]
		case typ == "number" || typ == "integer":
			return 1
		case typ == "boolean":
			return true
		}
		return "conformance"
	}
	if sc.Type != "object" {
		b, _ := json.Marshal(value(sc.Type, sc.Enum))
		return b
	}
	out := map[string]any{}
	for _, name := range sc.Required {
		f := sc.Properties[name]
		out[name] = value(f.Type, f.Enum)
	}
	b, _ := json.Marshal(out)
	return b
}
