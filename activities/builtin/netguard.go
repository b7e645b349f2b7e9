package builtin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// FetchAllowEnv is the environment variable a worker reads into
// Options.FetchAllow: comma-separated hosts, host:port pairs or CIDRs.
const FetchAllowEnv = "TOLLGATE_HTTP_ALLOW"

// maxRedirects matches net/http's own default, which a custom
// CheckRedirect replaces and so must restate.
const maxRedirects = 10

// fetchGuard decides which addresses http_fetch may connect to. The model
// chooses the URL, so by default only public unicast addresses are
// reachable; the operator's allowlist opens the rest one destination at a
// time.
type fetchGuard struct {
	names     map[string]bool // host names open on every port
	namePorts map[string]bool // "host:port" as net.JoinHostPort writes it
	prefixes  []netip.Prefix  // addresses open on every port
	addrPorts map[netip.AddrPort]bool
}

func newFetchGuard(allow []string) (*fetchGuard, error) {
	g := &fetchGuard{names: map[string]bool{}, namePorts: map[string]bool{}, addrPorts: map[netip.AddrPort]bool{}}
	for _, raw := range allow {
		if err := g.add(strings.TrimSpace(raw)); err != nil {
			return nil, fmt.Errorf("http_fetch allowlist (%s) entry %q: %w", FetchAllowEnv, raw, err)
		}
	}
	return g, nil
}

func (g *fetchGuard) add(e string) error {
	if e == "" {
		// Tolerated so that a split of "a,,b" or a trailing comma works.
		return nil
	}
	if strings.Contains(e, "://") || strings.ContainsAny(e, " \t@?#") {
		return errors.New("give a host, host:port or CIDR, not a URL")
	}
	if strings.Contains(e, "/") {
		p, err := netip.ParsePrefix(e)
		if err != nil {
			return fmt.Errorf("not a CIDR: %w", err)
		}
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), max(p.Bits()-96, 0))
		}
		g.prefixes = append(g.prefixes, p.Masked())
		return nil
	}
	bare := e
	if strings.HasPrefix(e, "[") && strings.HasSuffix(e, "]") {
		bare = e[1 : len(e)-1]
	}
	if a, err := netip.ParseAddr(bare); err == nil {
		a = a.Unmap().WithZone("")
		g.prefixes = append(g.prefixes, netip.PrefixFrom(a, a.BitLen()))
		return nil
	}
	if ap, err := netip.ParseAddrPort(e); err == nil {
		if ap.Port() == 0 {
			return errors.New("port 0 cannot be fetched")
		}
		g.addrPorts[netip.AddrPortFrom(ap.Addr().Unmap().WithZone(""), ap.Port())] = true
		return nil
	}
	host, port := e, ""
	if h, p, err := net.SplitHostPort(e); err == nil {
		host, port = h, p
		if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
			return fmt.Errorf("port %q is not a number from 1 to 65535", port)
		}
	}
	host = normalHost(host)
	if !validHostName(host) {
		return errors.New("not a host name, IP address, host:port or CIDR")
	}
	if port == "" {
		g.names[host] = true
	} else {
		g.namePorts[net.JoinHostPort(host, port)] = true
	}
	return nil
}

func normalHost(h string) string { return strings.TrimSuffix(strings.ToLower(h), ".") }

func validHostName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
	}
	return true
}

// allowedName reports whether the operator opened host, as the URL names
// it, on port. An allowed name is trusted whatever it resolves to: that is
// what naming an internal service in the allowlist means.
func (g *fetchGuard) allowedName(host, port string) bool {
	h := normalHost(host)
	return g.names[h] || g.namePorts[net.JoinHostPort(h, port)]
}

func (g *fetchGuard) allowedAddr(ap netip.AddrPort) bool {
	a := ap.Addr().Unmap().WithZone("")
	if g.addrPorts[netip.AddrPortFrom(a, ap.Port())] {
		return true
	}
	for _, p := range g.prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// check refuses a connection to ap, reached by the name host, unless the
// address is public or the operator allowed it.
func (g *fetchGuard) check(host string, ap netip.AddrPort) error {
	if g.allowedAddr(ap) {
		return nil
	}
	a := ap.Addr()
	reason := internalReason(a)
	if reason == "" {
		return nil
	}
	who := a.Unmap().String()
	if h := strings.Trim(host, "[]"); h != who {
		who = fmt.Sprintf("%s (%s)", h, who)
	}
	return &refusedError{who: who, reason: reason}
}

// checkURL refuses a URL whose host is an internal address in any
// spelling. Names are left to the dialer, which checks what they resolve
// to; checking here too would let DNS answer differently the second time.
func (g *fetchGuard) checkURL(u *url.URL) error {
	host := u.Hostname()
	if host == "" {
		// Go dials ":80" as this machine.
		return &refusedError{who: "an empty host", reason: "it means this machine"}
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	if g.allowedName(host, port) {
		return nil
	}
	a, ok := literalAddr(host)
	if !ok {
		return nil
	}
	// An out-of-range port leaves 0, which only a CIDR entry matches; the
	// dial fails on it anyway.
	n, _ := strconv.ParseUint(port, 10, 16)
	return g.check(host, netip.AddrPortFrom(a, uint16(n)))
}

// literalAddr parses host as an IP address, including the spellings
// inet_aton accepts (2130706433, 0x7f.1, 017700000001, 127.1): some
// resolvers turn those into addresses, and a refusal should name the
// address rather than depend on which resolver the worker has.
func literalAddr(host string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(host); err == nil {
		return a, true
	}
	return looseIPv4(strings.TrimSuffix(host, "."))
}

func looseIPv4(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	vals := make([]uint64, len(parts))
	for i, p := range parts {
		base, digits := 10, p
		switch {
		case len(p) > 1 && (p[:2] == "0x" || p[:2] == "0X"):
			base, digits = 16, p[2:]
			if digits == "" {
				digits = "0"
			}
		case len(p) > 1 && p[0] == '0':
			base, digits = 8, p[1:]
		}
		// With an explicit base ParseUint refuses signs and underscores,
		// as inet_aton does.
		v, err := strconv.ParseUint(digits, base, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	var n uint64
	for i, v := range vals[:len(vals)-1] {
		if v > 255 {
			return netip.Addr{}, false
		}
		n |= v << (8 * (3 - i))
	}
	last := vals[len(vals)-1]
	if last >= 1<<(8*(5-len(vals))) {
		return netip.Addr{}, false
	}
	n |= last
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}

var (
	cgnat  = netip.MustParsePrefix("100.64.0.0/10")
	nat64  = netip.MustParsePrefix("64:ff9b::/96")
	global = netip.MustParsePrefix("2000::/3")

	// reserved are the IANA special-purpose blocks that the netip
	// predicates do not cover and that are not globally reachable.
	reserved = []struct {
		prefix netip.Prefix
		what   string
	}{
		{netip.MustParsePrefix("0.0.0.0/8"), `"this network"`},
		{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignments"},
		{netip.MustParsePrefix("192.0.2.0/24"), "documentation"},
		{netip.MustParsePrefix("192.88.99.0/24"), "6to4 relays"},
		{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
		{netip.MustParsePrefix("198.51.100.0/24"), "documentation"},
		{netip.MustParsePrefix("203.0.113.0/24"), "documentation"},
		{netip.MustParsePrefix("240.0.0.0/4"), "future use and broadcast"},
		{netip.MustParsePrefix("2001::/23"), "IETF protocol assignments, Teredo among them"},
		{netip.MustParsePrefix("2001:db8::/32"), "documentation"},
		{netip.MustParsePrefix("2002::/16"), "6to4, which tunnels to an embedded IPv4 address"},
		{netip.MustParsePrefix("3fff::/20"), "documentation"},
	}
)

// internalReason says why a is not a public address, or "" when it is.
// IsGlobalUnicast alone would pass private, CGNAT and documentation
// ranges.
func internalReason(a netip.Addr) string {
	a = a.WithZone("").Unmap()
	if nat64.Contains(a) {
		// A NAT64 gateway connects to the embedded IPv4 address.
		b := a.As16()
		return internalReason(netip.AddrFrom4([4]byte(b[12:])))
	}
	switch {
	case a.IsUnspecified():
		return "unspecified addresses (0.0.0.0, ::) reach this machine"
	case a.IsLoopback():
		return "loopback addresses are internal"
	case a.Is4() && a.IsPrivate():
		return "private (RFC 1918) addresses are internal"
	case a.IsPrivate():
		return "unique-local (fc00::/7) addresses are internal"
	case cgnat.Contains(a):
		return "shared (CGNAT, 100.64.0.0/10) addresses are internal"
	case a.Is4() && a.IsLinkLocalUnicast():
		return "link-local addresses are internal (169.254.169.254 is the cloud metadata service)"
	case a.IsLinkLocalUnicast():
		return "link-local addresses are internal"
	case a.IsMulticast():
		return "multicast addresses are not web servers"
	}
	for _, r := range reserved {
		if r.prefix.Contains(a) {
			return fmt.Sprintf("addresses in %s (%s) are not public", r.prefix, r.what)
		}
	}
	if a.Is6() && !global.Contains(a) {
		return "IPv6 addresses outside 2000::/3 are not public"
	}
	return ""
}

// refusedError is a destination the guard refused. The model reads its
// message, so it must say what happened and who can change it.
type refusedError struct {
	who, reason string
	redirect    string // the URL redirected to, when a redirect was refused
}

func (e *refusedError) Error() string {
	return fmt.Sprintf("http_fetch refuses %s: %s; an operator can allow hosts with %s (comma-separated hosts, host:port or CIDRs)", e.who, e.reason, FetchAllowEnv)
}

var errTooManyRedirects = fmt.Errorf("stopped after %d redirects", maxRedirects)

// client derives http_fetch's client from base without changing base,
// which list_issues shares. Only an *http.Transport can be guarded: any
// other RoundTripper dials where it likes, so it is refused rather than
// trusted.
func (g *fetchGuard) client(base *http.Client, resolver *net.Resolver) (*http.Client, error) {
	var tr *http.Transport
	switch t := base.Transport.(type) {
	case nil:
		dt, ok := http.DefaultTransport.(*http.Transport)
		if !ok {
			return nil, fmt.Errorf("http_fetch: http.DefaultTransport is a %T; http_fetch needs an *http.Transport so it can check the address of every connection", http.DefaultTransport)
		}
		tr = dt.Clone()
	case *http.Transport:
		tr = t.Clone()
	default:
		return nil, fmt.Errorf("http_fetch: Options.HTTPClient has a %T transport; http_fetch needs an *http.Transport (or none) so it can check the address of every connection", t)
	}
	// A proxy would connect to the destination on our behalf, out of the
	// guard's sight, and custom dial functions would bypass Control.
	tr.Proxy = nil
	tr.OnProxyConnectResponse = nil
	tr.Dial = nil
	tr.DialTLS = nil
	tr.DialTLSContext = nil
	tr.DialContext = g.dialContext(&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Resolver: resolver})

	c := *base
	c.Transport = tr
	next := base.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= maxRedirects {
			return errTooManyRedirects
		}
		if err := g.checkURL(req.URL); err != nil {
			var re *refusedError
			if errors.As(err, &re) {
				re.redirect = req.URL.String()
			}
			return err
		}
		if next != nil {
			if err := next(req, via); err != nil {
				return err
			}
		}
		if trail, ok := req.Context().Value(redirectTrailKey{}).(*redirectTrail); ok {
			trail.last = req.URL.String()
		}
		return nil
	}
	return &c, nil
}

// redirectTrail, in a request's context, records the last redirect
// followed: a refusal at dial time cannot tell on its own that the address
// it refused is not the one the model asked for.
type redirectTrail struct{ last string }

type redirectTrailKey struct{}

// dialContext checks the address each connection is actually made to, in
// the dialer's Control hook, after DNS resolution: a name that resolves to
// a public address when checked and to 127.0.0.1 when dialled (DNS
// rebinding) meets the check at the second answer.
func (g *fetchGuard) dialContext(base *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("http_fetch: dial %s: %w", addr, err)
		}
		d := *base
		if !g.allowedName(host, port) {
			d.Control = func(_, address string, _ syscall.RawConn) error {
				ap, err := netip.ParseAddrPort(address)
				if err != nil {
					// Fail closed: an address we cannot read is not one we
					// can vouch for.
					return &refusedError{who: fmt.Sprintf("%s (%s)", host, address), reason: "its address could not be checked"}
				}
				return g.check(host, ap)
			}
		}
		return d.DialContext(ctx, network, addr)
	}
}
