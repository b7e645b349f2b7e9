// Package fakeapi is an HTTP server for provider tests: it records each
// request it is sent and answers with the replies it was given, in order
// (the last one repeats). Tests write the replies from each API's
// reference, so they check the wire format, not the SDK's idea of it.
package fakeapi

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate-dev/tollgate/model"
	"github.com/tollgate-dev/tollgate/results"
)

// Reply is one canned answer. Chunks, when set, are written one at a time
// with a flush between them (a stream); otherwise Body is written whole.
type Reply struct {
	Status      int
	Header      map[string]string
	ContentType string
	Body        string
	Chunks      []string
}

// Request is what the server was sent.
type Request struct {
	Method, Path, Query string
	Header              http.Header
	Body                []byte
}

// JSON decodes the request body.
func (r Request) JSON(t testing.TB) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(r.Body, &v); err != nil {
		t.Fatalf("request body is not JSON: %v: %s", err, r.Body)
	}
	return v
}

// Server is a running fake.
type Server struct {
	*httptest.Server
	mu       sync.Mutex
	replies  []Reply
	requests []Request
}

// New starts a server answering with replies and stops it at the end of t.
func New(t testing.TB, replies ...Reply) *Server {
	t.Helper()
	s := &Server{replies: replies}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: b})
	reply := Reply{Status: http.StatusInternalServerError, Body: `{"error":"no reply configured"}`}
	if len(s.replies) > 0 {
		reply = s.replies[0]
		if len(s.replies) > 1 {
			s.replies = s.replies[1:]
		}
	}
	s.mu.Unlock()
	for k, v := range reply.Header {
		w.Header().Set(k, v)
	}
	ct := reply.ContentType
	if ct == "" {
		ct = "application/json"
	}
	w.Header().Set("Content-Type", ct)
	if reply.Status == 0 {
		reply.Status = http.StatusOK
	}
	w.WriteHeader(reply.Status)
	if len(reply.Chunks) == 0 {
		_, _ = io.WriteString(w, reply.Body)
		return
	}
	f, _ := w.(http.Flusher)
	for _, c := range reply.Chunks {
		_, _ = io.WriteString(w, c)
		if f != nil {
			f.Flush()
		}
	}
}

// Requests returns every request so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Last returns the latest request; the test fails when there is none.
func (s *Server) Last(t testing.TB) Request {
	t.Helper()
	rs := s.Requests()
	if len(rs) == 0 {
		t.Fatal("the fake server received no request")
	}
	return rs[len(rs)-1]
}

// SSE frames events as Server-Sent Events: one "event:" line when the
// name is not empty, one "data:" line, a blank line.
func SSE(events ...[2]string) []string {
	out := make([]string, len(events))
	for i, e := range events {
		s := ""
		if e[0] != "" {
			s = "event: " + e[0] + "\n"
		}
		// A multi-line payload becomes several data lines, which the
		// reader joins with newlines again.
		out[i] = s + "data: " + strings.ReplaceAll(e[1], "\n", "\ndata: ") + "\n\n"
	}
	return out
}

// PNG stands for an image; providers pass its bytes on untouched.
var PNG = []byte{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 1, 2, 3}

// PNGBase64 is PNG in standard base64, as JSON wire formats carry it.
const PNGBase64 = "iVBORw0KGgoBAgM="

// RefusedType is a media type no provider takes.
const RefusedType = "application/x-tollgate-test"

// Conversation is the step every provider test sends: a user question,
// an assistant message calling two tools at once, and their results:
// call_1 returned text, an image and text (SucceedParts(text, image,
// text)), call_2 text and a media type no provider takes.
func Conversation() []results.Message {
	return []results.Message{
		results.UserText("Show me the chart."),
		{Role: results.RoleAssistant, Parts: []results.Part{results.TextPart("Looking.")}, ToolCalls: []results.ToolCall{
			{ID: "call_1", Name: "screenshot", Arguments: `{"window":"main"}`},
			{ID: "call_2", Name: "fetch", Arguments: `{"url":"https://example.com/a"}`},
		}},
		{Role: results.RoleTool, ToolCallID: "call_1", ToolName: "screenshot", Parts: []results.Part{
			results.TextPart("before the chart"), results.MediaPart("image/png", PNG), results.TextPart("after the chart"),
		}},
		{Role: results.RoleTool, ToolCallID: "call_2", ToolName: "fetch", Parts: []results.Part{
			results.TextPart("the page is attached"), results.MediaPart(RefusedType, []byte("?")),
		}},
	}
}

// Tools are the definitions sent with Conversation.
func Tools() []model.ToolDef {
	return []model.ToolDef{
		{Name: "screenshot", Description: "Capture a window.", Schema: json.RawMessage(`{"type":"object","properties":{"window":{"type":"string"}},"required":["window"]}`)},
		{Name: "fetch", Description: "Fetch a URL.", Schema: json.RawMessage(`{"type":"object","properties":{"url":{"type":"string"}}}`)},
	}
}
