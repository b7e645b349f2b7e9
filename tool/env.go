package tool

import "strings"

// AllowedEnv keeps the variables of environ (NAME=value, as os.Environ
// gives them) whose names a pattern allows: the exact name, or NAME_* for
// every name with that prefix. A tool that starts processes passes on only
// what it names, since the rest of a worker's environment may hold
// secrets: model keys, database URLs.
func AllowedEnv(environ []string, patterns ...[]string) []string {
	var env []string
	for _, kv := range environ {
		name, _, ok := strings.Cut(kv, "=")
		if ok && name != "" && envAllowed(name, patterns) {
			env = append(env, kv)
		}
	}
	return env
}

func envAllowed(name string, patterns [][]string) bool {
	for _, list := range patterns {
		for _, p := range list {
			if prefix, ok := strings.CutSuffix(p, "*"); ok && prefix != "" {
				if strings.HasPrefix(name, prefix) {
					return true
				}
			} else if name == p {
				return true
			}
		}
	}
	return false
}
