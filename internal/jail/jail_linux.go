package jail

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// New makes a jail of kind k; name labels it (its cgroup is
// tollgate-<name>-<worker pid>-<n>).
func New(k Kind, name string) (Jail, error) {
	switch k {
	case Cgroup:
		return newCgroupJail(name)
	case PIDNamespace:
		return &pidnsJail{}, nil
	case UserPIDNamespace:
		return &pidnsJail{user: true}, nil
	default:
		return &pgroupJail{}, nil
	}
}

// cgroupPrefix starts the names of jails' cgroups, which then carry a
// label and the worker's pid, so that a restarted worker can find those
// a dead one left behind.
const cgroupPrefix = "tollgate-"

// jailWait bounds how long a jail's processes are given to exit after
// SIGKILL before its cgroup is left behind.
const jailWait = 5 * time.Second

var cgroupSeq atomic.Uint64

// cgroupJail is a cgroup v2 created for one command under the worker's
// own, so the worker's limits still apply to it. The command is cloned
// straight into it (CLONE_INTO_CGROUP), so there is no moment at which
// it, or anything it forks, runs outside.
type cgroupJail struct {
	dir string
	fd  *os.File
	cmd *exec.Cmd
}

func newCgroupJail(name string) (*cgroupJail, error) {
	if name == "" || strings.ContainsAny(name, "-/") {
		return nil, fmt.Errorf("jail: label %q is empty or holds - or /", name)
	}
	parent, err := ownCgroupDir()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(parent, fmt.Sprintf("%s%s-%d-%d", cgroupPrefix, name, os.Getpid(), cgroupSeq.Add(1)))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("jail: create cgroup: %w", err)
	}
	j := &cgroupJail{dir: dir}
	// cgroup.kill (Linux 5.14) is what makes emptying the cgroup race-free
	// against a command that keeps forking; without it the next
	// containment is used.
	if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
		j.Release()
		return nil, fmt.Errorf("jail: cgroup.kill: %w", err)
	}
	if j.fd, err = os.Open(dir); err != nil {
		j.Release()
		return nil, fmt.Errorf("jail: open cgroup: %w", err)
	}
	return j, nil
}

func (j *cgroupJail) Setup(cmd *exec.Cmd) (string, error) {
	j.cmd = cmd
	attr := sysProcAttr(cmd)
	attr.UseCgroupFD, attr.CgroupFD = true, int(j.fd.Fd())
	cancelWith(cmd, j)
	return "", nil
}

func (j *cgroupJail) Kill() {
	_ = os.WriteFile(filepath.Join(j.dir, "cgroup.kill"), []byte("1"), 0)
	// Should the cgroup have been tampered with, a timeout still ends bash.
	if j.cmd != nil && j.cmd.Process != nil {
		_ = syscall.Kill(-j.cmd.Process.Pid, syscall.SIGKILL)
	}
}

func (j *cgroupJail) Release() {
	if j.fd != nil {
		j.fd.Close()
	}
	removeCgroup(j.dir)
}

// removeCgroup waits for the cgroup to empty and removes it. One left
// behind costs little, and the first worker to start after this one has
// exited kills what is in it and removes it.
func removeCgroup(dir string) {
	deadline := time.Now().Add(jailWait)
	for {
		if err := os.Remove(dir); !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cleanupStale kills what a crashed worker's jails left in their
// cgroups: no call of its own could have done it.
func cleanupStale() {
	parent, err := ownCgroupDir()
	if err != nil {
		return
	}
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), cgroupPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		// <label>-<pid>-<n>
		fields := strings.Split(rest, "-")
		if len(fields) != 3 {
			continue
		}
		pid, err := strconv.Atoi(fields[1])
		if err != nil || pid <= 0 || processExists(pid) {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		_ = os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
		removeCgroup(dir)
	}
}

func processExists(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// ownCgroupDir is where this process's cgroup v2 is in the mounted
// hierarchy. The hierarchy is found through mountinfo rather than assumed
// at /sys/fs/cgroup, which hybrid systems use for v1 controllers.
func ownCgroupDir() (string, error) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", fmt.Errorf("jail: %w", err)
	}
	own, found := "", false
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "0::"); ok {
			own, found = rest, true
		}
	}
	if !found || !strings.HasPrefix(own, "/") {
		return "", errors.New("jail: this process is not in a cgroup v2 hierarchy")
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("jail: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(mounts))
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source super-options
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if sep < 5 || sep+1 >= len(fields) || fields[sep+1] != "cgroup2" {
			continue
		}
		root, mountpoint := unescapeMountinfo(fields[3]), unescapeMountinfo(fields[4])
		rel, err := filepath.Rel(root, own)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			continue
		}
		return filepath.Join(mountpoint, rel), nil
	}
	return "", errors.New("jail: no cgroup v2 hierarchy is mounted")
}

// unescapeMountinfo undoes the octal escapes (\040 for a space) of
// /proc/self/mountinfo.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// pidnsJail gives every process bash starts a PID namespace of its own.
// bash itself unshares it and so stays in the worker's namespace: it keeps
// ordinary signal semantics (`kill -9 $$` works; an init would ignore it)
// and its $$ and $! mean what they mean outside; a program bash execs
// (StartProgram) stays there too, its children inside. Its first child
// becomes the namespace's init, so the script starts a holder that blocks
// on a pipe the worker keeps; when the holder dies, by the pipe closing or
// by the process-group kill, the kernel kills everything else inside.
type pidnsJail struct {
	user         bool
	cmd          *exec.Cmd
	holdR, holdW *os.File
	closeOnce    sync.Once
}

func (j *pidnsJail) Setup(cmd *exec.Cmd) (string, error) {
	var err error
	if j.holdR, j.holdW, err = os.Pipe(); err != nil {
		return "", fmt.Errorf("jail: create holder pipe: %w", err)
	}
	j.cmd = cmd
	fd := 3 + len(cmd.ExtraFiles)
	cmd.ExtraFiles = append(cmd.ExtraFiles, j.holdR)
	flags := uintptr(syscall.CLONE_NEWPID)
	if j.user {
		// No uid map: writing one needs /proc/<pid>/uid_map of a child of
		// the non-dumpable worker, which only root may open. Unmapped, the
		// command keeps the worker's real uid for every access check.
		flags |= syscall.CLONE_NEWUSER
	}
	sysProcAttr(cmd).Unshareflags |= flags
	cancelWith(cmd, j)
	var closeFDs strings.Builder
	for n := 3; n <= fd; n++ {
		fmt.Fprintf(&closeFDs, " %d>&-", n)
	}
	// disown: a bare `wait` in the command must not wait for the holder.
	return fmt.Sprintf("read -r _ <&%d >/dev/null 2>&1%s &\ndisown\nexec %d<&-\n", fd, closeFDs.String(), fd), nil
}

func (j *pidnsJail) Kill() {
	j.closeHolder()
	if j.cmd != nil && j.cmd.Process != nil {
		_ = syscall.Kill(-j.cmd.Process.Pid, syscall.SIGKILL)
	}
}

func (j *pidnsJail) Release() {
	j.closeHolder()
	if j.holdR != nil {
		j.holdR.Close()
	}
}

func (j *pidnsJail) closeHolder() {
	j.closeOnce.Do(func() {
		if j.holdW != nil {
			j.holdW.Close()
		}
	})
}
