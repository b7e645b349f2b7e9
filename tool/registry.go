package tool

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
)

// Registry holds the tools a worker offers, by name. Tools of a Source
// may come and go while the worker runs; it is safe for concurrent use.
type Registry struct {
	mu      sync.RWMutex
	tools   map[string]Tool
	schemas map[string]*Schema
}

// Source is a group of tools that may change while the worker runs: the
// tools of an MCP server that adds, removes or redescribes its tools.
type Source interface {
	// Tools are the group's tools now.
	Tools() []Tool
	// Watch has fn called after each change of Tools; fn's error says why
	// the registry kept the earlier tools.
	Watch(fn func() error)
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
	schema, err := checked(t)
	if err != nil {
		return err
	}
	name := t.Spec().Name
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.tools[name]; dup {
		return fmt.Errorf("register tool: %s is already registered", name)
	}
	r.tools[name] = t
	r.schemas[name] = schema
	return nil
}

// checked compiles t's schema and checks its spec.
func checked(t Tool) (*Schema, error) {
	spec := t.Spec()
	schema, err := spec.compile()
	if err != nil {
		return nil, fmt.Errorf("register tool: %w", err)
	}
	// Describe would quietly clear the flag; a tool that claims to preview
	// without the method is more likely a mistake to report.
	if _, ok := t.(Previewer); spec.Previews && !ok {
		return nil, fmt.Errorf("register tool: %s sets Previews but has no Preview method", spec.Name)
	}
	return schema, nil
}

// AddSource registers src's tools, and again after each change: the
// tools src no longer has go, new ones come, changed ones are replaced.
// A change the registry cannot take (a name another tool has, a schema
// that does not compile) leaves src's earlier tools in place.
//
// A turn records the specs of its tools when it starts, so a change
// reaches turns started after it; a running turn keeps its approvals,
// retries and the descriptions its model saw, and its calls run the
// tool the registry holds when they run.
func (r *Registry) AddSource(src Source) error {
	var owned []string
	if err := r.replace(&owned, src.Tools()); err != nil {
		return err
	}
	src.Watch(func() error { return r.replace(&owned, src.Tools()) })
	return nil
}

// replace swaps the tools named in *owned for tools, all or nothing.
func (r *Registry) replace(owned *[]string, tools []Tool) error {
	schemas := make(map[string]*Schema, len(tools))
	byName := make(map[string]Tool, len(tools))
	var errs []error
	for _, t := range tools {
		schema, err := checked(t)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		name := t.Spec().Name
		if _, dup := byName[name]; dup {
			errs = append(errs, fmt.Errorf("register tool: %s is listed twice", name))
			continue
		}
		byName[name], schemas[name] = t, schema
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for name := range byName {
		if _, taken := r.tools[name]; taken && !slices.Contains(*owned, name) {
			errs = append(errs, fmt.Errorf("register tool: %s is already registered", name))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, name := range *owned {
		delete(r.tools, name)
		delete(r.schemas, name)
	}
	*owned = (*owned)[:0]
	for name, t := range byName {
		r.tools[name], r.schemas[name] = t, schemas[name]
		*owned = append(*owned, name)
	}
	return nil
}

// Schema is the compiled argument schema of a registered tool.
func (r *Registry) Schema(name string) (*Schema, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	s, ok := r.schemas[name]
	return s, ok
}

// Get finds a tool by name.
func (r *Registry) Get(name string) (Tool, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.tools[name]
	return t, ok
}

// Lookup finds a tool by name with its compiled schema, both of the same
// registration (a Source may replace the tool meanwhile).
func (r *Registry) Lookup(name string) (Tool, *Schema, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.tools[name]
	return t, r.schemas[name], ok
}

// Names lists the registered tools in sorted order.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
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
	r.mu.RLock()
	defer r.mu.RUnlock()
	specs := make([]Spec, 0, len(names))
	for _, n := range names {
		if t, ok := r.tools[n]; ok {
			specs = append(specs, Describe(t))
		}
	}
	return specs
}
