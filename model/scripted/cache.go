package scripted

import (
	"io/fs"
	"os"
	"sync"
)

// Scripts resolves what follows "scripted:" as Open does, for every model
// call of a worker. A script is parsed once and played until its file
// changes: a call costs a look at the file rather than a read and a
// parse. The look is a stat through the scripts directory, held open as
// an os.Root, so the confinement rule holds at each call; opening the
// directory and the file each time cost four times as much (20 µs idle,
// 0.1 ms on a busy worker).
type Scripts struct {
	dir string
	mu  sync.Mutex
	// played maps a reference to its provider and, for a file, the file
	// it was parsed from.
	played map[string]playedScript
	// root is the scripts directory held open, and rootInfo the
	// directory it is: a directory replaced under the same name is
	// noticed and opened anew.
	root     *os.Root
	rootInfo fs.FileInfo
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
	if ok && (isBuiltin || s.still(ref, known.file)) {
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

// still reports whether ref names the file it named when known was read.
// Anything amiss (an escape, a missing file, a replaced directory it
// cannot open) says no, and openFile then reports it as the first call
// did.
func (s *Scripts) still(ref string, known fs.FileInfo) bool {
	if known == nil {
		return false
	}
	rel, err := beneath(ref, s.dir)
	if err != nil {
		return false
	}
	root, err := s.openRoot()
	if err != nil {
		return false
	}
	now, err := root.Stat(rel)
	return err == nil && unchanged(known, now)
}

// openRoot returns the scripts directory held open, opening it again if
// the name now leads to another directory.
func (s *Scripts) openRoot() (*os.Root, error) {
	named, err := os.Stat(s.dir)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.root != nil && os.SameFile(s.rootInfo, named) {
		return s.root, nil
	}
	root, err := os.OpenRoot(s.dir)
	if err != nil {
		return nil, err
	}
	info, err := root.Stat(".")
	if err != nil {
		root.Close()
		return nil, err
	}
	if s.root != nil {
		// A call still looking through the old root finishes first:
		// os.Root closes once its operations end.
		s.root.Close()
	}
	s.root, s.rootInfo = root, info
	return root, nil
}
