// Command worker serves the triage team: Tollgate's AgentTurn and
// AgentSession with the team's tools and the agents of agents.yaml (or
// the file TOLLGATE_AGENTS names), on the triage task queue. The
// Temporal address comes from TEMPORAL_ADDRESS (or a temporal.toml
// profile), the model keys from the providers' variables.
package main

import (
	"log"
	"os"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	"go.temporal.io/sdk/worker"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/agents"
	"github.com/tollgate-dev/tollgate/examples/triage"
	"github.com/tollgate-dev/tollgate/model/providers"
)

func main() {
	file := os.Getenv(agents.Env)
	if file == "" {
		file = "agents.yaml"
	}
	team, err := agents.Load(file)
	check(err)
	models, err := providers.LoadConfigFromEnv()
	check(err)
	plugin, err := tollgate.NewPlugin(tollgate.Options{
		Tools:      triage.Tools(triage.NewShop()),
		NoBuiltins: true,
		Models:     models,
		Agents:     team,
	})
	check(err)
	opts := envconfig.MustLoadDefaultClientOptions()
	opts.Plugins = []client.Plugin{plugin}
	c, err := client.Dial(opts)
	check(err)
	defer c.Close()
	w := worker.New(c, triage.TaskQueue, worker.Options{})
	check(w.Run(worker.InterruptCh()))
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
