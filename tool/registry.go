package tool

import (
	"fmt"
	"sort"
)

// Registry holds the tools a worker offers, by name.
type Registry struct {
	tools   map[string]Tool
	schemas map[string]*Schema
}

// NewRegistry registers tools, rejecting invalid specs and duplicate names.
func NewRegistry(tools ...Tool) (*Registry, error) {
	r := &Registry{tools: map[string]Tool{}, schemas: map[string]*Schema{}}
	for _, t := range tools {
		if err := r.Register(t); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Register adds one tool.
func (r *Registry) Register(t Tool) error {
	spec := t.Spec()
	schema, err := spec.compile()
	if err != nil {
		return fmt.Errorf("register tool: %w", err)
	}
	// Describe would quietly clear the flag; a tool that claims to preview
	// without the method is more likely a mistake to report.
	if _, ok := t.(Previewer); spec.Previews && !ok {
		return fmt.Errorf("register tool: %s sets Previews but has no Preview method", spec.Name)
	}
	if _, dup := r.tools[spec.Name]; dup {
		return fmt.Errorf("register tool: %s is already registered", spec.Name)
	}
	r.tools[spec.Name] = t
	r.schemas[spec.Name] = schema
	return nil
}

// Schema is the compiled argument schema of a registered tool.
func (r *Registry) Schema(name string) (*Schema, bool) {
	s, ok := r.schemas[name]
	return s, ok
}

// Get finds a tool by name.
func (r *Registry) Get(name string) (Tool, bool) {
	t, ok := r.tools[name]
	return t, ok
}

// Names lists the registered tools in sorted order.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.tools))
	for n := range r.tools {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Specs lists the specs of the registered tools in name order, as
// Describe reports them.
func (r *Registry) Specs() []Spec {
	names := r.Names()
	specs := make([]Spec, len(names))
	for i, n := range names {
		specs[i] = Describe(r.tools[n])
	}
	return specs
}
