package builtin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/tollgate-dev/tollgate/results"
	"github.com/tollgate-dev/tollgate/tool"
)

const userAgent = "Tollgate/1 (http_fetch)"

type httpFetchArgs struct {
	URL string `json:"url" jsonschema:"http or https URL to GET"`
}

func httpFetchTool(opts Options) (tool.Tool, error) {
	return newHTTPFetchTool(opts, nil)
}

// newHTTPFetchTool takes the resolver separately so tests can make a name
// resolve to an internal address; nil is the system's.
func newHTTPFetchTool(opts Options, resolver *net.Resolver) (tool.Tool, error) {
	guard, err := newFetchGuard(opts.FetchAllow)
	if err != nil {
		return nil, err
	}
	if opts.HTTPClient, err = guard.client(opts.HTTPClient, resolver); err != nil {
		return nil, err
	}
	return tool.Func(tool.Spec{
		Name:        HTTPFetch,
		Description: fmt.Sprintf("Fetch a web page or document over http(s) with GET. HTML comes back as plain text with its title; the URL is listed as a source to cite. At most %d bytes are read. Only public internet addresses can be reached unless the operator allowed more; loopback, private and link-local addresses are refused.", opts.MaxFetchBytes),
		Idempotent:  true,
		Concurrent:  true,
		Timeout:     opts.FetchTimeout + timeoutGrace,
	}, func(ctx context.Context, call tool.Call, args httpFetchArgs) (results.Outcome, error) {
		u, err := url.Parse(args.URL)
		switch {
		case err != nil:
			return results.FailTool("url %q is not a valid URL: %v", args.URL, err), nil
		case u.Scheme != "http" && u.Scheme != "https":
			return results.FailTool("url %q has scheme %q; only http and https can be fetched", args.URL, u.Scheme), nil
		case u.Hostname() == "":
			return results.FailTool("url %q has no host", args.URL), nil
		}
		if err := guard.checkURL(u); err != nil {
			return results.FailTool("%s", err.Error()), nil
		}
		return fetch(ctx, opts, u)
	})
}

func fetch(ctx context.Context, opts Options, u *url.URL) (results.Outcome, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.FetchTimeout)
	defer cancel()
	trail := &redirectTrail{}
	req, err := http.NewRequestWithContext(context.WithValue(ctx, redirectTrailKey{}, trail), http.MethodGet, u.String(), nil)
	if err != nil {
		return results.FailTool("cannot build a request for %s: %v", u, err), nil
	}
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set("Accept", "text/html, text/plain, application/json, */*;q=0.5")
	resp, err := opts.HTTPClient.Do(req)
	if err != nil {
		var refused *refusedError
		if errors.As(err, &refused) {
			// Refusals are policy, not weather: retrying cannot help.
			if to := cmp.Or(refused.redirect, trail.last); to != "" {
				return results.FailTool("GET %s was redirected to %s, and %s", u, to, refused.Error()), nil
			}
			return results.FailTool("%s", refused.Error()), nil
		}
		if errors.Is(err, errTooManyRedirects) {
			return results.FailTool("GET %s: %v", u, errTooManyRedirects), nil
		}
		var dnsErr *net.DNSError
		if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
			return results.FailTool("GET %s: host %s does not exist", u, dnsErr.Name), nil
		}
		// Anything else (refused, reset, timed out) may pass; let the
		// activity retry it.
		return results.Outcome{}, tool.Retryable(fmt.Errorf("GET %s: %w", u, err))
	}
	defer resp.Body.Close()

	body, err := io.ReadAll(io.LimitReader(resp.Body, opts.MaxFetchBytes+1))
	if err != nil {
		return results.Outcome{}, tool.Retryable(fmt.Errorf("GET %s: read body: %w", u, err))
	}
	truncated := int64(len(body)) > opts.MaxFetchBytes
	if truncated {
		body = body[:opts.MaxFetchBytes]
	}
	final := resp.Request.URL.String()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		snippet := strings.TrimSpace(htmlToText(string(body[:min(len(body), 4096)])))
		snippet, _ = results.Truncate(snippet, results.Limits{MaxBytes: 500})
		msg := fmt.Sprintf("GET %s: HTTP %s", final, resp.Status)
		if snippet != "" {
			msg += "\n" + snippet
		}
		return results.FailTool("%s", msg), nil
	}

	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mediaType == "" {
		mediaType, _, _ = mime.ParseMediaType(http.DetectContentType(body))
	}
	if img := imageType(body); img != "" && !truncated {
		return results.Succeed(
			results.TextPart(fmt.Sprintf("%s (%s, %d bytes)", final, img, len(body))),
			results.MediaPart(img, body),
		).WithSources(results.Source{URL: final}), nil
	}
	if !textual(mediaType) || isBinary(body) {
		return results.FailTool("GET %s: content type %s is not text; http_fetch returns text, HTML, JSON and images", final, mediaType), nil
	}

	text, title := string(body), ""
	if mediaType == "text/html" || mediaType == "application/xhtml+xml" {
		title = htmlTitle(text)
		text = htmlToText(text)
	}
	text = strings.ToValidUTF8(text, "\uFFFD")
	if truncated {
		text += fmt.Sprintf("\n[stopped after %d bytes of the response]", opts.MaxFetchBytes)
	}
	return results.SucceedText(text).WithSources(results.Source{URL: final, Title: title}), nil
}

func textual(mediaType string) bool {
	switch {
	case strings.HasPrefix(mediaType, "text/"),
		strings.HasSuffix(mediaType, "+json"), strings.HasSuffix(mediaType, "+xml"):
		return true
	}
	switch mediaType {
	case "application/json", "application/xml", "application/javascript", "application/x-yaml", "application/yaml", "application/xhtml+xml":
		return true
	}
	return false
}

var (
	titleRe    = regexp.MustCompile(`(?is)<title[^>]*>(.*?)</title>`)
	dropRe     = regexp.MustCompile(`(?is)<(script|style|noscript|template|svg|head)\b.*?</(script|style|noscript|template|svg|head)\s*>|<!--.*?-->`)
	blockRe    = regexp.MustCompile(`(?i)<(br|/p|/div|/li|/tr|/h[1-6]|/pre|/blockquote|/section|/article|/header|/footer|/table|hr)\b[^>]*>`)
	tagRe      = regexp.MustCompile(`(?s)<[^>]*>`)
	spacesRe   = regexp.MustCompile(`[ \t\r\f\v]+`)
	newlinesRe = regexp.MustCompile(`\n\s*\n\s*(\n\s*)+`)
)

func htmlTitle(doc string) string {
	m := titleRe.FindStringSubmatch(doc)
	if m == nil {
		return ""
	}
	return strings.Join(strings.Fields(html.UnescapeString(m[1])), " ")
}

// htmlToText is deliberately crude: it keeps the words and rough line
// structure a model needs, not the layout.
func htmlToText(doc string) string {
	s := dropRe.ReplaceAllString(doc, "")
	s = blockRe.ReplaceAllString(s, "\n")
	s = tagRe.ReplaceAllString(s, "")
	s = html.UnescapeString(s)
	s = spacesRe.ReplaceAllString(s, " ")
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	s = newlinesRe.ReplaceAllString(strings.Join(lines, "\n"), "\n\n")
	return strings.TrimSpace(s)
}
