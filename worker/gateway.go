package main

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"go.temporal.io/sdk/client"

	"github.com/tollgate-dev/tollgate/connections"
	"github.com/tollgate-dev/tollgate/connections/oauth"
	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/gateway/apikey"
	"github.com/tollgate-dev/tollgate/internal/atomicfile"
	"github.com/tollgate-dev/tollgate/internal/signedtoken"
	"github.com/tollgate-dev/tollgate/stream"
)

// devGateway is the HTTP gateway `worker --dev` serves beside the embedded
// server, so `make run` can be approved from curl, a link or the inbox.
// It listens on loopback only; anonymous requests act as the dev
// principal, and the dev key (kept in the data directory, so curl lines
// keep working across restarts) shows how real callers authenticate.
type devGateway struct {
	url string
	key string
	// people are the keys --dev-keys asked for, in its order.
	people []devKey
	srv    *http.Server
}

// devKey is a dev gateway key of a named person with groups, so the
// approvals a rule leaves to a group or a quorum can be tried from
// `make run`: each answers as its principal, with its groups.
type devKey struct {
	Principal string
	Groups    []string
	Key       string
}

// parseDevKeys reads --dev-keys: comma-separated NAME or NAME:GROUP+GROUP,
// e.g. "lena:leads,lars:leads,eve".
func parseDevKeys(s string) ([]devKey, error) {
	var out []devKey
	seen := map[string]bool{gateway.DevPrincipal: true}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, groups, _ := strings.Cut(item, ":")
		k := devKey{Principal: name}
		if groups != "" {
			k.Groups = strings.Split(groups, "+")
		}
		e := apikey.Entry{Principal: k.Principal, SHA256: apikey.Hash("x"), Scopes: apikey.Scopes, Groups: k.Groups}
		if err := e.Validate(); err != nil {
			return nil, fmt.Errorf("--dev-keys %q: %w", item, err)
		}
		// Case-folded: each name is a key file in the data directory.
		if seen[strings.ToLower(name)] {
			return nil, fmt.Errorf("--dev-keys names %s twice (or names the dev principal); give each person one entry with all their groups, as NAME:GROUP+GROUP", name)
		}
		seen[strings.ToLower(name)] = true
		out = append(out, k)
	}
	return out, nil
}

func startDevGateway(addr, dataDir string, c client.Client, taskQueue string, logger *slog.Logger, conns connections.Store, ps *oauth.Providers, events stream.Source, people ...devKey) (*devGateway, error) {
	if err := gateway.CheckLoopback(addr); err != nil {
		return nil, fmt.Errorf("the dev gateway serves anonymous requests, so it listens on loopback only: %w", err)
	}
	key, err := devSecret(filepath.Join(dataDir, "dev-gateway.key"), func() (string, error) {
		k, _, err := apikey.New(gateway.DevPrincipal, apikey.Scopes, nil)
		return k, err
	})
	if err != nil {
		return nil, err
	}
	entries := []apikey.Entry{{Principal: gateway.DevPrincipal, SHA256: apikey.Hash(key), Scopes: apikey.Scopes}}
	for i, p := range people {
		// Kept in the data directory like the dev key, so a person's key
		// survives a restart; the groups are the flag's, each start.
		if people[i].Key, err = devSecret(filepath.Join(dataDir, "dev-gateway."+p.Principal+".key"), func() (string, error) {
			k, _, err := apikey.New(p.Principal, apikey.Scopes, nil)
			return k, err
		}); err != nil {
			return nil, err
		}
		entries = append(entries, apikey.Entry{Principal: p.Principal, SHA256: apikey.Hash(people[i].Key), Scopes: apikey.Scopes, Groups: p.Groups})
	}
	keys, err := apikey.NewSet(entries...)
	if err != nil {
		return nil, fmt.Errorf("dev gateway key: %w", err)
	}
	signer, err := devLinkSigner(dataDir)
	if err != nil {
		return nil, err
	}
	handler, err := gateway.New(gateway.Options{
		Temporal: c, TaskQueue: taskQueue, Keys: keys, Links: signer, Dev: true, Addr: addr, Logger: logger, Connect: devConnect(conns, ps),
		Events: events,
	})
	if err != nil {
		return nil, fmt.Errorf("build the dev gateway: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("the dev gateway cannot listen on %s (--gateway-addr changes it, \"\" turns it off): %w", addr, err)
	}
	// The standalone gateway's server: the same timeouts, and the Host
	// check told the port.
	srv := handler.NewHTTPServer(ln)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("Dev gateway stopped", "error", err)
		}
	}()
	return &devGateway{url: "http://" + ln.Addr().String(), key: key, people: people, srv: srv}, nil
}

func (g *devGateway) Stop() { _ = g.srv.Close() }

// devLinkSigner signs links with a secret kept in the data directory,
// the one TOLLGATE_LINK_SECRET_FILE names when set, so links the worker's
// webhooks send are ones the dev gateway accepts.
func devLinkSigner(dataDir string) (*signedtoken.Signer, error) {
	path := os.Getenv("TOLLGATE_LINK_SECRET_FILE")
	if path == "" {
		path = filepath.Join(dataDir, "link.secret")
		if _, err := devSecret(path, func() (string, error) {
			b := make([]byte, 32)
			_, err := rand.Read(b)
			return base64.StdEncoding.EncodeToString(b), err
		}); err != nil {
			return nil, err
		}
	}
	secret, err := signedtoken.LoadSecret(path)
	if err != nil {
		return nil, fmt.Errorf("the dev gateway's link secret: %w", err)
	}
	return signedtoken.NewSigner(secret)
}

// devSecret returns the secret stored at path, making and storing one the
// first time.
func devSecret(path string, generate func() (string, error)) (string, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	s, err := generate()
	if err != nil {
		return "", err
	}
	if err := atomicfile.Write(path, []byte(s+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("store %s: %w", path, err)
	}
	return s, nil
}
