// Command worker serves the refunds agent: Tollgate's AgentTurn with the
// agent's own tools, on the refunds task queue. The Temporal address
// comes from TEMPORAL_ADDRESS (or a temporal.toml profile), the model
// keys from OPENAI_API_KEY, ANTHROPIC_API_KEY or OLLAMA_HOST.
package main

import (
	"log"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	"go.temporal.io/sdk/worker"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/connections"
	"github.com/tollgate-dev/tollgate/examples/refunds"
	"github.com/tollgate-dev/tollgate/model/providers"
	"github.com/tollgate-dev/tollgate/storage/datadir"
)

func main() {
	// People's shop tokens, shared by the plugin and lookup_order.
	conns, err := connections.NewFileStore(datadir.Connections(datadir.Default))
	check(err)
	models, err := providers.LoadConfigFromEnv()
	check(err)
	plugin, err := tollgate.NewPlugin(tollgate.Options{
		Tools:       refunds.Tools(refunds.NewDemoShop(), conns),
		NoBuiltins:  true, // a support agent needs no shell or file tools
		Connections: conns,
		Models:      models,
	})
	check(err)
	opts := envconfig.MustLoadDefaultClientOptions()
	opts.Plugins = []client.Plugin{plugin}
	c, err := client.Dial(opts)
	check(err)
	defer c.Close()
	w := worker.New(c, refunds.TaskQueue, worker.Options{})
	check(w.Run(worker.InterruptCh()))
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
