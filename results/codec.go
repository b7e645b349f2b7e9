package results

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
)

// errUnknownVersion is returned for input written by a newer format.
var errUnknownVersion = errors.New("unknown format version")

type outcomeFields Outcome

type outcomeWire struct {
	V int `json:"v"`
	outcomeFields
}

// header is read leniently when the strict decode fails, so that input
// from a newer writer is reported as what it is (a newer version, an
// unknown kind or state) rather than as an unknown field of the body that
// came with it.
type header struct {
	V     int   `json:"v"`
	Kind  Kind  `json:"kind"`
	State State `json:"state"`
}

func readHeader(data []byte) (header, error) {
	var h header
	if err := decodeOne(data, &h, false); err != nil {
		return h, err
	}
	return h, checkVersion(h.V)
}

// MarshalJSON writes the versioned encoding. It refuses a malformed
// outcome rather than write something no decoder accepts.
func (o Outcome) MarshalJSON() ([]byte, error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("encode outcome: %w", err)
	}
	return json.Marshal(outcomeWire{V: formatVersion, outcomeFields: outcomeFields(o)})
}

// UnmarshalJSON reads the versioned encoding and validates it: an unknown
// kind or a body that does not match the kind is an error, never a zero
// value. The result is canonical (compact raw JSON, nil for empty lists),
// so decoding what MarshalJSON wrote gives back an equal value.
func (o *Outcome) UnmarshalJSON(data []byte) error {
	var w outcomeWire
	if err := decodeVersioned(data, &w, func(h header) error { return checkKind(h.Kind) }); err != nil {
		return fmt.Errorf("decode outcome: %w", err)
	}
	if err := checkKind(w.Kind); err != nil {
		return fmt.Errorf("decode outcome: %w", err)
	}
	got := Outcome(w.outcomeFields)
	got.Success.dropUnsafeSources()
	if err := got.Validate(); err != nil {
		return fmt.Errorf("decode outcome: %w", err)
	}
	got.canonicalize()
	*o = got
	return nil
}

type cardFields Card

type cardWire struct {
	V int `json:"v"`
	cardFields
}

// MarshalJSON writes the versioned encoding of a valid card.
func (c Card) MarshalJSON() ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("encode card: %w", err)
	}
	// Validate leaves arguments alone because Render must still answer a
	// call whose arguments the model garbled; encoding them is another
	// matter, and this error says which field is at fault.
	for _, f := range []struct {
		name string
		raw  json.RawMessage
	}{{"arguments", c.Arguments}, {"edited_arguments", c.EditedArguments}} {
		if len(f.raw) > 0 && !json.Valid(f.raw) {
			return nil, fmt.Errorf("encode card: card %s %s are not valid JSON", c.CallID, f.name)
		}
	}
	for i, d := range c.Decisions {
		if len(d.Arguments) > 0 && !json.Valid(d.Arguments) || len(d.Answer) > 0 && !json.Valid(d.Answer) {
			return nil, fmt.Errorf("encode card: card %s decision %d holds invalid JSON", c.CallID, i)
		}
	}
	return json.Marshal(cardWire{V: formatVersion, cardFields: cardFields(c)})
}

// UnmarshalJSON reads and validates the versioned encoding of a card. Like
// Outcome's, the result is canonical.
func (c *Card) UnmarshalJSON(data []byte) error {
	var w cardWire
	if err := decodeVersioned(data, &w, func(h header) error { return checkState(h.State) }); err != nil {
		return fmt.Errorf("decode card: %w", err)
	}
	if err := checkState(w.State); err != nil {
		return fmt.Errorf("decode card: %w", err)
	}
	got := Card(w.cardFields)
	got.Output.dropUnsafeSources()
	if err := got.Validate(); err != nil {
		return fmt.Errorf("decode card: %w", err)
	}
	got.canonicalize()
	*c = got
	return nil
}

func checkVersion(v int) error {
	switch {
	case v == 0:
		return fmt.Errorf("missing format version \"v\"")
	case v < 0 || v > formatVersion:
		return fmt.Errorf("%w %d (this build reads up to %d)", errUnknownVersion, v, formatVersion)
	}
	return nil
}

// versioned is a wire struct that carries the format version.
type versioned interface{ version() int }

func (w *outcomeWire) version() int { return w.V }
func (w *cardWire) version() int    { return w.V }

// decodeVersioned decodes data strictly into w and checks its version.
// Input from a newer writer fails the strict decode on what it added; its
// header, read leniently then, says what it is: a newer version, or what
// check refuses (an unknown kind or state). Reading the header only then
// keeps the common case to one decode: every workflow task that takes a
// tool's result decodes an outcome.
func decodeVersioned(data []byte, w versioned, check func(header) error) error {
	if err := decodeOne(data, w, true); err != nil {
		h, herr := readHeader(data)
		if herr != nil {
			return herr
		}
		if cerr := check(h); cerr != nil {
			return cerr
		}
		return err
	}
	return checkVersion(w.version())
}

// checkKind refuses a kind this build does not know; an absent kind is
// for Validate to refuse.
func checkKind(kind Kind) error {
	if kind != "" && !slices.Contains(kinds, kind) {
		return fmt.Errorf("unknown outcome kind %q", kind)
	}
	return nil
}

// checkState is checkKind for a card's state.
func checkState(state State) error {
	if state != "" && !slices.Contains(states, state) {
		return fmt.Errorf("unknown card state %q", state)
	}
	return nil
}

// decodeOne decodes the single JSON value in data. Strict mode rejects
// unknown fields so that a typo or a field from a newer writer is noticed
// rather than silently dropped.
func decodeOne(data []byte, v any, strict bool) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		if err == io.EOF {
			return fmt.Errorf("no JSON value")
		}
		return err
	}
	// Decoder.More reports false for a stray '}' or ']', so ask for the
	// next token instead: only a clean end of input will do.
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("trailing data after JSON value")
	}
	return nil
}

// canonicalRaw is what encoding/json writes for raw (compact, with HTML
// characters escaped), so that a decoded value survives another round trip
// unchanged.
func canonicalRaw(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return raw
	}
	return b
}

// nilIfEmpty drops the difference between an absent list and an empty
// one, which omitempty does not preserve.
func nilIfEmpty[S ~[]E, E any](s S) S {
	if len(s) == 0 {
		return nil
	}
	return s
}

func (o *Outcome) canonicalize() {
	if o.Success != nil {
		o.Success.canonicalize()
	}
	if o.Interrupt != nil {
		o.Interrupt.canonicalize()
	}
	if o.Connection != nil {
		o.Connection.Scopes = nilIfEmpty(o.Connection.Scopes)
	}
}

func (s *Success) canonicalize() {
	s.Parts = nilIfEmpty(s.Parts)
	for i := range s.Parts {
		s.Parts[i].Data = nilIfEmpty(s.Parts[i].Data)
		s.Parts[i].JSON = canonicalRaw(s.Parts[i].JSON)
	}
	s.Sources = nilIfEmpty(s.Sources)
	s.Diffs = nilIfEmpty(s.Diffs)
	s.Details = canonicalRaw(s.Details)
}

func (i *Interrupt) canonicalize() {
	i.Options = nilIfEmpty(i.Options)
	i.Schema = canonicalRaw(i.Schema)
}

func (c *Card) canonicalize() {
	c.Arguments = canonicalRaw(c.Arguments)
	// "arguments" has no omitempty, so absent arguments are written as
	// null; read null back as absent.
	if string(c.Arguments) == "null" {
		c.Arguments = nil
	}
	c.EditedArguments = canonicalRaw(c.EditedArguments)
	if c.Interrupt != nil {
		c.Interrupt.canonicalize()
	}
	if c.Connection != nil {
		c.Connection.Scopes = nilIfEmpty(c.Connection.Scopes)
	}
	if c.Output != nil {
		c.Output.canonicalize()
	}
	c.Preview = nilIfEmpty(c.Preview)
	c.Decisions = nilIfEmpty(c.Decisions)
	for i := range c.Decisions {
		d := &c.Decisions[i]
		// Decision times are workflow time, which is UTC; a decoded
		// offset would otherwise come back as a different Location.
		d.At = d.At.UTC()
		d.Arguments = canonicalRaw(d.Arguments)
		d.Answer = canonicalRaw(d.Answer)
	}
}

// CompactJSON drops the insignificant space from raw, keeping key order
// and number spelling. Empty input is nil; input that is not JSON comes
// back unchanged, so what a model sent can still be shown.
func CompactJSON(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return raw
	}
	return buf.Bytes()
}
