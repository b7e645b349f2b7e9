package mcp

// ConnectionProvider names the connection a call of an HTTP server's
// tool acts through: the server's own name, unless the worker's own
// token goes with every request.
func (t *mcpTool) ConnectionProvider() string {
	s := t.srv
	if s.cfg.URL == "" || s.opts.Connections == nil || s.usesServiceToken() {
		return ""
	}
	return s.name
}
