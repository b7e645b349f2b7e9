package builtin

import (
	"bytes"
	"fmt"
	"image"
	"image/png"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

func TestHTTPFetch(t *testing.T) {
	var pngData bytes.Buffer
	require.NoError(t, png.Encode(&pngData, image.NewGray(image.Rect(0, 0, 1, 1))))
	mux := http.NewServeMux()
	mux.HandleFunc("/page", func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, userAgent, r.Header.Get("User-Agent"))
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><html><head><title> Tollgate &amp; Friends </title>
<style>body{color:red}</style><script>var secret = 1;</script></head>
<body><h1>Hello</h1><p>First <b>para</b>graph.</p><p>Second&nbsp;one.</p></body></html>`)
	})
	mux.HandleFunc("/plain", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "just <text>\n")
	})
	mux.HandleFunc("/json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok":true}`)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, strings.Repeat("x", 5000))
	})
	mux.HandleFunc("/missing", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no such page", http.StatusNotFound)
	})
	mux.HandleFunc("/broken", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/plain", http.StatusFound)
	})
	mux.HandleFunc("/image", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write(pngData.Bytes())
	})
	mux.HandleFunc("/binary", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write([]byte{0, 1, 2, 3})
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	// The test server is on loopback, which http_fetch refuses unless the
	// operator opens it.
	fetch := testTools(t, Options{HTTPClient: srv.Client(), MaxFetchBytes: 1000, FetchAllow: []string{srv.Listener.Addr().String()}})[HTTPFetch]

	tests := []struct {
		name       string
		url        string
		wantText   string
		wantSource results.Source
		wantErr    string
	}{
		{
			name: "html", url: srv.URL + "/page",
			wantText:   "Hello\nFirst paragraph.\nSecond\u00a0one.",
			wantSource: results.Source{URL: srv.URL + "/page", Title: "Tollgate & Friends"},
		},
		{name: "plain", url: srv.URL + "/plain", wantText: "just <text>\n", wantSource: results.Source{URL: srv.URL + "/plain"}},
		{name: "json", url: srv.URL + "/json", wantText: `{"ok":true}`, wantSource: results.Source{URL: srv.URL + "/json"}},
		{name: "redirect names the final url", url: srv.URL + "/redirect", wantText: "just <text>\n", wantSource: results.Source{URL: srv.URL + "/plain"}},
		{
			name: "size limit", url: srv.URL + "/big",
			wantText:   strings.Repeat("x", 1000) + "\n[stopped after 1000 bytes of the response]",
			wantSource: results.Source{URL: srv.URL + "/big"},
		},
		{name: "404", url: srv.URL + "/missing", wantErr: "HTTP 404 Not Found\nno such page"},
		{name: "502", url: srv.URL + "/broken", wantErr: "HTTP 502 Bad Gateway"},
		{name: "binary", url: srv.URL + "/binary", wantErr: "application/octet-stream is not text"},
		{name: "file scheme", url: "file:///etc/passwd", wantErr: `scheme "file"`},
		{name: "ftp scheme", url: "ftp://example.com/x", wantErr: `only http and https`},
		{name: "no host", url: "http:///path", wantErr: "has no host"},
		{name: "garbage", url: "http://[::1", wantErr: "not a valid URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := run(t, fetch, tool.Call{}, httpFetchArgs{URL: tt.url})
			if tt.wantErr != "" {
				requireToolError(t, out, tt.wantErr)
				return
			}
			require.Equal(t, tt.wantText, requireText(t, out))
			require.Equal(t, []results.Source{tt.wantSource}, out.Success.Sources)
		})
	}

	t.Run("image", func(t *testing.T) {
		out := run(t, fetch, tool.Call{}, httpFetchArgs{URL: srv.URL + "/image"})
		require.Equal(t, results.KindSuccess, out.Kind)
		require.Equal(t, results.MediaPart("image/png", pngData.Bytes()), out.Success.Parts[1])
	})
}

func TestHTTPFetchNetworkErrorIsRetryable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	fetch := testTools(t, Options{FetchAllow: []string{srv.Listener.Addr().String()}})[HTTPFetch]
	_, err := runErr(t, fetch, tool.Call{}, httpFetchArgs{URL: url + "/x"})
	require.Error(t, err)
	require.True(t, tool.IsRetryable(err), "%v", err)
}

func TestHTMLToText(t *testing.T) {
	require.Equal(t, "a\n\nb", htmlToText("<div>a</div><!-- c --><p></p><p></p><div>b</div>"))
	require.Equal(t, "x < y", htmlToText("<p>x &lt; y</p>"))
	require.Equal(t, "", htmlTitle("<p>no title</p>"))
}
