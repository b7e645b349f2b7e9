// Package codecserver serves a payload codec over HTTP the way the
// Temporal Web UI and CLI (`temporal --codec-endpoint`) call one:
// POST <endpoint>/encode and POST <endpoint>/decode with a JSON body
// {"payloads": [...]}, answered in the same shape. Browsers reach it
// across origins, so it answers CORS preflights for the UI's origin; every
// other origin is refused. Callers authenticate with a bearer token.
package codecserver

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"
)

// DefaultMaxBody is the request body limit unless Options set one. The UI
// decodes one event's payloads a request; history payloads are far
// smaller (large ones sit in the payload store as claims).
const DefaultMaxBody = 8 << 20

// Headers a browser may send; the UI sends X-Namespace with every call
// and Authorization when it passes a token.
const allowHeaders = "Authorization, Content-Type, X-Namespace"

// Options configure a Handler.
type Options struct {
	// Codec encodes and decodes; usually a *codec.Keyring.
	Codec converter.PayloadCodec
	// Tokens are the bearer tokens a caller may present
	// (`Authorization: Bearer <token>`).
	Tokens []string
	// Unauthenticated accepts requests that carry no Authorization
	// header. Only for a development server on a loopback address, where
	// the UI runs without a login to pass a token from: the origin check
	// still keeps other web pages out.
	Unauthenticated bool
	// UIOrigins are the origins (scheme://host[:port], no path) of the
	// Web UIs allowed to call from a browser. Requests without an Origin
	// header (the CLI, curl) are not browsers and are not checked.
	UIOrigins []string
	// Namespaces, when set, are the only values of X-Namespace accepted,
	// and a request without the header is refused.
	Namespaces []string
	// MaxBody limits the request body; 0 means DefaultMaxBody.
	MaxBody int64
	// Logger records refused requests at debug level; nil discards.
	Logger *slog.Logger
}

// Handler is the codec server.
type Handler struct {
	opts   Options
	tokens [][sha256.Size]byte
}

// New checks the options and builds a Handler.
func New(opts Options) (*Handler, error) {
	if opts.Codec == nil {
		return nil, errors.New("codecserver: no codec")
	}
	if len(opts.Tokens) == 0 && !opts.Unauthenticated {
		return nil, errors.New("codecserver: no bearer tokens; give a token file, or run unauthenticated only on loopback for development")
	}
	for _, o := range opts.UIOrigins {
		if o == "*" {
			return nil, errors.New("codecserver: UI origin \"*\" would let any web page decode payloads; name the UI's origin")
		}
		if strings.HasSuffix(o, "/") {
			return nil, fmt.Errorf("codecserver: UI origin %q ends with '/'; a browser sends an origin without one", o)
		}
	}
	if opts.MaxBody <= 0 {
		opts.MaxBody = DefaultMaxBody
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	h := &Handler{opts: opts}
	for _, t := range opts.Tokens {
		if t == "" {
			return nil, errors.New("codecserver: an empty bearer token")
		}
		// Comparing fixed-size digests keeps the comparison constant-time
		// whatever the lengths.
		h.tokens = append(h.tokens, sha256.Sum256([]byte(t)))
	}
	return h, nil
}

// LoadTokens reads a token file: one token a line; blank lines and lines
// starting with '#' are ignored.
func LoadTokens(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("codecserver: read the token file: %w", err)
	}
	var tokens []string
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") {
			tokens = append(tokens, line)
		}
	}
	if len(tokens) == 0 {
		return nil, fmt.Errorf("codecserver: the token file %s holds no tokens", path)
	}
	return tokens, nil
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	origin := r.Header.Get("Origin")
	if origin != "" {
		if !slices.Contains(h.opts.UIOrigins, origin) {
			h.refuse(w, r, http.StatusForbidden, "origin not allowed")
			return
		}
		w.Header().Set("Access-Control-Allow-Origin", origin)
		w.Header().Set("Access-Control-Allow-Credentials", "true")
		w.Header().Add("Vary", "Origin")
	}
	encode := strings.HasSuffix(r.URL.Path, "/encode")
	if !encode && !strings.HasSuffix(r.URL.Path, "/decode") {
		http.NotFound(w, r)
		return
	}
	if r.Method == http.MethodOptions {
		// A preflight carries no credentials; it only asks what the real
		// request may send.
		w.Header().Set("Access-Control-Allow-Methods", "POST, OPTIONS")
		w.Header().Set("Access-Control-Allow-Headers", allowHeaders)
		w.Header().Set("Access-Control-Max-Age", "600")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST, OPTIONS")
		h.refuse(w, r, http.StatusMethodNotAllowed, "use POST")
		return
	}
	if !h.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="tollgate-codec"`)
		h.refuse(w, r, http.StatusUnauthorized, "a valid bearer token is required")
		return
	}
	if len(h.opts.Namespaces) > 0 {
		// A missing header must not skip the allowlist: the Web UI and
		// the CLI always send one, so a request without it is not theirs.
		ns := r.Header.Get("X-Namespace")
		if ns == "" {
			h.refuse(w, r, http.StatusBadRequest, "This codec server serves only named namespaces; send the X-Namespace header with one of them.")
			return
		}
		if !slices.Contains(h.opts.Namespaces, ns) {
			h.refuse(w, r, http.StatusForbidden, fmt.Sprintf("This codec server does not serve the namespace %q.", ns))
			return
		}
	}

	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			h.refuse(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is over %d bytes", h.opts.MaxBody))
			return
		}
		h.refuse(w, r, http.StatusBadRequest, "cannot read the body")
		return
	}
	var in commonpb.Payloads
	if err := protojson.Unmarshal(body, &in); err != nil {
		h.refuse(w, r, http.StatusBadRequest, `the body is not {"payloads": [...]} JSON`)
		return
	}
	var out []*commonpb.Payload
	if encode {
		out, err = h.opts.Codec.Encode(in.Payloads)
	} else {
		out, err = h.opts.Codec.Decode(in.Payloads)
	}
	if err != nil {
		// Codec errors name key ids and what is wrong, never key
		// material; the operator needs them to fix a keys file.
		h.refuse(w, r, http.StatusBadRequest, err.Error())
		return
	}
	b, err := protojson.Marshal(&commonpb.Payloads{Payloads: out})
	if err != nil {
		http.Error(w, "cannot encode the reply", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

func (h *Handler) authorized(r *http.Request) bool {
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return h.opts.Unauthenticated
	}
	scheme, token, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	found := 0
	for _, t := range h.tokens {
		found |= subtle.ConstantTimeCompare(sum[:], t[:])
	}
	return found == 1
}

func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, status int, why string) {
	h.opts.Logger.Debug("Codec server refused a request", "status", status, "path", r.URL.Path, "origin", r.Header.Get("Origin"), "reason", why)
	http.Error(w, why, status)
}
