package tool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// Schema is a compiled JSON Schema. Validation is a pure function of the
// schema and the instance, so workflow code may call it (the respond
// validator checks edited arguments with it).
type Schema struct {
	resolved *jsonschema.Resolved
}

// CompileSchema parses and resolves a JSON Schema document. Remote
// references are refused: a tool's schema must be self-contained.
func CompileSchema(raw json.RawMessage) (*Schema, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage(`{"type":"object"}`)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("parse JSON schema: %w", err)
	}
	r, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("resolve JSON schema: %w", err)
	}
	return &Schema{resolved: r}, nil
}

// Validate checks a JSON document against the schema. The error names the
// offending field.
func (s *Schema) Validate(doc json.RawMessage) error {
	if len(bytes.TrimSpace(doc)) == 0 {
		doc = json.RawMessage(`{}`)
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("arguments are not valid JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("arguments are not valid JSON: more than one value")
	}
	v = fromNumbers(v)
	if err := s.resolved.Validate(v); err != nil {
		return fmt.Errorf("arguments do not match the schema: %s", strings.TrimPrefix(err.Error(), "validating root: "))
	}
	return nil
}

// fromNumbers turns json.Number into float64 so the validator sees the
// types encoding/json would produce, while Decode above still rejected
// anything that is not JSON.
func fromNumbers(v any) any {
	switch t := v.(type) {
	case json.Number:
		f, _ := t.Float64()
		return f
	case map[string]any:
		for k, e := range t {
			t[k] = fromNumbers(e)
		}
	case []any:
		for i, e := range t {
			t[i] = fromNumbers(e)
		}
	}
	return v
}

// SchemaFor generates the JSON Schema of a Go arguments struct. Field
// descriptions come from `jsonschema:"..."` tags.
func SchemaFor[A any]() (json.RawMessage, error) {
	s, err := jsonschema.For[A](nil)
	if err != nil {
		return nil, fmt.Errorf("generate JSON schema: %w", err)
	}
	return json.Marshal(s)
}
