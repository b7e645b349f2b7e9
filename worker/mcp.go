package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/tollgate-dev/tollgate/activities/mcp"
	"github.com/tollgate-dev/tollgate/connections"
	"github.com/tollgate-dev/tollgate/tool"
)

// openMCP opens the MCP servers of --mcp and returns their tools, a
// source that follows their changes, and what stops the servers when the
// worker does; nothing without --mcp.
// conns is the worker's own store (sealed, refreshing), so MCP servers
// read the same connections the built-in tools do.
// auth, when set, runs MCP's authorization flow for servers that answer
// 401 (see mcpOAuth).
func openMCP(ctx context.Context, f flags, cfg mcp.Config, conns connections.Store, auth *mcp.OAuth, logger *slog.Logger) ([]tool.Source, func(), error) {
	if f.mcpConfig == "" {
		return nil, func() {}, nil
	}
	ts, err := mcp.Open(ctx, cfg, mcp.Options{
		Connections: conns, StateDir: mcp.StateDir(f.dataDir), Logger: logger, OAuth: auth,
		// Servers that say when their tools change are heard at once;
		// this catches the others.
		RefreshInterval: mcpRefreshInterval,
	})
	if err != nil {
		return nil, nil, err
	}
	for _, s := range ts.Skipped() {
		logger.Warn("MCP tool not offered", "server", s.Server, "tool", s.Tool, "reason", s.Reason)
	}
	logger.Info("MCP servers ready", "config", f.mcpConfig, "tools", len(ts.Tools()))
	return []tool.Source{ts}, ts.Close, nil
}

// mcpRefreshInterval is how often the worker lists every MCP server's
// tools again.
const mcpRefreshInterval = 5 * time.Minute
