package policy

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// shape is what a JSON schema says of a value, as far as CEL can use it:
// the type a rule sees, and for objects with properties the fields a rule
// may name. Anything a schema leaves open (no type, a union, a $ref) is
// dyn: rules may read it, and the checker cannot help.
type shape struct {
	kind   shapeKind
	name   string // the CEL type name of an object with properties
	fields map[string]*shape
	elem   *shape
}

type shapeKind int

const (
	dynShape shapeKind = iota
	stringShape
	intShape
	doubleShape
	boolShape
	listShape
	objectShape // with properties: a struct type
	mapShape    // without: map(string, dyn)
	// stringMapShape is map(string, string): the turn's metadata.
	stringMapShape
)

func (s *shape) celType() *types.Type {
	switch s.kind {
	case stringShape:
		return types.StringType
	case intShape:
		return types.IntType
	case doubleShape:
		return types.DoubleType
	case boolShape:
		return types.BoolType
	case listShape:
		return types.NewListType(s.elem.celType())
	case objectShape:
		return types.NewObjectType(s.name)
	case mapShape:
		return types.NewMapType(types.StringType, types.DynType)
	case stringMapShape:
		return types.NewMapType(types.StringType, types.StringType)
	}
	return types.DynType
}

// zero is what a rule reads for a field the call left out, as CEL reads
// an unset protobuf field: rules compare without has() guards, and has()
// still tells absent from empty.
func (s *shape) zero() any {
	switch s.kind {
	case stringShape:
		return types.String("")
	case intShape:
		return types.IntZero
	case doubleShape:
		return types.Double(0)
	case boolShape:
		return types.False
	case listShape:
		return []any{}
	case objectShape, mapShape:
		return map[string]any{}
	case stringMapShape:
		return map[string]string{}
	}
	return types.NullValue
}

// fieldNames lists an object's fields for error messages.
func (s *shape) fieldNames() string {
	names := make([]string, 0, len(s.fields))
	for n := range s.fields {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return "no fields"
	}
	return strings.Join(names, ", ")
}

// shapes builds the shapes of schemas and serves them to CEL as struct
// types (Provider): the checker looks fields up in it, and at run time it
// reads them from the call's decoded arguments.
type shapes struct {
	*types.Registry
	objects map[string]*shape
}

func newShapes() (*shapes, error) {
	reg, err := types.NewRegistry()
	if err != nil {
		return nil, fmt.Errorf("cel type registry: %w", err)
	}
	return &shapes{Registry: reg, objects: map[string]*shape{}}, nil
}

// fromSchema reads a JSON schema; name is the CEL type name of the value
// when it is an object with properties, and prefixes its nested ones.
func (p *shapes) fromSchema(raw json.RawMessage, name string) (*shape, error) {
	var node map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &node); err != nil {
			return nil, fmt.Errorf("read schema: %w", err)
		}
	}
	return p.fromNode(node, name), nil
}

func (p *shapes) fromNode(node map[string]any, name string) *shape {
	typ, _ := node["type"].(string)
	if _, ok := node["type"].([]any); ok {
		// ["string","null"] is a string that may be null: read as dyn,
		// since a null is no string.
		return &shape{kind: dynShape}
	}
	switch typ {
	case "string":
		return &shape{kind: stringShape}
	case "integer":
		return &shape{kind: intShape}
	case "number":
		return &shape{kind: doubleShape}
	case "boolean":
		return &shape{kind: boolShape}
	case "array":
		items, _ := node["items"].(map[string]any)
		return &shape{kind: listShape, elem: p.fromNode(items, name+"_item")}
	case "object":
		props, ok := node["properties"].(map[string]any)
		if !ok {
			return &shape{kind: mapShape}
		}
		s := &shape{kind: objectShape, name: name, fields: map[string]*shape{}}
		for field, sub := range props {
			subNode, _ := sub.(map[string]any)
			s.fields[field] = p.fromNode(subNode, name+"_"+typeNamePart(field))
		}
		p.objects[name] = s
		return s
	}
	return &shape{kind: dynShape}
}

// typeNamePart keeps a CEL type name to letters, digits and '_'.
func typeNamePart(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			b.WriteRune(r)
		} else {
			fmt.Fprintf(&b, "_%x_", r)
		}
	}
	return b.String()
}

// FindStructType implements types.Provider for the schema objects.
func (p *shapes) FindStructType(name string) (*types.Type, bool) {
	if _, ok := p.objects[name]; ok {
		return types.NewTypeTypeWithParam(types.NewObjectType(name)), true
	}
	return p.Registry.FindStructType(name)
}

// FindStructFieldNames implements types.Provider.
func (p *shapes) FindStructFieldNames(name string) ([]string, bool) {
	if s, ok := p.objects[name]; ok {
		names := make([]string, 0, len(s.fields))
		for n := range s.fields {
			names = append(names, n)
		}
		sort.Strings(names)
		return names, true
	}
	return p.Registry.FindStructFieldNames(name)
}

// FindStructFieldType implements types.Provider: the field's type, and
// how to read it from a decoded JSON object.
func (p *shapes) FindStructFieldType(name, field string) (*types.FieldType, bool) {
	s, ok := p.objects[name]
	if !ok {
		return p.Registry.FindStructFieldType(name, field)
	}
	f, ok := s.fields[field]
	if !ok {
		return nil, false
	}
	return &types.FieldType{
		Type: f.celType(),
		IsSet: func(target any) bool {
			m, ok := target.(map[string]any)
			if !ok {
				return false
			}
			v, has := m[field]
			return has && v != nil
		},
		GetFrom: func(target any) (any, error) {
			m, ok := target.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s is not an object", field)
			}
			if v, has := m[field]; has && v != nil {
				return v, nil
			}
			return f.zero(), nil
		},
	}, true
}

// NewValue implements types.Provider; rules read arguments, they do not
// build them.
func (p *shapes) NewValue(name string, fields map[string]ref.Val) ref.Val {
	if _, ok := p.objects[name]; ok {
		return types.NewErr("rules cannot build %s values", name)
	}
	return p.Registry.NewValue(name, fields)
}

// toVal turns a decoded JSON value into what rules read: CEL values
// typed by the shape (integers as int, where encoding/json decodes every
// number as float64), converted once per call rather than each time a
// rule reads them. Objects with properties stay Go maps inside a CEL map,
// since their fields are read through FindStructFieldType's getters.
func (p *shapes) toVal(s *shape, v any) any {
	if v == nil {
		return types.NullValue
	}
	switch s.kind {
	case stringShape:
		if x, ok := v.(string); ok {
			return types.String(x)
		}
	case intShape:
		if f, ok := v.(float64); ok && f == float64(int64(f)) {
			return types.Int(int64(f))
		}
	case doubleShape:
		if f, ok := v.(float64); ok {
			return types.Double(f)
		}
	case boolShape:
		if b, ok := v.(bool); ok {
			return types.Bool(b)
		}
	case listShape:
		if l, ok := v.([]any); ok {
			vals := make([]ref.Val, len(l))
			for i, e := range l {
				vals[i] = p.NativeToValue(p.toVal(s.elem, e))
			}
			return types.NewRefValList(p, vals)
		}
	case objectShape:
		if m, ok := v.(map[string]any); ok {
			for k, e := range m {
				if f, known := s.fields[k]; known {
					m[k] = p.toVal(f, e)
				}
			}
			return types.NewStringInterfaceMap(p, m)
		}
	}
	return v
}
