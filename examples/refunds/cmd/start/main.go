// Command start starts one refunds turn and sees it through from the
// terminal: it asks the support person about every call that waits for
// them (approve a refund, paste a shop token), answers through
// tollgate.Client, and prints the turn's result. Run it beside
// cmd/worker, in the same directory, so both use .tollgate:
//
//	go run ./cmd/start -user ann -model openai:gpt-4o-mini "Order 1001 arrived broken; please refund it."
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/connections"
	"github.com/tollgate-dev/tollgate/examples/refunds"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/storage/datadir"
	"github.com/tollgate-dev/tollgate/workflows"
)

func main() {
	user := flag.String("user", "ann", "the support person the turn runs for")
	model := flag.String("model", "openai:gpt-4o-mini", "the model, as provider:name")
	flag.Parse()
	ctx := context.Background()

	// The worker's connection store: a token pasted here is the one
	// lookup_order reads when the turn runs it again.
	conns, err := connections.NewFileStore(datadir.Connections(datadir.Default))
	check(err)
	// The plugin on this client too: it reads the payloads the worker
	// keeps out of history (large tool outputs, long conversations).
	plugin, err := tollgate.NewClientPlugin(datadir.Default)
	check(err)
	opts := envconfig.MustLoadDefaultClientOptions()
	opts.Plugins = []client.Plugin{plugin}
	c, err := client.Dial(opts)
	check(err)
	defer c.Close()

	tg := tollgate.Client{Temporal: c, TaskQueue: refunds.TaskQueue}
	id := fmt.Sprintf("refund-%s-%d", *user, time.Now().Unix())
	in := refunds.NewInput(*user, strings.Join(flag.Args(), " "))
	in.Model = *model
	_, err = tg.Start(ctx, id, in)
	check(err)
	fmt.Println("started turn", id)

	stdin := bufio.NewScanner(os.Stdin)
	for {
		s, err := tg.State(ctx, id)
		check(err)
		if s.Status != workflows.StatusRunning && s.Status != workflows.StatusWaiting {
			break
		}
		for _, card := range s.Cards {
			if card.State.Waiting() {
				check(answer(ctx, tg, id, *user, card, stdin, conns))
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	res, err := tg.Result(ctx, id)
	check(err)
	fmt.Printf("%s: %s\n", res.Status, res.Text)
}

// answer asks the person about one waiting call and sends their response.
func answer(ctx context.Context, tg tollgate.Client, id, user string, card results.Card, stdin *bufio.Scanner, conns connections.Store) error {
	r := workflows.Response{CallID: card.CallID, By: user}
	switch card.State {
	case results.StatePendingApproval:
		fmt.Printf("%s %s\napprove? [y/N] ", card.Tool, card.Arguments)
		r.Decision, r.Reason = results.DecisionDeny, "not approved by "+user
		if stdin.Scan() && strings.EqualFold(strings.TrimSpace(stdin.Text()), "y") {
			r.Decision, r.Reason = results.DecisionApprove, ""
		}
	case results.StateWaitingConnection:
		fmt.Printf("%s\n%s token (one line): ", card.Connection.Hint, card.Connection.Provider)
		token := ""
		if stdin.Scan() {
			token = strings.TrimSpace(stdin.Text())
		}
		if token == "" {
			r.Decision, r.Reason = results.DecisionCancel, user+" did not connect"
			break
		}
		if err := conns.Put(ctx, connections.Credential{Provider: card.Connection.Provider, User: user, Token: token}); err != nil {
			return err
		}
		r.Decision = results.DecisionConnected
	default:
		return nil // this agent's tools ask no questions
	}
	got, err := tg.Respond(ctx, id, r)
	var rejected *tollgate.RejectedError
	if errors.As(err, &rejected) {
		// The wait ended meanwhile (it timed out, or someone else
		// answered): nothing changed, carry on.
		fmt.Println("not taken:", rejected.Reason)
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Printf("%s: %s\n", got.Tool, got.State)
	return nil
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
