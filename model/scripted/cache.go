package scripted

import (
	"io/fs"
	"sync"
)

// Scripts resolves what follows "scripted:" as Open does, for every model
// call of a worker. A script is parsed once and played until its file
// changes: a call costs a look at the file (open and stat through the
// scripts directory, so the confinement rule holds at each call) rather
// than a read and a parse.
type Scripts struct {
	dir string
	mu  sync.Mutex
	// played maps a reference to its provider and, for a file, the file
	// it was parsed from.
	played map[string]playedScript
}

type playedScript struct {
	provider *Provider
	file     fs.FileInfo
}

// maxPlayed bounds the scripts kept: references come from turn inputs,
// and a scripts directory may hold any number of files.
const maxPlayed = 256

// NewScripts resolves scripts as Open does with dir.
func NewScripts(dir string) *Scripts {
	return &Scripts{dir: dir, played: map[string]playedScript{}}
}

// Provider returns the provider that plays the script ref names.
func (s *Scripts) Provider(ref string) (*Provider, error) {
	s.mu.Lock()
	known, ok := s.played[ref]
	s.mu.Unlock()
	isBuiltin := builtin(ref)
	if ok && isBuiltin {
		return known.provider, nil
	}
	var script *Script
	var file fs.FileInfo
	var err error
	if isBuiltin {
		script, err = Builtin(ref)
	} else {
		script, file, err = openFile(ref, s.dir, known.file)
		if err == nil && script == nil {
			return known.provider, nil
		}
	}
	if err != nil {
		return nil, err
	}
	p := New(script)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.played) >= maxPlayed {
		clear(s.played)
	}
	s.played[ref] = playedScript{provider: p, file: file}
	return p, nil
}
