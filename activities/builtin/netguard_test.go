package builtin

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/connections"
	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

// internalService is a server on 127.0.0.1 that counts the requests it
// gets: it stands for Temporal's frontend, its UI, or anything else on the
// worker's machine that the model must not reach.
type internalService struct {
	*httptest.Server
	port string
	hits atomic.Int32
}

func newInternalService(t *testing.T) *internalService {
	t.Helper()
	s := &internalService{}
	mux := http.NewServeMux()
	mux.HandleFunc("/go", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/loop", http.StatusFound)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "internal secret")
	})
	s.Server = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	_, s.port, _ = net.SplitHostPort(s.Listener.Addr().String())
	return s
}

// fakeDNS answers A and AAAA queries from a table, so that a test can make
// a name resolve to an internal address (DNS rebinding) through the real
// resolver and dialer.
func fakeDNS(t *testing.T, records map[string][]netip.Addr) *net.Resolver {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if reply := dnsReply(buf[:n], records); reply != nil {
				_, _ = pc.WriteTo(reply, from)
			}
		}
	}()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", pc.LocalAddr().String())
	}}
}

func dnsReply(q []byte, records map[string][]netip.Addr) []byte {
	if len(q) < 12 {
		return nil
	}
	// The question: labels up to the root label, then type and class.
	var labels []string
	i := 12
	for i < len(q) && q[i] != 0 {
		l := int(q[i])
		if i+1+l > len(q) {
			return nil
		}
		labels = append(labels, string(q[i+1:i+1+l]))
		i += 1 + l
	}
	end := i + 5
	if end > len(q) {
		return nil
	}
	qtype := binary.BigEndian.Uint16(q[i+1:])
	name := strings.ToLower(strings.Join(labels, ".")) + "."
	addrs, known := records[name]
	var answers [][]byte
	for _, a := range addrs {
		if (qtype == 1 && a.Is4()) || (qtype == 28 && a.Is6()) {
			answers = append(answers, a.AsSlice())
		}
	}
	flags := uint16(0x8580) // response, authoritative, recursion desired and available
	if !known {
		flags |= 3 // NXDOMAIN
	}
	out := binary.BigEndian.AppendUint16(nil, binary.BigEndian.Uint16(q))
	out = binary.BigEndian.AppendUint16(out, flags)
	out = binary.BigEndian.AppendUint16(out, 1)
	out = binary.BigEndian.AppendUint16(out, uint16(len(answers)))
	out = append(out, 0, 0, 0, 0)
	out = append(out, q[12:end]...)
	for _, rdata := range answers {
		out = append(out, 0xc0, 12) // the name, by pointer to the question
		out = binary.BigEndian.AppendUint16(out, qtype)
		out = binary.BigEndian.AppendUint16(out, 1)
		out = binary.BigEndian.AppendUint32(out, 0)
		out = binary.BigEndian.AppendUint16(out, uint16(len(rdata)))
		out = append(out, rdata...)
	}
	return out
}

var loopback4 = netip.MustParseAddr("127.0.0.1")

// fetchWithResolver builds http_fetch the way Tools does, but resolving
// names through resolver.
func fetchWithResolver(t *testing.T, opts Options, resolver *net.Resolver) tool.Tool {
	t.Helper()
	if opts.Connections == nil {
		opts.Connections = connections.NewMemoryStore()
	}
	tl, err := newHTTPFetchTool(opts.withDefaults(), resolver)
	require.NoError(t, err)
	return tl
}

func TestHTTPFetchRefusesInternalAddresses(t *testing.T) {
	svc := newInternalService(t)
	fetch := testTools(t, Options{})[HTTPFetch]
	p := svc.port
	loopback := "loopback addresses are internal; an operator can allow hosts with " + FetchAllowEnv
	tests := []struct {
		url  string
		want []string
	}{
		{"http://127.0.0.1:" + p + "/", []string{"http_fetch refuses 127.0.0.1: " + loopback}},
		{"https://127.0.0.1:" + p + "/", []string{"refuses 127.0.0.1: " + loopback}},
		{"http://127.0.0.1:7233/", []string{"refuses 127.0.0.1: " + loopback}}, // Temporal's frontend
		{"http://localhost:8233/", []string{"refuses localhost (", loopback}},  // Temporal's UI
		{"http://localhost:" + p + "/", []string{"refuses localhost (", loopback}},
		{"http://127.1:" + p + "/", []string{"refuses 127.1 (127.0.0.1): " + loopback}},
		{"http://127.0.0.1.:" + p + "/", []string{"refuses 127.0.0.1. (127.0.0.1): " + loopback}},
		{"http://0x7f.1:" + p + "/", []string{"refuses 0x7f.1 (127.0.0.1): " + loopback}},
		{"http://0x7f000001:" + p + "/", []string{"refuses 0x7f000001 (127.0.0.1): " + loopback}},
		{"http://2130706433:" + p + "/", []string{"refuses 2130706433 (127.0.0.1): " + loopback}},
		{"http://017700000001:" + p + "/", []string{"refuses 017700000001 (127.0.0.1): " + loopback}},
		{"http://0177.0.0.01:" + p + "/", []string{"refuses 0177.0.0.01 (127.0.0.1): " + loopback}},
		{"http://[::ffff:127.0.0.1]:" + p + "/", []string{"refuses ::ffff:127.0.0.1 (127.0.0.1): " + loopback}},
		{"http://[::ffff:7f00:1]:" + p + "/", []string{"(127.0.0.1): " + loopback}},
		{"http://[64:ff9b::7f00:1]:" + p + "/", []string{loopback}}, // NAT64 of 127.0.0.1
		{"http://[::1]:" + p + "/", []string{"refuses ::1: " + loopback}},
		{"http://0.0.0.0:" + p + "/", []string{"refuses 0.0.0.0: unspecified"}},
		{"http://0:" + p + "/", []string{"refuses 0 (0.0.0.0): unspecified"}},
		{"http://[::]:" + p + "/", []string{"refuses ::: unspecified"}},
		{"http://:" + p + "/", []string{"has no host"}},
		{"http://10.0.0.1/", []string{"refuses 10.0.0.1: private (RFC 1918)"}},
		{"http://172.16.0.1/", []string{"private (RFC 1918)"}},
		{"http://192.168.1.1/", []string{"private (RFC 1918)"}},
		{"http://100.64.0.1/", []string{"CGNAT"}},
		{"http://169.254.169.254/latest/meta-data/", []string{"refuses 169.254.169.254: link-local", "metadata"}},
		{"http://0xa9fea9fe/", []string{"(169.254.169.254): link-local"}},
		{"http://[fd00::1]/", []string{"unique-local"}},
		{"http://[fc00::1]/", []string{"unique-local"}},
		{"http://[fe80::1%25lo]/", []string{"link-local"}},
		{"http://224.0.0.1/", []string{"multicast"}},
		{"http://[ff02::1]/", []string{"multicast"}},
		{"http://255.255.255.255/", []string{"240.0.0.0/4"}},
		{"http://198.18.0.1/", []string{"benchmarking"}},
		{"http://192.0.2.1/", []string{"documentation"}},
		{"http://[2001:db8::1]/", []string{"documentation"}},
		{"http://[::127.0.0.1]/", []string{"outside 2000::/3"}},
		{"http://[2002:7f00:1::1]/", []string{"6to4"}},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			// run fails on a Go error, so a refusal must be a tool_error:
			// retrying it could never help.
			out := run(t, fetch, tool.Call{}, httpFetchArgs{URL: tt.url})
			requireToolError(t, out, tt.want...)
		})
	}
	require.Zero(t, svc.hits.Load(), "the internal service was reached")
}

// TestHTTPFetchChecksResolvedAddress: a name is only checked once it has
// been resolved, by the dialer, so a DNS answer pointing at an internal
// address is refused however the name looks.
func TestHTTPFetchChecksResolvedAddress(t *testing.T) {
	svc := newInternalService(t)
	dns := fakeDNS(t, map[string][]netip.Addr{
		"rebind.example.": {loopback4},
		"meta.example.":   {netip.MustParseAddr("169.254.169.254")},
		"v6.example.":     {netip.MustParseAddr("::1")},
		"lan.example.":    {netip.MustParseAddr("192.168.0.10")},
	})
	fetch := fetchWithResolver(t, Options{}, dns)
	for host, want := range map[string]string{
		"rebind.example": "refuses rebind.example (127.0.0.1): loopback",
		"meta.example":   "refuses meta.example (169.254.169.254): link-local",
		"v6.example":     "refuses v6.example (::1): loopback",
		"lan.example":    "refuses lan.example (192.168.0.10): private",
	} {
		t.Run(host, func(t *testing.T) {
			out := run(t, fetch, tool.Call{}, httpFetchArgs{URL: "http://" + host + ":" + svc.port + "/"})
			requireToolError(t, out, want)
		})
	}
	require.Zero(t, svc.hits.Load())

	// The same resolver, with the name or its address allowed: the
	// refusals above were the guard's, not a broken resolver's.
	for _, allow := range []string{"rebind.example", "127.0.0.1:" + svc.port} {
		fetch := fetchWithResolver(t, Options{FetchAllow: []string{allow}}, dns)
		out := run(t, fetch, tool.Call{}, httpFetchArgs{URL: "http://rebind.example:" + svc.port + "/"})
		require.Equal(t, "internal secret", requireText(t, out), allow)
	}
	require.EqualValues(t, 2, svc.hits.Load())
}

func TestHTTPFetchRefusesRedirectsToInternalAddresses(t *testing.T) {
	svc := newInternalService(t)
	p := svc.port
	dns := fakeDNS(t, map[string][]netip.Addr{
		"public.example.": {loopback4}, // stands for a public site the operator allowed
		"rebind.example.": {loopback4},
	})
	fetch := fetchWithResolver(t, Options{FetchAllow: []string{"public.example"}}, dns)
	start := "http://public.example:" + p + "/go?to="

	tests := []struct {
		to   string
		want string
	}{
		{"http://127.0.0.1:" + p + "/secret", "refuses 127.0.0.1: loopback"},
		{"http://localhost:" + p + "/secret", "refuses localhost ("},
		{"http://rebind.example:" + p + "/secret", "refuses rebind.example (127.0.0.1): loopback"},
		{"http://0x7f.1:" + p + "/secret", "refuses 0x7f.1 (127.0.0.1): loopback"},
		{"http://2130706433:" + p + "/secret", "(127.0.0.1): loopback"},
		{"http://[::ffff:127.0.0.1]:" + p + "/secret", "(127.0.0.1): loopback"},
		{"http://[::1]:" + p + "/secret", "refuses ::1: loopback"},
		{"http://0.0.0.0:" + p + "/secret", "unspecified"},
		{"http://169.254.169.254/latest/meta-data/", "link-local"},
		{"http://10.1.2.3/", "private"},
	}
	for _, tt := range tests {
		t.Run(tt.to, func(t *testing.T) {
			from := start + url.QueryEscape(tt.to)
			out := run(t, fetch, tool.Call{}, httpFetchArgs{URL: from})
			requireToolError(t, out, "GET "+from+" was redirected to "+tt.to+", and http_fetch refuses", tt.want)
		})
	}
	require.Zero(t, svc.hits.Load(), "a redirect reached the internal service")

	t.Run("allowed target", func(t *testing.T) {
		out := run(t, fetch, tool.Call{}, httpFetchArgs{URL: start + url.QueryEscape("http://public.example:"+p+"/secret")})
		require.Equal(t, "internal secret", requireText(t, out))
	})
	t.Run("redirect loop", func(t *testing.T) {
		out := run(t, fetch, tool.Call{}, httpFetchArgs{URL: "http://public.example:" + p + "/loop"})
		requireToolError(t, out, "stopped after 10 redirects")
	})
}

func TestHTTPFetchAllowlist(t *testing.T) {
	a, b := newInternalService(t), newInternalService(t)
	get := func(t *testing.T, allow []string, u string) results.Outcome {
		t.Helper()
		return run(t, testTools(t, Options{FetchAllow: allow})[HTTPFetch], tool.Call{}, httpFetchArgs{URL: u})
	}
	reached := func(t *testing.T, out results.Outcome) {
		t.Helper()
		require.Equal(t, "internal secret", requireText(t, out))
	}
	refused := func(t *testing.T, out results.Outcome) {
		t.Helper()
		requireToolError(t, out, "http_fetch refuses")
	}

	t.Run("ip:port opens that port only", func(t *testing.T) {
		allow := []string{"127.0.0.1:" + a.port}
		reached(t, get(t, allow, a.URL))
		reached(t, get(t, allow, "http://localhost:"+a.port+"/"))
		refused(t, get(t, allow, b.URL))
		refused(t, get(t, allow, "http://[::1]:"+a.port+"/"))
	})
	t.Run("host name", func(t *testing.T) {
		allow := []string{"LocalHost"}
		reached(t, get(t, allow, "http://localhost:"+b.port+"/"))
		refused(t, get(t, allow, b.URL))
	})
	t.Run("host:port", func(t *testing.T) {
		allow := []string{"localhost:" + a.port}
		reached(t, get(t, allow, "http://localhost:"+a.port+"/"))
		refused(t, get(t, allow, "http://localhost:"+b.port+"/"))
	})
	t.Run("CIDR", func(t *testing.T) {
		allow := []string{" 127.0.0.0/8", ""}
		reached(t, get(t, allow, a.URL))
		reached(t, get(t, allow, b.URL))
		refused(t, get(t, allow, "http://[::1]:"+a.port+"/"))
		refused(t, get(t, []string{"10.0.0.0/8"}, a.URL))
	})
	t.Run("address", func(t *testing.T) {
		reached(t, get(t, []string{"127.0.0.1"}, b.URL))
		reached(t, get(t, []string{"::ffff:127.0.0.1"}, b.URL))
	})
	t.Run("a redirect away from the one allowed port", func(t *testing.T) {
		to := b.URL + "/secret"
		out := get(t, []string{"127.0.0.1:" + a.port}, a.URL+"/go?to="+url.QueryEscape(to))
		requireToolError(t, out, "redirected to "+to, "refuses 127.0.0.1: loopback")
	})
	require.EqualValues(t, 4, b.hits.Load(), "b is reached only where allowed: four times above, never by the redirect")

	for _, bad := range []string{"http://example.com", "10.0.0.0/33", "exa mple.com", "example.com:0", "example.com:99999", "a..b", "*.example.com", "user@host", "[::1"} {
		t.Run("bad entry "+bad, func(t *testing.T) {
			_, err := Tools(Options{Connections: connections.NewMemoryStore(), FetchAllow: []string{bad}})
			require.ErrorContains(t, err, fmt.Sprintf("(%s) entry %q", FetchAllowEnv, bad))
		})
	}
}

// TestHTTPFetchGuardsCallersClient: a client passed in Options (tests,
// proxies, instrumentation) must not become a way around the guard.
func TestHTTPFetchGuardsCallersClient(t *testing.T) {
	svc := newInternalService(t)
	client := svc.Client()
	out := run(t, testTools(t, Options{HTTPClient: client})[HTTPFetch], tool.Call{}, httpFetchArgs{URL: svc.URL})
	requireToolError(t, out, "refuses 127.0.0.1: loopback")
	require.Nil(t, client.CheckRedirect, "the caller's client is left as it was")

	t.Run("a proxy would fetch out of the guard's sight", func(t *testing.T) {
		proxy, err := url.Parse(svc.URL)
		require.NoError(t, err)
		dns := fakeDNS(t, map[string][]netip.Addr{"rebind.example.": {loopback4}})
		fetch := fetchWithResolver(t, Options{HTTPClient: &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxy)}}}, dns)
		out := run(t, fetch, tool.Call{}, httpFetchArgs{URL: "http://rebind.example/"})
		requireToolError(t, out, "refuses rebind.example (127.0.0.1)")
	})
	require.Zero(t, svc.hits.Load())

	t.Run("a transport it cannot guard is refused", func(t *testing.T) {
		rt := roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, errors.New("unused") })
		_, err := Tools(Options{Connections: connections.NewMemoryStore(), HTTPClient: &http.Client{Transport: rt}})
		require.ErrorContains(t, err, "needs an *http.Transport")
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestInternalReason pins the ranges, both ways: a public address refused
// by mistake breaks http_fetch as surely as an internal one let through
// breaks the worker.
func TestInternalReason(t *testing.T) {
	for _, s := range []string{
		"8.8.8.8", "1.1.1.1", "93.184.216.34", "100.63.255.255", "100.128.0.0", "172.15.255.255", "172.32.0.0",
		"192.167.255.255", "192.169.0.0", "11.0.0.1", "223.255.255.254", "2606:4700:4700::1111", "2a00:1450:4001::200e",
		"64:ff9b::808:808", "::ffff:8.8.8.8",
	} {
		require.Empty(t, internalReason(netip.MustParseAddr(s)), s)
	}
	for _, s := range []string{
		"0.0.0.0", "0.1.2.3", "10.255.255.255", "100.64.0.0", "100.127.255.255", "127.255.255.254", "169.254.0.1",
		"172.16.0.0", "172.31.255.255", "192.0.0.8", "192.88.99.1", "192.168.0.0", "198.19.255.255", "198.51.100.1",
		"203.0.113.1", "224.0.0.251", "239.255.255.250", "240.0.0.1", "::", "::1", "::ffff:10.0.0.1", "64:ff9b::a9fe:a9fe",
		"64:ff9b:1::1", "100::1", "2001::1", "2001:db8::1", "2002::1", "3fff::1", "fc00::1", "fdff::1", "fe80::1",
		"fec0::1", "ff02::fb", "5f00::1",
	} {
		require.NotEmpty(t, internalReason(netip.MustParseAddr(s)), s)
	}

	for in, want := range map[string]string{
		"127.1": "127.0.0.1", "0x7f.1": "127.0.0.1", "0X7F.0.0.0x1": "127.0.0.1", "2130706433": "127.0.0.1",
		"017700000001": "127.0.0.1", "0177.0.0.01": "127.0.0.1", "10.1": "10.0.0.1", "192.168.257": "192.168.1.1",
		"4294967295": "255.255.255.255", "0": "0.0.0.0", "8.8.8.8.": "8.8.8.8",
	} {
		a, ok := literalAddr(in)
		require.True(t, ok, in)
		require.Equal(t, want, a.String(), in)
	}
	for _, in := range []string{"4294967296", "256.0.0.1", "1.2.3.4.5", "example.com", "08", "1..2", "0x1g", "1.2.3.256", "+1", "1_0"} {
		_, ok := literalAddr(in)
		require.False(t, ok, in)
	}
}
