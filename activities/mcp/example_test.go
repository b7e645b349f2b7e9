package mcp_test

import (
	"context"
	"log"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/activities/mcp"
	"github.com/tollgate-dev/tollgate/connections"
	"github.com/tollgate-dev/tollgate/storage/datadir"
	"github.com/tollgate-dev/tollgate/tool"
)

// A worker of your own offers MCP tools through tollgate.Options.ToolSources,
// keeping waiting calls' answers in its data directory.
func ExampleOpen() {
	cfg, err := mcp.LoadConfig("mcp.json")
	if err != nil {
		log.Fatal(err)
	}
	const dataDir = ".tollgate"
	// HTTP servers' calls carry the user's connection from the same store
	// the plugin keeps connections in.
	conns, err := connections.NewFileStore(datadir.Connections(dataDir))
	if err != nil {
		log.Fatal(err)
	}
	ts, err := mcp.Open(context.Background(), cfg, mcp.Options{Connections: conns, StateDir: mcp.StateDir(dataDir)})
	if err != nil {
		log.Fatal(err)
	}
	defer ts.Close()
	// As a source, the worker's tools follow the servers' changes.
	plugin, err := tollgate.NewPlugin(tollgate.Options{DataDir: dataDir, Connections: conns, ToolSources: []tool.Source{ts}})
	if err != nil {
		log.Fatal(err)
	}
	_ = plugin // client.Dial(client.Options{Plugins: ...}), worker.New, as usual
}
