package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/tollgate-dev/tollgate/connections"
	"github.com/tollgate-dev/tollgate/results"
)

// harness is what stands in for the rest of Tollgate around the MCP
// client: the connection store, and the person who connects accounts.
type harness struct {
	scenario string
	logger   *slog.Logger
	store    *connections.MemoryStore
}

func newHarness(_ context.Context, scenario, _ string, logger *slog.Logger) (*harness, error) {
	return &harness{scenario: scenario, logger: logger, store: connections.NewMemoryStore()}, nil
}

func (h *harness) connections() connections.Store { return h.store }

func (h *harness) httpClient() *http.Client { return nil }

func (h *harness) close() {}

func (h *harness) connect(_ context.Context, _ string, c *results.ConnectionRequired) error {
	return errors.New("the MCP client has no authorization flow for " + c.Provider)
}
