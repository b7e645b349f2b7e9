package replay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"go.temporal.io/sdk/client"

	"github.com/tollgate-dev/tollgate/replay"
)

// Replay a folder of recorded histories (a replay corpus) against the
// workflow code in this build. One bad file does not stop the others.
func ExampleFiles() {
	corpus := filepath.Join("..", "workflows", "testdata", "histories")
	results := replay.Files(context.Background(), []string{
		filepath.Join(corpus, "approval_approved.json"),
		filepath.Join(corpus, "choice_answered.json"),
	}, replay.Options{})
	for _, r := range results {
		fmt.Println(filepath.Base(r.Path), r.OK())
	}
	// Output:
	// approval_approved.json true
	// choice_answered.json true
}

// A file that is not a history fails on its own line, with the reason;
// scripts read the same result as JSON.
func ExampleFile() {
	dir, err := os.MkdirTemp("", "replay-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "notes.json")
	if err := os.WriteFile(path, []byte(`{"not": "a history"}`), 0o644); err != nil {
		log.Fatal(err)
	}
	r := replay.File(path, replay.Options{})
	fmt.Println(r.OK(), r.Events)
	b, _ := json.Marshal(r)
	var out struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	}
	_ = json.Unmarshal(b, &out)
	fmt.Println(out.OK, out.Error != "")
	// Output:
	// false 0
	// false true
}

// Export a turn's history from a server as `temporal workflow show
// --output json` writes it, for the replay corpus.
func ExampleExport() {
	c, err := client.Dial(client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	f, err := os.Create("testdata/histories/refund_approved.json")
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	// An empty run id means the latest run.
	if err := replay.Export(context.Background(), c, "refund-1001", "", f); err != nil {
		log.Fatal(err)
	}
}
