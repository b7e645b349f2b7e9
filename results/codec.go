package results

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// ErrUnknownVersion is returned for input written by a newer format.
var ErrUnknownVersion = errors.New("unknown format version")

type outcomeFields Outcome

type outcomeWire struct {
	V int `json:"v"`
	outcomeFields
}

// MarshalJSON writes the versioned encoding. It refuses a malformed
// outcome rather than write something no decoder accepts.
func (o Outcome) MarshalJSON() ([]byte, error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("encode outcome: %w", err)
	}
	return json.Marshal(outcomeWire{V: FormatVersion, outcomeFields: outcomeFields(o)})
}

// UnmarshalJSON reads the versioned encoding and validates it: an unknown
// kind or a body that does not match the kind is an error, never a zero
// value.
func (o *Outcome) UnmarshalJSON(data []byte) error {
	var w outcomeWire
	if err := strictUnmarshal(data, &w); err != nil {
		return fmt.Errorf("decode outcome: %w", err)
	}
	if err := checkVersion(w.V); err != nil {
		return fmt.Errorf("decode outcome: %w", err)
	}
	got := Outcome(w.outcomeFields)
	if err := got.Validate(); err != nil {
		return fmt.Errorf("decode outcome: %w", err)
	}
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
	return json.Marshal(cardWire{V: FormatVersion, cardFields: cardFields(c)})
}

// UnmarshalJSON reads and validates the versioned encoding of a card.
func (c *Card) UnmarshalJSON(data []byte) error {
	var w cardWire
	if err := strictUnmarshal(data, &w); err != nil {
		return fmt.Errorf("decode card: %w", err)
	}
	if err := checkVersion(w.V); err != nil {
		return fmt.Errorf("decode card: %w", err)
	}
	got := Card(w.cardFields)
	if err := got.Validate(); err != nil {
		return fmt.Errorf("decode card: %w", err)
	}
	*c = got
	return nil
}

func checkVersion(v int) error {
	switch {
	case v == 0:
		return fmt.Errorf("missing format version \"v\"")
	case v < 0 || v > FormatVersion:
		return fmt.Errorf("%w %d (this build reads up to %d)", ErrUnknownVersion, v, FormatVersion)
	}
	return nil
}

// strictUnmarshal rejects unknown fields so that a typo or a field from a
// newer writer is noticed rather than silently dropped.
func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data after JSON value")
	}
	return nil
}
