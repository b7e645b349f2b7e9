//go:build unix

// Package proctest finds the processes a test started by a marker in
// their argv[0], so a test can tell whether a process escaped the call
// that started it, whatever its parent or process group has become.
package proctest

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// Listed lists the processes in /proc whose argv[0] starts with marker.
// A process in a PID namespace of its own sees them there under the pids
// of the outer namespace, which it cannot signal, so Listed does not try.
func Listed(marker string) []int {
	var pids []int
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		cmdline, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil {
			continue
		}
		argv0, _, _ := strings.Cut(string(cmdline), "\x00")
		if !strings.HasPrefix(argv0, marker) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(d)); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// Marked lists the live processes whose argv[0] starts with marker.
func Marked(marker string) []int {
	return slices.DeleteFunc(Listed(marker), func(pid int) bool { return !Alive(pid) })
}

// Alive reports whether pid runs; a zombie, which nobody in a test may
// reap, counts as dead.
func Alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// The state follows the command name, which may hold spaces and
	// parentheses of its own.
	_, rest, _ := strings.Cut(string(b[max(0, strings.LastIndexByte(string(b), ')')):]), ")")
	fields := strings.Fields(rest)
	return len(fields) == 0 || fields[0] != "Z"
}

// KillMarked kills what a failing test let escape.
func KillMarked(marker string) {
	for _, pid := range Marked(marker) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}
