package workflows

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"unicode/utf8"

	"go.temporal.io/sdk/converter"
)

// Updates and Signals are read by hand from their raw payloads rather
// than decoded by the SDK: its decode errors name Go types ("cannot
// unmarshal string into Go value of type workflows.Response"), and by the
// time a payload is decoded, invalid UTF-8 has become U+FFFD and cannot be
// told from a real one.

// payloadKind names a Signal's or Update's payload in sentences, with an
// example of a payload of that kind.
type payloadKind struct {
	name    string
	example string
	// max bounds the payload's JSON, so that a bound holds even for
	// fields the workflow ignores.
	max int
	// fields are checked, in this order, for text that is not UTF-8.
	fields []string
}

var (
	respondPayload = payloadKind{name: "respond", example: `{"call_id": "...", "decision": "approve"}`, max: MaxRespondBytes,
		fields: []string{"call_id", "decision", "reason", "by", "answer", "arguments", "remember"}}
	sendPayload = payloadKind{name: "send", example: `{"text": "...", "by": "..."}`, max: maxSendBytes,
		fields: []string{"text", "by"}}
	endPayload = payloadKind{name: "end", example: `{"by": "...", "reason": "..."}`, max: maxEndBytes,
		fields: []string{"by", "reason"}}
)

// escapedBytes is the most bytes n bytes of a string can take in JSON:
// every byte written as a \u00XX escape.
func escapedBytes(n int) int { return 6 * n }

// payloadSlack covers a payload's keys, quotes, separators and some
// whitespace between them.
const payloadSlack = 1 << 10

// MaxRespondBytes is the largest respond payload (its JSON) a turn
// accepts: the largest arguments (arguments and an answer never go
// together), and the longest call id, decision, reason and by with every
// byte escaped. Tollgate's servers refuse larger Signals
// (ServerBlobSizeLimit).
const MaxRespondBytes = maxArgumentBytes + (6 * (maxCallIDBytes + maxCallIDSuffixBytes + len("connected") + maxReasonBytes + maxByBytes)) + payloadSlack

// maxCallIDSuffixBytes allows for the "_<n>" that keeps a reused call id
// unique in its turn.
const maxCallIDSuffixBytes = 21

const (
	maxSendBytes = 6*(MaxMessageBytes+maxByBytes) + payloadSlack
	maxEndBytes  = 6*(maxByBytes+maxReasonBytes) + payloadSlack
)

// ServerBlobSizeLimit is the limit.blobSize.error the servers Tollgate
// configures run with (worker --dev, compose, the cluster test): a little
// above the largest respond or send payload, so a Signal no turn or
// session could accept is refused by the server before it reaches the
// history. Tollgate's own payloads never come near it: anything from
// 128 KiB up is stored outside history.
const ServerBlobSizeLimit = 384 << 10

// ServerBlobSizeWarn is the limit.blobSize.warn that goes with it: the
// server logs a payload over it, which none of Tollgate's own reach.
const ServerBlobSizeWarn = 256 << 10

// readPayload decodes an Update's or Signal's payload into v, a pointer to
// the kind's struct. Every error is a sentence a caller can act on. With
// checked set (turns and sessions from the version that checks them) the
// payload's size and the UTF-8 of its text are checked too.
func readPayload(p converter.RawValue, kind payloadKind, checked bool, v any) error {
	raw, err := payloadJSON(p, kind, checked)
	if err != nil {
		return err
	}
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return fmt.Errorf("the payload is not a %s object: it is %s; send an object such as %s", kind.name, jsonKindOf(trimmed), kind.example)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("the payload is not a %s object: %s", kind.name, decodeSentence(err))
	}
	if checked {
		return checkText(raw, kind)
	}
	return nil
}

// payloadJSON is a payload's JSON, as sent.
func payloadJSON(p converter.RawValue, kind payloadKind, checked bool) ([]byte, error) {
	pl := p.Payload()
	if pl == nil {
		return nil, fmt.Errorf("the payload is empty; send a %s object such as %s", kind.name, kind.example)
	}
	raw := pl.GetData()
	if checked && len(raw) > kind.max {
		return nil, fmt.Errorf("the payload is %d bytes; a %s payload is at most %d", len(raw), kind.name, kind.max)
	}
	switch enc := string(pl.GetMetadata()[converter.MetadataEncoding]); enc {
	case converter.MetadataEncodingJSON:
	case converter.MetadataEncodingNil:
		// What SDKs send for nil.
		return []byte("null"), nil
	default:
		return nil, fmt.Errorf("the payload is not a %s object: it is not JSON (its encoding is %q); send an object such as %s", kind.name, enc, kind.example)
	}
	if !json.Valid(raw) {
		return nil, fmt.Errorf("the payload is not a %s object: it is not valid JSON; send an object such as %s", kind.name, kind.example)
	}
	return raw, nil
}

func jsonKindOf(v []byte) string {
	if len(v) == 0 {
		return "empty"
	}
	switch v[0] {
	case '"':
		return "a JSON string"
	case '[':
		return "a JSON array"
	case 't', 'f':
		return "a JSON boolean"
	case 'n':
		return "JSON null"
	case '{':
		return "a JSON object"
	}
	return "a JSON number"
}

// decodeSentence says which field has the wrong JSON type, without
// naming Go types.
func decodeSentence(err error) string {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) && typeErr.Field != "" {
		return fmt.Sprintf("%s is %s; it must be %s", typeErr.Field, article(typeErr.Value), jsonTypeName(typeErr.Type))
	}
	return "it does not decode as one"
}

func article(jsonValue string) string {
	if jsonValue == "null" {
		return "JSON null"
	}
	return "a JSON " + jsonValue
}

func jsonTypeName(t reflect.Type) string {
	if t == nil {
		return "another JSON type"
	}
	switch t.Kind() {
	case reflect.String:
		return "a JSON string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return "a JSON number"
	case reflect.Bool:
		return "a JSON boolean"
	case reflect.Slice, reflect.Array:
		return "a JSON array"
	}
	return "a JSON object"
}

// checkText refuses a payload whose text is not UTF-8: raw bytes that are
// not, or a \u escape of half a surrogate pair. Either would be stored as
// U+FFFD, so what a person sent would not be what the card says.
func checkText(raw []byte, kind payloadKind) error {
	if utf8.Valid(raw) && !loneSurrogate(raw) {
		return nil
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) == nil {
		for _, name := range kind.fields {
			if f, ok := fields[name]; ok && (!utf8.Valid(f) || loneSurrogate(f)) {
				return fmt.Errorf("%s is not valid UTF-8 text; send it as UTF-8", name)
			}
		}
	}
	return fmt.Errorf("the %s payload is not valid UTF-8 text; send it as UTF-8", kind.name)
}

// loneSurrogate reports whether JSON text holds a \u escape of a UTF-16
// surrogate that is not part of a pair. Backslashes occur only inside
// strings, so the escapes can be read without parsing the JSON.
func loneSurrogate(raw []byte) bool {
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		if i+1 >= len(raw) || raw[i+1] != 'u' {
			i++
			continue
		}
		r, ok := hex4(raw, i+2)
		if !ok {
			return false
		}
		i += 5
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return true
		case r >= 0xD800 && r <= 0xDBFF:
			if i+6 >= len(raw) || raw[i+1] != '\\' || raw[i+2] != 'u' {
				return true
			}
			lo, ok := hex4(raw, i+3)
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return true
			}
			i += 6
		}
	}
	return false
}

func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[at : at+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}
