package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/activities/mcp"
	"github.com/tollgate-dev/tollgate/connections"
	"github.com/tollgate-dev/tollgate/connections/oauth"
)

// Where the suite's authorization servers send the browser back. Nothing
// listens there: the person's browser is this command, which reads the
// code off the redirect as the gateway's callback would.
const (
	redirectURL = "http://localhost:3000/callback"
	// clientMetadataURL is the client ID metadata document the suite's
	// authorization servers expect (they do not fetch it).
	clientMetadataURL = "https://conformance-test.local/client-metadata.json"
	user              = "conformance-user"
)

// harness stands in for the rest of Tollgate around the MCP client: the
// connection store, the registry of discovered providers that the
// gateway shares, and the person who consents in a browser.
type harness struct {
	scenario  string
	logger    *slog.Logger
	store     *connections.MemoryStore
	registry  *oauth.MemoryRegistry
	providers *oauth.Providers
	// preRegistered is the client the suite registered for us, if the
	// scenario has one (MCP_CONFORMANCE_CONTEXT).
	preRegistered *mcp.ServerOAuth
}

func newHarness(_ context.Context, scenario, _ string, logger *slog.Logger) (*harness, error) {
	h := &harness{scenario: scenario, logger: logger, store: connections.NewMemoryStore(), registry: oauth.NewMemoryRegistry()}
	h.providers = (*oauth.Providers)(nil).WithRegistry(h.registry, nil)
	if raw := os.Getenv("MCP_CONFORMANCE_CONTEXT"); raw != "" {
		var ctx struct {
			ClientID      string `json:"client_id"`
			ClientSecret  string `json:"client_secret"`
			PrivateKeyPEM string `json:"private_key_pem"`
			// Cross-app access: the identity provider's ID token and
			// token endpoint.
			IdPIDToken       string `json:"idp_id_token"`
			IdPTokenEndpoint string `json:"idp_token_endpoint"`
			IdPClientID      string `json:"idp_client_id"`
		}
		if err := json.Unmarshal([]byte(raw), &ctx); err != nil {
			return nil, fmt.Errorf("MCP_CONFORMANCE_CONTEXT: %w", err)
		}
		// The suite registered a client for us: the operator's "oauth"
		// entry. The client-credentials scenarios are a worker's own
		// access (no person connects).
		if ctx.ClientID != "" {
			h.preRegistered = &mcp.ServerOAuth{ClientID: ctx.ClientID}
			if ctx.ClientSecret != "" {
				h.preRegistered.ClientSecret = &mcp.Secret{Value: ctx.ClientSecret}
			}
			if ctx.PrivateKeyPEM != "" {
				h.preRegistered.PrivateKey = &mcp.Secret{Value: ctx.PrivateKeyPEM}
			}
			if strings.HasPrefix(scenario, "auth/client-credentials") {
				h.preRegistered.Grant = "client_credentials"
			}
			if ctx.IdPIDToken != "" {
				// Cross-app access: the worker's own token, vouched for
				// by the identity provider.
				h.preRegistered.Grant = "identity_assertion"
				h.preRegistered.IdentityToken = &mcp.Secret{Value: ctx.IdPIDToken}
				h.preRegistered.IdPTokenURL = ctx.IdPTokenEndpoint
				h.preRegistered.IdPClientID = ctx.IdPClientID
			}
		}
	}
	return h, nil
}

func (h *harness) options(logger *slog.Logger) mcp.Options {
	return mcp.Options{
		Logger:        logger,
		Connections:   h.store,
		DiscoveryUser: user,
		OAuth: &mcp.OAuth{Registry: h.registry, Client: oauth.MCPClient{
			RedirectURL:       redirectURL,
			ClientName:        "Tollgate conformance",
			ClientMetadataURL: clientMetadataURL,
		}},
	}
}

func (h *harness) close() {}

// connect is the person's consent: the connect link's authorization URL
// is opened, the authorization server (which consents at once) redirects
// to the callback with a code, and the code is exchanged and stored as
// the gateway's callback does.
func (h *harness) connect(ctx context.Context, who, provider string) error {
	p, ok := h.providers.Get(provider)
	if !ok {
		return fmt.Errorf("no provider %s was discovered or configured", provider)
	}
	verifier := oauth.NewVerifier()
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	state := hex.EncodeToString(b)
	authURL := p.AuthCodeURL(state, verifier)
	h.logger.Info("consent", "provider", provider, "url", authURL)
	browser := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
	if err != nil {
		return err
	}
	resp, err := browser.Do(req)
	if err != nil {
		return fmt.Errorf("open the consent page: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || loc.Query().Get("code") == "" {
		return fmt.Errorf("the consent page answered %s without a redirect carrying a code", resp.Status)
	}
	if got := loc.Query().Get("state"); got != state {
		return errors.New("the redirect's state is not the one sent")
	}
	cred, err := p.Exchange(ctx, who, loc.Query().Get("code"), verifier)
	if err != nil {
		return err
	}
	return h.store.Put(ctx, cred)
}
