//go:build !linux

package main

import "errors"

func dieWithParent() error {
	return errors.New("--die-with-parent is only supported on Linux")
}
