package datadir

import (
	"path/filepath"
	"testing"
)

func TestFromEnv(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	if got := FromEnv(getenv); got != Default {
		t.Errorf("unset: got %q, want %q", got, Default)
	}
	env[envVar] = "/srv/tollgate"
	if got := FromEnv(getenv); got != "/srv/tollgate" {
		t.Errorf("set: got %q, want /srv/tollgate", got)
	}
}

// TestLayout pins the subdirectory names: a worker and a starter of
// different versions sharing one directory must find each other's files.
func TestLayout(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{Payloads("d"), filepath.Join("d", "payloads")},
		{Transcripts("d"), filepath.Join("d", "transcripts")},
		{Connections("d"), filepath.Join("d", "connections")},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
