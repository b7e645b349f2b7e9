package mcp

import (
	"encoding/json"
	"fmt"
	"strings"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate-dev/tollgate/results"
)

const (
	maxErrorBytes  = 4 << 10
	maxTitleBytes  = 256
	maxSourceBytes = 2 << 10
	maxContent     = 1000
)

// toOutcome maps a tools/call result onto Tollgate's outcome: content
// blocks become parts (text, media) and sources (resource links, the
// URIs of embedded resources), structured content becomes details (and
// a JSON part when it is all the server sent), isError a tool error.
// Everything here came from the server: RunTool truncates the parts for
// the model, and the transport bounded the bytes.
func toOutcome(server string, res *mcpsdk.CallToolResult) (results.Outcome, error) {
	if res == nil {
		return results.Outcome{}, fmt.Errorf("mcp %s: the server sent no result", server)
	}
	if len(res.Content) > maxContent {
		return results.Outcome{}, fmt.Errorf("mcp %s: the result has %d content blocks; at most %d are taken", server, len(res.Content), maxContent)
	}
	if res.IsError {
		return results.FailTool("%s", errorText(res)), nil
	}
	var parts []results.Part
	var sources []results.Source
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcpsdk.TextContent:
			parts = append(parts, results.TextPart(c.Text))
		case *mcpsdk.ImageContent:
			parts = append(parts, results.MediaPart(mediaType(c.MIMEType), c.Data))
		case *mcpsdk.AudioContent:
			parts = append(parts, results.MediaPart(mediaType(c.MIMEType), c.Data))
		case *mcpsdk.ResourceLink:
			title := firstOf(c.Title, c.Name)
			if src, ok := source(c.URI, title); ok {
				sources = append(sources, src)
			} else if text := linkText(c.URI, title); text != "" {
				parts = append(parts, results.TextPart(text))
			}
		case *mcpsdk.EmbeddedResource:
			r := c.Resource
			if r == nil {
				continue
			}
			switch {
			case r.Text != "":
				parts = append(parts, results.TextPart(r.Text))
			case len(r.Blob) > 0:
				parts = append(parts, results.MediaPart(mediaType(r.MIMEType), r.Blob))
			}
			if src, ok := source(r.URI, ""); ok {
				sources = append(sources, src)
			}
		default:
			// Tool-use blocks belong to sampling, not to tool results.
			parts = append(parts, results.TextPart(fmt.Sprintf("[a %T content block was left out]", c)))
		}
	}
	out := results.Succeed(parts...).WithSources(sources...)
	if res.StructuredContent != nil {
		details, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return results.Outcome{}, fmt.Errorf("mcp %s: encode structured content: %w", server, err)
		}
		if len(res.Content) == 0 {
			// Details are for people; a server that sent only structured
			// content must still be heard by the model.
			out = results.Succeed(results.JSONPart(details))
		}
		out = out.WithDetails(details)
	}
	return out, nil
}

// errorText is what the model reads of a tool's own error: its text
// blocks, bounded.
func errorText(res *mcpsdk.CallToolResult) string {
	var texts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcpsdk.TextContent); ok && strings.TrimSpace(t.Text) != "" {
			texts = append(texts, t.Text)
		}
	}
	if len(texts) == 0 {
		return "the tool reported an error without a message"
	}
	msg, _ := results.Truncate(strings.Join(texts, "\n"), results.Limits{MaxBytes: maxErrorBytes})
	return msg
}

func mediaType(t string) string {
	if t == "" || len(t) > 255 || strings.ContainsAny(t, "\r\n") {
		return "application/octet-stream"
	}
	return t
}

// source makes a citation of a URI the server named, if it is one a
// person could follow from a card: a bounded http(s) URL (results'
// rule). A file:, javascript: or data: URI is none.
func source(uri, title string) (results.Source, bool) {
	src := results.Source{URL: uri, Title: oneLine(title, maxTitleBytes)}
	if len(uri) > maxSourceBytes || src.Validate() != nil {
		return results.Source{}, false
	}
	return src, true
}

// linkText is a resource link that is not a source, as text for the
// model: the server's resources are often file: or custom URIs the model
// can name to the server, and the block would otherwise be lost. It is
// never a link anyone can click.
func linkText(uri, title string) string {
	uri = oneLine(uri, maxSourceBytes)
	if uri == "" {
		return ""
	}
	if title = oneLine(title, maxTitleBytes); title != "" {
		return fmt.Sprintf("[resource link %q: %s]", title, uri)
	}
	return fmt.Sprintf("[resource link: %s]", uri)
}

// oneLine is server text cleaned to one line of at most max bytes.
func oneLine(s string, max int) string {
	return clean(strings.NewReplacer("\r", " ", "\n", " ").Replace(s), max)
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
