//go:build !linux

package blobstore

import (
	"errors"
	"os"
)

// Elsewhere than on Linux a directory store creates each blob's file when
// it stores it: there is no unnamed file to create ahead.
type filePool struct{}

func newFilePool(string) *filePool              { return nil }
func (p *filePool) take() *os.File              { return nil }
func (p *filePool) refill()                     {}
func (p *filePool) retire(f *os.File)           { _ = f.Close() }
func (p *filePool) link(*os.File, string) error { return errPoolOff }
func (p *filePool) close()                      {}

var errPoolOff = errors.New("blobstore: files created ahead are not used here")
