package main

import (
	"context"
	"log/slog"

	"github.com/tollgate-dev/tollgate/activities/connections"
	"github.com/tollgate-dev/tollgate/activities/mcp"
	"github.com/tollgate-dev/tollgate/activities/tool"
	"github.com/tollgate-dev/tollgate/storage/datadir"
)

// openMCP opens the MCP servers of --mcp and returns their tools, and
// what stops the servers when the worker does; nothing without --mcp.
func openMCP(ctx context.Context, f flags, cfg mcp.Config, logger *slog.Logger) ([]tool.Tool, func(), error) {
	if f.mcpConfig == "" {
		return nil, func() {}, nil
	}
	// The same store the plugin keeps users' connections in.
	conns, err := connections.NewFileStore(datadir.Connections(f.dataDir))
	if err != nil {
		return nil, nil, err
	}
	ts, err := mcp.Open(ctx, cfg, mcp.Options{Connections: conns, StateDir: mcp.StateDir(f.dataDir), Logger: logger})
	if err != nil {
		return nil, nil, err
	}
	for _, s := range ts.Skipped() {
		logger.Warn("MCP tool not offered", "server", s.Server, "tool", s.Tool, "reason", s.Reason)
	}
	tools := ts.Tools()
	logger.Info("MCP servers ready", "config", f.mcpConfig, "tools", len(tools))
	return tools, ts.Close, nil
}
