package gateway

import (
	"bytes"
	"crypto/rand"
	"embed"
	"encoding/base64"
	"encoding/json"
	"html/template"
	"log/slog"
	"net/http"
	"strings"
)

//go:embed templates/*.html
var templateFiles embed.FS

// pages are the server-rendered pages. html/template escapes every value
// for where it lands, which matters here: arguments, plans and prompts
// come from the model, and the model is not trusted.
var pages = template.Must(template.New("").Funcs(template.FuncMap{"diffLines": diffLines}).ParseFS(templateFiles, "templates/*.html"))

// diffLine is one line of a unified diff with the class that colours it.
type diffLine struct{ Class, Text string }

func diffLines(diff string) []diffLine {
	lines := strings.Split(strings.TrimSuffix(diff, "\n"), "\n")
	out := make([]diffLine, len(lines))
	for i, l := range lines {
		class := ""
		switch {
		case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"):
			class = "file"
		case strings.HasPrefix(l, "+"):
			class = "add"
		case strings.HasPrefix(l, "-"):
			class = "del"
		case strings.HasPrefix(l, "@@"):
			class = "hunk"
		}
		out[i] = diffLine{Class: class, Text: l}
	}
	return out
}

// prettyJSON indents JSON for people; what does not parse is shown as it
// came.
func prettyJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "{}"
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

// pageBase is what every page's layout reads.
type pageBase struct {
	Title string
	// Nonce lets the page's own inline script run under the CSP, and no
	// other script.
	Nonce string
}

func newNonce() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// render writes the named page with status code. Pages run no script but
// their own (the nonce), load nothing from elsewhere, post forms only
// here, and cannot be framed.
func render(w http.ResponseWriter, code int, name, nonce string, data any) {
	var b bytes.Buffer
	if err := pages.ExecuteTemplate(&b, name, data); err != nil {
		// Only a bug in a template gets here; the tests render every page.
		slog.Default().Error("Gateway page did not render", "page", name, "error", err)
		code = http.StatusInternalServerError
		b.Reset()
		b.WriteString("<!doctype html><title>Error</title><p>The gateway could not render this page.</p>")
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; script-src 'nonce-"+nonce+"'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	w.WriteHeader(code)
	_, _ = w.Write(b.Bytes())
}

type errorPage struct {
	pageBase
	Heading  string
	Sentence string
	Back     string
}

// renderError writes an error page whose heading names the status.
func renderError(w http.ResponseWriter, code int, sentence string) {
	renderErrorPage(w, code, http.StatusText(code), sentence, "")
}

func renderErrorPage(w http.ResponseWriter, code int, heading, sentence, back string) {
	nonce := newNonce()
	render(w, code, "error", nonce, errorPage{pageBase: pageBase{Title: heading, Nonce: nonce}, Heading: heading, Sentence: sentence, Back: back})
}
