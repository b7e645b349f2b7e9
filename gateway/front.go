package gateway

import (
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The gateway's front door: checks every request passes before it is
// routed (Host) or authenticated (Origin), and the checks of what a
// request names (content type, turn ids). They close the CSRF and
// DNS-rebinding holes a dev gateway would otherwise have, where a request
// without a key is let in for coming from this machine.

// hostAllowed reports whether the gateway answers to r's Host. In dev
// mode, or with Options.Hosts, only to the loopback names and the listen
// host on the port it listens on, and to the configured names; elsewhere
// (keys only, where a rebound name gains nothing) to any.
func (s *Server) hostAllowed(r *http.Request) bool {
	if !s.opts.Dev && len(s.opts.Hosts) == 0 {
		return true
	}
	host, port, err := net.SplitHostPort(r.Host)
	if err != nil {
		host, port = r.Host, ""
	}
	host = strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	if host == "" {
		return false
	}
	for _, h := range s.hosts {
		if h.name == host && (h.port == "" || h.port == port) {
			return true
		}
	}
	if listen := s.listenPort.Load(); listen != nil {
		if port != *listen {
			return false
		}
	} else if s.addrPort != "" && s.addrPort != "0" && port != s.addrPort {
		return false
	}
	switch host {
	case "localhost", "127.0.0.1", "::1", s.addrHost:
		return true
	}
	return false
}

type allowedHost struct{ name, port string }

// parseHosts reads Options.Hosts and the public URL: names, host:port
// pairs or URLs. A name without a port matches it on any port.
func parseHosts(names []string) ([]allowedHost, error) {
	var out []allowedHost
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if strings.Contains(n, "://") {
			u, err := url.Parse(n)
			if err != nil || u.Host == "" {
				return nil, fmt.Errorf("gateway: host %q is not a URL with a host", n)
			}
			n = u.Host
		}
		h, p, err := net.SplitHostPort(n)
		if err != nil {
			h, p = n, ""
		}
		h = strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"))
		if h == "" || strings.ContainsAny(h, "/ ") {
			return nil, fmt.Errorf("gateway: %q is not a host name", n)
		}
		out = append(out, allowedHost{name: h, port: p})
	}
	return out, nil
}

func (s *Server) misdirected(w http.ResponseWriter, r *http.Request) {
	sentence := fmt.Sprintf("this gateway does not answer to the host name %s; reach it at its own address (%s)", r.Host, s.hostHint())
	if r.Host == "" {
		sentence = "this gateway answers only requests that name it in a Host header"
	}
	if strings.HasPrefix(r.URL.Path, "/v1/") && !strings.HasPrefix(r.URL.Path, "/v1/links/") && !strings.HasPrefix(r.URL.Path, "/v1/connect/") && r.URL.Path != "/v1/oauth/callback" {
		writeJSON(w, http.StatusMisdirectedRequest, map[string]string{"error": sentence})
		return
	}
	renderErrorPage(w, http.StatusMisdirectedRequest, "Wrong address", strings.ToUpper(sentence[:1])+sentence[1:]+".", "")
}

func (s *Server) hostHint() string {
	port := s.addrPort
	if p := s.listenPort.Load(); p != nil {
		port = *p
	}
	if port == "" || port == "0" {
		return "127.0.0.1"
	}
	return "127.0.0.1:" + port
}

// crossOrigin says why r came from a page of another origin, or "" when
// it did not: when the browser says so (Origin, Sec-Fetch-Site), or
// when it comes from a page it cannot name (Origin null). A request
// without either header is from no browser, or from one too old to send
// them on a cross-origin POST. Ports count: a page on another loopback
// port is same-site, but not the gateway's origin.
func crossOrigin(r *http.Request) string {
	if o := r.Header.Get("Origin"); o != "" {
		if o == "null" {
			return "it came from a page without an origin (a sandbox, a file, or a redirect from another site)"
		}
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		u, err := url.Parse(o)
		if err != nil || !strings.EqualFold(u.Scheme, scheme) || !strings.EqualFold(u.Host, r.Host) {
			return fmt.Sprintf("it came from a page at %s", o)
		}
	}
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "", "same-origin", "none":
	default:
		return fmt.Sprintf("the browser marked it %s", site)
	}
	return ""
}

// devCaller reports whether r is let in without a key as the dev
// principal: dev mode, from loopback, and not sent by another origin's
// page.
func (s *Server) devCaller(r *http.Request) bool {
	return s.opts.Dev && fromLoopback(r) && crossOrigin(r) == ""
}

// devPage is devCaller for the inbox's pages: a GET of a page may come
// from another site's link (it changes nothing, the other page cannot
// read it, and pages refuse frames); forms must come from the inbox.
func (s *Server) devPage(r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return s.opts.Dev && fromLoopback(r)
	}
	return s.devCaller(r)
}

// requireJSON refuses a body that does not say it is JSON. Pages of
// other origins can send text/plain and form types without asking; a
// JSON content type needs a CORS preflight the gateway never grants.
func requireJSON(w http.ResponseWriter, r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && mt == "application/json" {
		return true
	}
	got := "none"
	if ct != "" {
		got = ct
	}
	fail(w, r, http.StatusUnsupportedMediaType, fmt.Sprintf("the body must be JSON sent with Content-Type: application/json (this request's Content-Type is %s)", got))
	return false
}

// maxPathID bounds the ids routes take: Temporal's own default limit
// for workflow ids.
const maxPathID = 1000

// checkTurnID says why id cannot be the id of any turn: ids are UTF-8,
// at most maxPathID bytes, of printable characters. Laxer than the ids
// POST /v1/turns lets a caller choose: existing turns (a session's, say)
// may have others.
func checkTurnID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("an empty string is not a turn id")
	case len(id) > maxPathID:
		return fmt.Errorf("a string of %d bytes is not a turn id (at most %d)", len(id), maxPathID)
	case !utf8.ValidString(id):
		return fmt.Errorf("%q is not a turn id: it is not UTF-8", id)
	case strings.ContainsFunc(id, func(r rune) bool { return !unicode.IsPrint(r) }):
		return fmt.Errorf("%q is not a turn id: it holds a control or other unprintable character", id)
	}
	return nil
}

// withTurnID refuses a path whose {id} no turn can have.
func withTurnID(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := checkTurnID(r.PathValue("id")); err != nil {
			fail(w, r, http.StatusBadRequest, err.Error())
			return
		}
		h.ServeHTTP(w, r)
	})
}
