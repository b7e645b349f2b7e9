// Package agents reads an agents file: the named agents a worker offers
// (see docs/agents.md), in YAML or JSON.
//
//	agents:
//	  - name: billing
//	    instructions: You handle refunds.
//	    model: openai:gpt-4.1
//	    tools: [refund, "agent:researcher"]
//	    handoffs: [triage]
package agents

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"gopkg.in/yaml.v3"

	"github.com/tollgate-dev/tollgate/workflows"
)

// Env names the agents file when the worker's --agents flag does not.
const Env = "TOLLGATE_AGENTS"

// File is an agents file's content.
type File struct {
	Agents []workflows.Agent `json:"agents"`
}

// Load reads and checks the agents file at path.
func Load(path string) ([]workflows.Agent, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("agents file: %w", err)
	}
	return Parse(b)
}

// Parse reads an agents file (YAML, of which JSON is a part) and checks
// it on its own: every field known, every name valid, every agent:<name>
// tool and handoff naming an agent of the file. Whether the plain tools
// exist is the worker's to check (tollgate.NewPlugin). Errors start with
// "agents file:" and name the agent and the field.
func Parse(data []byte) ([]workflows.Agent, error) {
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("agents file: not YAML or JSON: %w", err)
	}
	if doc == nil {
		return nil, fmt.Errorf("agents file: empty; it needs an agents list")
	}
	// Through JSON, so the fields read as the turn input's do (durations
	// such as "24h", approvals) and an unknown field is an error.
	j, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("agents file: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	var f File
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("agents file: %w", err)
	}
	if len(f.Agents) == 0 {
		return nil, fmt.Errorf("agents file: the agents list is empty")
	}
	if err := workflows.ValidateAgents(f.Agents, nil); err != nil {
		return nil, fmt.Errorf("agents file: %w", err)
	}
	return f.Agents, nil
}
