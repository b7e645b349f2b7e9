// Package grants holds remembered approvals: a person who approves a
// call may ask that the same tool (or the same tool with the same
// arguments) run without asking again, for the rest of a session or for
// the turn's user. The workflow side (the per-user GrantsWorkflow and the
// turn's lookup) is in package workflows; this package holds the types,
// the canonical argument hash, the fingerprints and the matching rules,
// with no Temporal dependency.
package grants

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/results"
)

// Scope says for how long a grant holds.
type Scope string

const (
	// ScopeSession holds for the turns of one session.
	ScopeSession Scope = "session"
	// ScopeUser holds for every turn of the user.
	ScopeUser Scope = "user"
)

// ParseScope reads a respond payload's remember value.
func ParseScope(s string) (Scope, error) {
	switch Scope(s) {
	case ScopeSession, ScopeUser:
		return Scope(s), nil
	}
	return "", fmt.Errorf("remember %q is not one of session, user", s)
}

// MaxPerUser bounds the grants one user holds, invalidated ones
// included: the list travels in every lookup and listing.
const MaxPerUser = 256

// Grant is one remembered approval.
type Grant struct {
	ID    string `json:"id"`
	User  string `json:"user"`
	Scope Scope  `json:"scope"`
	// Session is the session a session grant holds for.
	Session string `json:"session,omitempty"`
	Tool    string `json:"tool"`
	// ArgsHash, when set, limits the grant to calls whose arguments
	// hash to it (ArgsHash): the approved arguments, nothing else.
	ArgsHash string `json:"args_hash,omitempty"`
	// ToolFingerprint and ConnectionFingerprint are the tool's
	// definition and the user's connection for it when the grant was
	// made; a grant applies only while both are the same.
	ToolFingerprint       string `json:"tool_fingerprint"`
	ConnectionFingerprint string `json:"connection_fingerprint,omitempty"`
	// By approved the call the grant was made from, At when; Turn and
	// Call name that call.
	By   string    `json:"by,omitempty"`
	At   time.Time `json:"at"`
	Turn string    `json:"turn"`
	Call string    `json:"call"`
	// Invalidated says why the grant no longer applies (the tool or the
	// connection changed), when it does not; such a grant is kept,
	// listed, until someone revokes it or room is needed.
	Invalidated   string     `json:"invalidated,omitempty"`
	InvalidatedAt *time.Time `json:"invalidated_at,omitempty"`
}

// Valid checks a grant before it is stored.
func (g Grant) Valid() error {
	switch {
	case g.ID == "":
		return fmt.Errorf("the grant has no id")
	case g.User == "":
		return fmt.Errorf("the grant has no user")
	case g.Tool == "":
		return fmt.Errorf("the grant names no tool")
	case g.ToolFingerprint == "":
		return fmt.Errorf("the grant has no tool fingerprint")
	}
	if _, err := ParseScope(string(g.Scope)); err != nil {
		return err
	}
	if g.Scope == ScopeSession && g.Session == "" {
		return fmt.Errorf("a session grant names no session")
	}
	return nil
}

// Call is what a lookup asks about one call.
type Call struct {
	Tool     string `json:"tool"`
	ArgsHash string `json:"args_hash"`
	// ToolFingerprint and ConnectionFingerprint are the current ones.
	ToolFingerprint       string `json:"tool_fingerprint"`
	ConnectionFingerprint string `json:"connection_fingerprint,omitempty"`
}

// UseOf is what a call's card says of g, the grant that let it run.
func UseOf(g Grant) *results.GrantUse {
	return &results.GrantUse{ID: g.ID, Scope: string(g.Scope), By: g.By, At: g.At, Args: g.ArgsHash != "", Session: g.Session}
}

// Match finds the grant among gs that lets call c of session run: same
// tool, scope user or this session, arguments matching where the grant
// names them, fingerprints unchanged, not invalidated. stale are the
// grants that would have matched but for a changed fingerprint, with
// why. Among several matches the one limited to arguments wins, then the
// oldest: the narrowest, longest-standing approval.
func Match(gs []Grant, session string, c Call) (found *Grant, stale []Invalidation) {
	for i := range gs {
		g := &gs[i]
		if g.Tool != c.Tool || g.Invalidated != "" {
			continue
		}
		if g.Scope == ScopeSession && (session == "" || g.Session != session) {
			continue
		}
		if g.ArgsHash != "" && g.ArgsHash != c.ArgsHash {
			continue
		}
		if why := g.changed(c); why != "" {
			stale = append(stale, Invalidation{ID: g.ID, Reason: why})
			continue
		}
		if found == nil || (found.ArgsHash == "" && g.ArgsHash != "") {
			found = g
		}
	}
	return found, stale
}

func (g Grant) changed(c Call) string {
	if g.ToolFingerprint != c.ToolFingerprint {
		return fmt.Sprintf("tool %s changed its definition since the grant was made", g.Tool)
	}
	if g.ConnectionFingerprint != c.ConnectionFingerprint {
		return fmt.Sprintf("the user's connection for tool %s changed since the grant was made", g.Tool)
	}
	return ""
}

// Invalidation marks a grant that no longer applies.
type Invalidation struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

// Add adds g to gs, or returns gs unchanged if a grant with its id is
// there already (adding is retried). A full list makes room by dropping
// its oldest invalidated grant; with none, it is an error.
func Add(gs []Grant, g Grant) ([]Grant, error) {
	if err := g.Valid(); err != nil {
		return gs, err
	}
	if slices.ContainsFunc(gs, func(o Grant) bool { return o.ID == g.ID }) {
		return gs, nil
	}
	if len(gs) >= MaxPerUser {
		i := slices.IndexFunc(gs, func(o Grant) bool { return o.Invalidated != "" })
		if i < 0 {
			return gs, fmt.Errorf("user %s already has %d remembered grants, the most kept; revoke some (starter grants revoke, or DELETE /v1/grants/{id})", g.User, MaxPerUser)
		}
		gs = slices.Delete(gs, i, i+1)
	}
	return append(gs, g), nil
}

// ArgsHash is the canonical hash of a call's arguments: the SHA-256 of
// their JSON with object keys sorted, whitespace dropped and numbers as
// written, so the same arguments hash the same however the model spaced
// or ordered them.
func ArgsHash(args json.RawMessage) (string, error) {
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage(`{}`)
	}
	var b bytes.Buffer
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", fmt.Errorf("the arguments are not JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", fmt.Errorf("the arguments hold more than one JSON value")
	}
	if err := canonical(&b, v); err != nil {
		return "", err
	}
	return hash(b.Bytes()), nil
}

func canonical(b *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		//workflowcheck:ignore keys are sorted before use
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			kb, _ := json.Marshal(k)
			b.Write(kb)
			b.WriteByte(':')
			if err := canonical(b, x[k]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := canonical(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	default:
		eb, err := json.Marshal(x)
		if err != nil {
			return fmt.Errorf("the arguments hold a value that cannot be written back: %w", err)
		}
		b.Write(eb)
	}
	return nil
}

// ToolFingerprint fingerprints a tool's definition as the model and
// people see it: its name, description and argument schema (an MCP
// server that changes a tool through tools/list_changed changes it).
func ToolFingerprint(name, description string, schema json.RawMessage) string {
	s, err := ArgsHash(schema)
	if err != nil {
		s = hash(schema)
	}
	return hash([]byte(strings.Join([]string{name, description, s}, "\x00")))
}

// ConnectionFingerprint fingerprints the user's connection to provider
// as of when it was made: connecting again (another account, other
// scopes) or disconnecting changes it; a token refresh does not.
// connected false is the fingerprint of no connection.
func ConnectionFingerprint(provider string, connected bool, created time.Time, scopes []string) string {
	if provider == "" {
		return ""
	}
	if !connected {
		return hash([]byte(provider + "\x00none"))
	}
	sorted := slices.Clone(scopes)
	sort.Strings(sorted)
	return hash([]byte(strings.Join([]string{provider, created.UTC().Format(time.RFC3339Nano), strings.Join(sorted, " ")}, "\x00")))
}

// ID is a grant's id, derived from the call it was made from, so that
// storing it again (a retried activity) stores the same grant.
func ID(turn, call string) string {
	return "g-" + hash([]byte(turn + "\x00" + call))[:20]
}

func hash(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
