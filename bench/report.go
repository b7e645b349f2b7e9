package bench

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"
)

// Table is a markdown table.
type Table struct {
	Head []string
	Rows [][]string
}

func (t *Table) Add(cells ...string) { t.Rows = append(t.Rows, cells) }

func (t *Table) String() string {
	var b strings.Builder
	line := func(cells []string) {
		b.WriteString("|")
		for _, c := range cells {
			b.WriteString(" " + strings.ReplaceAll(c, "|", "\\|") + " |")
		}
		b.WriteString("\n")
	}
	line(t.Head)
	sep := make([]string, len(t.Head))
	for i := range sep {
		sep[i] = "---"
	}
	line(sep)
	for _, r := range t.Rows {
		line(r)
	}
	return b.String()
}

// Machine describes where the run happened.
func Machine() string {
	cpu := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	load := ""
	if data, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(data)); len(f) >= 3 {
			load = fmt.Sprintf("; load average at start %s %s %s", f[0], f[1], f[2])
		}
	}
	return fmt.Sprintf("%s, %d cores (GOMAXPROCS %d), %s %s/%s, %s%s",
		cpu, runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), runtime.GOOS, runtime.GOARCH,
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), load)
}

// verdict says pass or miss.
func verdict(ok bool) string {
	if ok {
		return "pass"
	}
	return "**miss**"
}

func x(r float64) string { return fmt.Sprintf("%.2f×", r) }
