// Package apikey holds the gateway's API keys: who a key speaks for (its
// principal), what it may do (scopes, optionally limited to some tools),
// and the file they are kept in. Only a key's SHA-256 hash is stored; the
// key itself is shown once, when it is made.
//
// The keys file is JSON:
//
//	{"keys": [
//	  {"principal": "ops", "sha256": "9f86d0…", "scopes": ["read", "respond"]},
//	  {"principal": "ci", "sha256": "60303a…", "scopes": ["respond"], "tools": ["write_file"]},
//	  {"principal": "helpdesk", "sha256": "b5bb9d…", "scopes": ["read", "respond", "start"], "users": ["ann", "bob"]}
//	]}
//
// "users", when present, limits the key to the turns of those users: it
// lists, reads, answers and starts only theirs, and every other turn is,
// for it, a turn that does not exist. Entries without it reach every
// user's turns, as before the field existed.
//
// A principal may hold several keys (to rotate one, add the new key, then
// delete the old entry). A Set loaded from a file notices when the file
// changes, so keys added or removed take effect without a restart.
package apikey

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// Scope is one thing a key may do.
type Scope string

const (
	// Read lists turns, reads their state, and opens the inbox.
	Read Scope = "read"
	// Respond answers waiting calls (approve, deny, answer, ...).
	Respond Scope = "respond"
	// Start starts turns.
	Start Scope = "start"
	// Rerun lets a start re-use the id of a closed turn, when it asks to
	// ("rerun": true). Without it an id names one turn, ever.
	Rerun Scope = "rerun"
	// History lets a start set head, messages or workspace: they load a
	// stored conversation or a workspace, which may be another user's.
	History Scope = "history"
	// Operate lets an operator re-evaluate a turn's waiting calls under
	// the workers' current approval rules: it can release calls nobody
	// approved, so no other scope implies it.
	Operate Scope = "operate"
)

// Scopes lists every scope, in the order help texts name them.
var Scopes = []Scope{Read, Respond, Start, Rerun, History, Operate}

// Prefix starts every key, so a leaked one is recognisable in logs and
// by secret scanners.
const Prefix = "tg_"

// keyBytes of randomness make a key: 256 bits, beyond guessing.
const keyBytes = 32

// maxKeyLen bounds what Lookup hashes; a real key is 46 bytes.
const maxKeyLen = 256

// principalPattern keeps principals printable and short: they become the
// `by` of decisions and part of Update ids.
var principalPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}$`)

// Entry is one key as the file holds it.
type Entry struct {
	Principal string `json:"principal"`
	// SHA256 is the hex SHA-256 of the key.
	SHA256 string  `json:"sha256"`
	Scopes []Scope `json:"scopes"`
	// Tools, when set, limit Respond to calls of these tools.
	Tools []string `json:"tools,omitempty"`
	// Users, when set, limit the key to the turns of these users (the
	// turn's user, TollgateUser): it sees, answers and starts only theirs.
	Users []string `json:"users,omitempty"`
	// Groups are the groups the key's principal belongs to: a call an
	// approval rule leaves to a group (docs/approvals.md) takes approve
	// and deny only from keys of its members. The gateway passes them to
	// the turn with the principal; a respond body cannot set either.
	Groups []string `json:"groups,omitempty"`
	// Created is informational: when `gateway keys add` made the key.
	Created time.Time `json:"created,omitzero"`
}

// Has reports whether the key carries scope s.
func (e Entry) Has(s Scope) bool { return slices.Contains(e.Scopes, s) }

// MayAnswer reports whether the key's tool limit lets it answer a call of
// tool.
func (e Entry) MayAnswer(tool string) bool {
	return len(e.Tools) == 0 || slices.Contains(e.Tools, tool)
}

// Limited reports whether the key reaches only some users' turns.
func (e Entry) Limited() bool { return len(e.Users) > 0 }

// Reaches reports whether the key may see and act on a turn of user. A
// limited key reaches no turn without a user.
func (e Entry) Reaches(user string) bool {
	return !e.Limited() || (user != "" && slices.Contains(e.Users, user))
}

// maxUserLen bounds the names in Users. It stays under the 256 bytes the
// workflow clips TollgateUser to, so a clipped long name never equals one.
const maxUserLen = 200

// Validate reports the first thing wrong with e, as a sentence.
func (e Entry) Validate() error {
	if !principalPattern.MatchString(e.Principal) {
		return fmt.Errorf("principal %q must be 1 to 64 letters, digits or ._@+- and start with a letter or digit", e.Principal)
	}
	if b, err := hex.DecodeString(e.SHA256); err != nil || len(b) != sha256.Size {
		return fmt.Errorf("key of %s: sha256 must be 64 hex digits", e.Principal)
	}
	if len(e.Scopes) == 0 {
		return fmt.Errorf("key of %s has no scopes (use %s)", e.Principal, scopeList())
	}
	for _, s := range e.Scopes {
		if !slices.Contains(Scopes, s) {
			return fmt.Errorf("key of %s: unknown scope %q (use %s)", e.Principal, s, scopeList())
		}
	}
	for _, t := range e.Tools {
		if strings.TrimSpace(t) == "" || t != strings.TrimSpace(t) {
			return fmt.Errorf("key of %s: tool names must be non-empty and without spaces around them", e.Principal)
		}
	}
	if e.Users != nil && len(e.Users) == 0 {
		// An empty list would read as "no limit": say what was meant.
		return fmt.Errorf("key of %s: users is empty; leave it out to reach every user's turns, or name the users", e.Principal)
	}
	for _, u := range e.Users {
		if err := checkUser(u); err != nil {
			return fmt.Errorf("key of %s: user %q %w", e.Principal, u, err)
		}
	}
	for _, g := range e.Groups {
		if !principalPattern.MatchString(g) {
			return fmt.Errorf("key of %s: group %q must be 1 to 64 letters, digits or ._@+- and start with a letter or digit", e.Principal, g)
		}
	}
	return nil
}

// checkUser keeps user names fit for a visibility query literal and for
// comparing with TollgateUser.
func checkUser(u string) error {
	switch {
	case u == "" || u != strings.TrimSpace(u):
		return errors.New("must be non-empty and without spaces around it")
	case len(u) > maxUserLen || !utf8.ValidString(u):
		return fmt.Errorf("must be UTF-8 of at most %d bytes", maxUserLen)
	case strings.ContainsAny(u, "'\"\\`") || strings.ContainsFunc(u, unicode.IsControl):
		return errors.New("must not contain quotes, backslashes or control characters")
	}
	return nil
}

func scopeList() string {
	s := make([]string, len(Scopes))
	for i, sc := range Scopes {
		s[i] = string(sc)
	}
	return strings.Join(s, ", ")
}

// ParseScopes reads a comma-separated scope list ("read,respond").
func ParseScopes(s string) ([]Scope, error) {
	var out []Scope
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		sc := Scope(part)
		if !slices.Contains(Scopes, sc) {
			return nil, fmt.Errorf("unknown scope %q (use %s)", part, scopeList())
		}
		if !slices.Contains(out, sc) {
			out = append(out, sc)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no scopes given (use %s)", scopeList())
	}
	return out, nil
}

// Hash is the hex SHA-256 of key, what the file stores.
func Hash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// New makes a key for principal and its entry. The key is returned only
// here; the entry holds its hash.
func New(principal string, scopes []Scope, tools []string) (key string, e Entry, err error) {
	return NewLimited(principal, scopes, Limits{Tools: tools})
}

// Limits narrow what a new key reaches: the tools whose calls it may
// answer and the users whose turns it may see and act on (empty: all).
type Limits struct {
	Tools []string
	Users []string
	// Groups are not limits but memberships: see Entry.Groups.
	Groups []string
}

// NewLimited is New with the key's limits.
func NewLimited(principal string, scopes []Scope, l Limits) (key string, e Entry, err error) {
	b := make([]byte, keyBytes)
	if _, err := rand.Read(b); err != nil {
		return "", Entry{}, fmt.Errorf("read randomness for a key: %w", err)
	}
	key = Prefix + base64.RawURLEncoding.EncodeToString(b)
	e = Entry{Principal: principal, SHA256: Hash(key), Scopes: scopes, Tools: l.Tools, Users: l.Users, Groups: l.Groups, Created: time.Now().UTC().Truncate(time.Second)}
	if err := e.Validate(); err != nil {
		return "", Entry{}, err
	}
	return key, e, nil
}

// file is the keys file's shape.
type file struct {
	Keys []Entry `json:"keys"`
}

// Parse reads a keys file's content.
func Parse(data []byte) ([]Entry, error) {
	var f file
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("keys file is not {\"keys\": [...]} JSON: %w", err)
	}
	for i, e := range f.Keys {
		if err := e.Validate(); err != nil {
			return nil, fmt.Errorf("key %d: %w", i+1, err)
		}
	}
	return f.Keys, nil
}

// Set is a set of keys to authenticate against. It is safe for concurrent
// use.
type Set struct {
	mu      sync.Mutex
	entries []entry
	// path, when set, is the file the set reloads from when it changes.
	path    string
	stamp   fileStamp
	checked time.Time
	logger  *slog.Logger
}

type entry struct {
	Entry
	sum []byte
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// reloadEvery bounds how often a file-backed Set looks at its file.
const reloadEvery = time.Second

// NewSet is a set holding entries, in memory.
func NewSet(entries ...Entry) (*Set, error) {
	es, err := prepare(entries)
	if err != nil {
		return nil, err
	}
	return &Set{entries: es}, nil
}

func prepare(entries []Entry) ([]entry, error) {
	out := make([]entry, 0, len(entries))
	for i, e := range entries {
		if err := e.Validate(); err != nil {
			return nil, fmt.Errorf("key %d: %w", i+1, err)
		}
		sum, _ := hex.DecodeString(e.SHA256)
		out = append(out, entry{Entry: e, sum: sum})
	}
	return out, nil
}

// Load reads the keys file at path. The set rereads it when its size or
// modification time changes (looking at most once a second); a file that
// became unreadable or malformed keeps the keys it had, and says so to
// logger (nil: slog's default).
func Load(path string, logger *slog.Logger) (*Set, error) {
	if logger == nil {
		logger = slog.Default()
	}
	s := &Set{path: path, logger: logger}
	es, stamp, err := readFile(path)
	if err != nil {
		return nil, err
	}
	s.entries, s.stamp, s.checked = es, stamp, time.Now()
	return s, nil
}

func readFile(path string) ([]entry, fileStamp, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fileStamp{}, fmt.Errorf("open keys file: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fileStamp{}, fmt.Errorf("stat keys file %s: %w", path, err)
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(f); err != nil {
		return nil, fileStamp{}, fmt.Errorf("read keys file %s: %w", path, err)
	}
	parsed, err := Parse(buf.Bytes())
	if err != nil {
		return nil, fileStamp{}, fmt.Errorf("keys file %s: %w", path, err)
	}
	es, err := prepare(parsed)
	if err != nil {
		return nil, fileStamp{}, fmt.Errorf("keys file %s: %w", path, err)
	}
	return es, fileStamp{mod: info.ModTime(), size: info.Size()}, nil
}

// Add adds an entry to the set in memory (a file-backed set forgets it
// when the file changes).
func (s *Set) Add(e Entry) error {
	es, err := prepare([]Entry{e})
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entries = append(s.entries, es[0])
	return nil
}

// Len is the number of keys in the set.
func (s *Set) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reloadLocked()
	return len(s.entries)
}

// Lookup finds the entry of key. It compares the key's hash with every
// entry in constant time and without stopping at a match, so how long it
// takes says nothing about which keys exist.
func (s *Set) Lookup(key string) (Entry, bool) {
	if key == "" || len(key) > maxKeyLen {
		return Entry{}, false
	}
	sum := sha256.Sum256([]byte(key))
	return s.find(sum[:])
}

// LookupHash finds the entry whose key hashes to sum (hex), for a session
// that remembers which key logged it in: a key removed from the set ends
// its sessions too.
func (s *Set) LookupHash(sum string) (Entry, bool) {
	b, err := hex.DecodeString(sum)
	if err != nil || len(b) != sha256.Size {
		return Entry{}, false
	}
	return s.find(b)
}

func (s *Set) find(sum []byte) (Entry, bool) {
	s.mu.Lock()
	s.reloadLocked()
	entries := s.entries
	s.mu.Unlock()
	found := -1
	for i := range entries {
		if subtle.ConstantTimeCompare(sum, entries[i].sum) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Entry{}, false
	}
	e := entries[found].Entry
	e.Scopes = slices.Clone(e.Scopes)
	e.Tools = slices.Clone(e.Tools)
	e.Users = slices.Clone(e.Users)
	e.Groups = slices.Clone(e.Groups)
	return e, true
}

// reloadLocked rereads the file when it changed; s.mu is held.
func (s *Set) reloadLocked() {
	if s.path == "" || time.Since(s.checked) < reloadEvery {
		return
	}
	s.checked = time.Now()
	info, err := os.Stat(s.path)
	if err != nil {
		s.logger.Warn("Keys file unreadable; keeping the keys loaded before", "path", s.path, "error", err)
		return
	}
	if (fileStamp{mod: info.ModTime(), size: info.Size()}) == s.stamp {
		return
	}
	es, stamp, err := readFile(s.path)
	if err != nil {
		s.logger.Warn("Keys file changed but cannot be used; keeping the keys loaded before", "error", err)
		return
	}
	s.entries, s.stamp = es, stamp
	s.logger.Info("Keys file reloaded", "path", s.path, "keys", len(es))
}

// AddToFile makes a key for principal, appends its entry to the keys file
// at path (creating it, readable by its owner only), and returns the key.
// The file is replaced atomically, so a gateway reading it never sees half
// a file.
func AddToFile(path, principal string, scopes []Scope, l Limits) (string, error) {
	var entries []Entry
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return "", fmt.Errorf("read keys file: %w", err)
	default:
		if entries, err = Parse(data); err != nil {
			return "", fmt.Errorf("keys file %s: %w", path, err)
		}
	}
	key, e, err := NewLimited(principal, scopes, l)
	if err != nil {
		return "", err
	}
	entries = append(entries, e)
	out, err := json.MarshalIndent(file{Keys: entries}, "", "  ")
	if err != nil {
		return "", fmt.Errorf("encode keys file: %w", err)
	}
	out = append(out, '\n')
	if err := writeAtomic(path, out); err != nil {
		return "", err
	}
	return key, nil
}

func writeAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("create a temporary file beside the keys file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("restrict the keys file's permissions: %w", err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write keys file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write keys file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write keys file: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("replace keys file %s: %w", path, err)
	}
	return nil
}
