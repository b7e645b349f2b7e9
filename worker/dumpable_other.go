//go:build !linux

package main

// protectEnviron does nothing: PR_SET_DUMPABLE is Linux's. Elsewhere a
// command running as the worker's user may read the worker's environment
// (`ps eww` on macOS shows it), so secrets there are as safe as that user.
func protectEnviron() error { return nil }
