package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/storage/blobstore"
	"github.com/tollgate-dev/tollgate/storage/datadir"
	"github.com/tollgate-dev/tollgate/storage/payloadstore"
)

// cmdRaw prints a call's whole output: the card carries it inline when
// small, or a reference into the worker's output store when large.
func (c *cli) cmdRaw(ctx context.Context, args []string) error {
	fs := c.flagSet("raw")
	var run string
	fs.StringVar(&run, "run", "", "run `id` (default the latest run)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := positional(pos, 2, 2, "ID CALL"); err != nil {
		return err
	}
	t, err := c.dial(ctx, c.g)
	if err != nil {
		return err
	}
	defer t.Close()
	id, callID := pos[0], pos[1]
	s, err := t.State(ctx, id, run)
	if err != nil {
		return err
	}
	var card *results.Card
	for i := range s.Cards {
		if s.Cards[i].CallID == callID {
			card = &s.Cards[i]
		}
	}
	if card == nil {
		return fmt.Errorf("turn %s has no call %q", id, callID)
	}
	if card.Output == nil {
		return fmt.Errorf("call %s has no output: it is %s", callID, card.State)
	}
	raw, err := c.rawOutput(*card.Output)
	if err != nil {
		return fmt.Errorf("call %s: %w", callID, err)
	}
	_, err = fmt.Fprint(c.stdout, raw)
	return err
}

// rawOutput is the whole output a success holds: stored, inline, or (when
// nothing was cut) the text the model saw.
func (c *cli) rawOutput(out results.Success) (string, error) {
	switch {
	case out.RawRef != "" && blobstore.URLFromEnv(c.getenv) != "":
		blobs, err := blobstore.Open(context.Background(), blobstore.Options{URL: blobstore.URLFromEnv(c.getenv)})
		if err != nil {
			return "", err
		}
		defer blobs.Close()
		return payloadstore.NewDriver(blobs).GetRawContext(context.Background(), out.RawRef)
	case out.RawRef != "":
		dir := datadir.Payloads(c.g.dataDir)
		// Opening the store would create it; a reader must not.
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("its output is stored as %s, and there is no output store at %s (use the worker's data directory: --data or TOLLGATE_DATA)", out.RawRef, dir)
		}
		store, err := payloadstore.New(dir)
		if err != nil {
			return "", err
		}
		return store.GetRaw(out.RawRef)
	case out.Raw != "":
		return out.Raw, nil
	}
	var text string
	for _, p := range out.Parts {
		if p.Type == results.PartText {
			text += p.Text
		}
	}
	return text, nil
}
