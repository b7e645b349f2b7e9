// Command devprovider runs oauthtest's authorization server (ory/fosite)
// on loopback so that connections can be tried from `make run` without a
// real provider. It writes the providers file for the worker's
// --oauth-providers and the client secret beside it. For trying things
// out only: it has one client and one resource owner, and keeps
// everything in memory.
//
//	go run ./cmd/devprovider -dir .tollgate/devprovider
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/tollgate-dev/tollgate/connections/oauth"
	"github.com/tollgate-dev/tollgate/connections/oauth/oauthtest"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9099", "where the provider listens")
	gw := flag.String("gateway", "http://127.0.0.1:8080", "the gateway's base URL (its callback is the redirect URI)")
	dir := flag.String("dir", ".tollgate/devprovider", "where providers.json and the client secret are written")
	id := flag.String("id", "github", "the provider id tools ask for")
	flag.Parse()

	srv, err := oauthtest.Start(oauthtest.Options{Addr: *addr, RedirectURIs: []string{*gw + oauth.CallbackPath}})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		log.Fatal(err)
	}
	secret := filepath.Join(*dir, "client.secret")
	if err := os.WriteFile(secret, []byte(srv.ClientSecret()+"\n"), 0o600); err != nil {
		log.Fatal(err)
	}
	abs, _ := filepath.Abs(secret)
	cfg := oauth.Config{RedirectBase: *gw, Providers: []oauth.ProviderConfig{{
		ID: *id, ClientID: srv.ClientID(), ClientSecretFile: abs,
		AuthURL: srv.AuthURL(), TokenURL: srv.TokenURL(), RevokeURL: srv.RevokeURL(), Scopes: []string{"repo"},
	}}}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	path := filepath.Join(*dir, "providers.json")
	if err := os.WriteFile(path, append(b, '\n'), 0o600); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("dev OAuth provider on %s\n  providers file: %s\n  its API: GET %s/repos/OWNER/REPO/issues with the token\n", srv.URL, path, srv.APIURL())
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt)
	<-stop
}
