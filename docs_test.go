package tollgate_test

// The documentation is tested like code: the README, the changelog and
// every page in docs/ are read here, and what they show a reader must
// exist in the repository. Go blocks are excerpts of compiled Go files
// (most of them Example functions, so they also run); JSON blocks decode
// into the types that read them; shell blocks name programs, flags,
// subcommands, make targets, tests and routes that exist; links resolve
// inside the repository. docs/testing.md says what is checked, for
// writers.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/tollgate-dev/tollgate/activities/mcp"
	"github.com/tollgate-dev/tollgate/connections/oauth"
	"github.com/tollgate-dev/tollgate/gateway/apikey"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/workflows"
)

// readmeMaxLines keeps the README a front door.
const readmeMaxLines = 250

// changelog names the paths and commands of earlier layouts on purpose,
// so what it names need not exist.
const changelog = "CHANGELOG.md"

// docPages are the files checked: the README, the changelog and docs/*.md.
func docPages(t *testing.T) []*mdFile {
	t.Helper()
	paths := []string{"README.md", changelog}
	more, err := filepath.Glob(filepath.Join("docs", "*.md"))
	require.NoError(t, err)
	paths = append(paths, more...)
	var out []*mdFile
	for _, p := range paths {
		out = append(out, readMarkdown(t, p))
	}
	return out
}

// mdFile is a markdown file split into fenced blocks and prose.
type mdFile struct {
	path     string
	blocks   []mdBlock
	prose    []mdLine // lines outside fenced blocks
	headings []mdLine
	lines    int
}

type mdLine struct {
	n       int
	text    string
	planned bool // under a heading that says the section is planned, not built
}

type mdBlock struct {
	lang    string
	tags    []string // words after the language in the info string
	line    int
	text    string
	planned bool
}

func (b mdBlock) where(f *mdFile) string { return fmt.Sprintf("%s:%d", f.path, b.line) }

var headingRE = regexp.MustCompile(`^(#{1,6})\s+(.*)$`)

func readMarkdown(t *testing.T, path string) *mdFile {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	f := &mdFile{path: path}
	var (
		in           bool
		cur          mdBlock
		body         []string
		plannedLevel int // level of the planned heading in force, 0 for none
	)
	lines := strings.Split(string(data), "\n")
	f.lines = len(lines)
	if lines[len(lines)-1] == "" {
		f.lines--
	}
	for i, line := range lines {
		n := i + 1
		if in {
			if strings.HasPrefix(line, "```") {
				cur.text = strings.Join(body, "\n")
				f.blocks = append(f.blocks, cur)
				in, body = false, nil
				continue
			}
			body = append(body, line)
			continue
		}
		if info, ok := strings.CutPrefix(line, "```"); ok {
			words := strings.Fields(info)
			cur = mdBlock{line: n, planned: plannedLevel > 0}
			if len(words) > 0 {
				cur.lang, cur.tags = words[0], words[1:]
			}
			in = true
			continue
		}
		if m := headingRE.FindStringSubmatch(line); m != nil {
			level := len(m[1])
			if plannedLevel > 0 && level <= plannedLevel {
				plannedLevel = 0
			}
			if plannedLevel == 0 && strings.Contains(m[2], "Planned") {
				plannedLevel = level
			}
			f.headings = append(f.headings, mdLine{n: n, text: m[2], planned: plannedLevel > 0})
		}
		f.prose = append(f.prose, mdLine{n: n, text: line, planned: plannedLevel > 0})
	}
	require.False(t, in, "%s: a fenced block is not closed", path)
	return f
}

var codeSpanRE = regexp.MustCompile("`([^`]+)`")

// codeSpans are the inline code spans of the prose.
func (f *mdFile) codeSpans() []mdLine {
	var out []mdLine
	for _, l := range f.prose {
		for _, m := range codeSpanRE.FindAllStringSubmatch(l.text, -1) {
			out = append(out, mdLine{n: l.n, text: m[1], planned: l.planned})
		}
	}
	return out
}

// The README is the front door, not the manual.
func TestReadmeIsShort(t *testing.T) {
	f := readMarkdown(t, "README.md")
	require.Less(t, f.lines, readmeMaxLines, "README.md has %d lines; move detail to a page in docs/", f.lines)
}

// The README speaks to people on their own machines.
func TestReadmeSpeaksToUsersMachines(t *testing.T) {
	data, err := os.ReadFile("README.md")
	require.NoError(t, err)
	for _, re := range []*regexp.Regexp{
		regexp.MustCompile(`\bCI\b`),
		regexp.MustCompile(`(?i)proxy\.golang\.org|pkg\.go\.dev|sum\.golang\.org|registry\.npmjs|pypi\.org|crates\.io`),
	} {
		require.Nil(t, re.FindIndex(data), "README.md mentions %q", re.FindString(string(data)))
	}
}

// Every docs page is reachable from the README.
func TestEveryDocsPageIsLinkedFromTheReadme(t *testing.T) {
	readme := readMarkdown(t, "README.md")
	linked := map[string]bool{}
	for _, l := range readme.links() {
		p, _, _ := strings.Cut(l.text, "#")
		linked[filepath.Clean(p)] = true
	}
	pages, err := filepath.Glob(filepath.Join("docs", "*.md"))
	require.NoError(t, err)
	require.NotEmpty(t, pages)
	for _, p := range pages {
		require.True(t, linked[p], "README.md does not link %s", p)
	}
}

var (
	linkRE       = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	schemeLinkRE = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// links are the inline link and image targets of the prose, outside code
// spans.
func (f *mdFile) links() []mdLine {
	var out []mdLine
	for _, l := range f.prose {
		text := codeSpanRE.ReplaceAllString(l.text, "")
		for _, m := range linkRE.FindAllStringSubmatch(text, -1) {
			out = append(out, mdLine{n: l.n, text: m[1], planned: l.planned})
		}
	}
	return out
}

// anchors are the fragment ids the headings get, as the renderer makes
// them: lower case, punctuation dropped, spaces as hyphens, repeats
// numbered.
func (f *mdFile) anchors() map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, h := range f.headings {
		text := linkRE.ReplaceAllStringFunc(h.text, func(s string) string {
			return s[strings.Index(s, "[")+1 : strings.Index(s, "]")]
		})
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// Every relative link names a file of the repository (never one outside
// it) and, with a fragment, a heading of that page.
func TestDocsLinksResolveInsideTheRepository(t *testing.T) {
	root, err := filepath.Abs(".")
	require.NoError(t, err)
	pages := map[string]*mdFile{}
	for _, f := range docPages(t) {
		pages[filepath.Clean(f.path)] = f
	}
	for _, f := range pages {
		for _, l := range f.links() {
			where := fmt.Sprintf("%s:%d: link %q", f.path, l.n, l.text)
			if schemeLinkRE.MatchString(l.text) {
				continue
			}
			target, fragment, _ := strings.Cut(l.text, "#")
			var page *mdFile
			if target == "" {
				page = f
			} else {
				require.False(t, filepath.IsAbs(target), "%s: an absolute path", where)
				abs := filepath.Join(root, filepath.Dir(f.path), target)
				rel, err := filepath.Rel(root, abs)
				require.NoError(t, err, where)
				require.False(t, rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)), "%s leaves the repository", where)
				_, err = os.Stat(abs)
				require.NoError(t, err, "%s: no such file", where)
				if strings.HasSuffix(rel, ".md") && fragment != "" {
					page = pages[rel]
					if page == nil {
						page = readMarkdown(t, rel)
					}
				}
			}
			if fragment != "" && page != nil {
				require.True(t, page.anchors()[fragment], "%s: %s has no heading #%s", where, page.path, fragment)
			}
		}
	}
}

// Issue numbers mean nothing to a reader of the repository.
func TestDocsCiteNoIssueNumbers(t *testing.T) {
	re := regexp.MustCompile(`(?i)\bissues?\s+#?\d+|\bissue-\d+`)
	for _, f := range docPages(t) {
		data, err := os.ReadFile(f.path)
		require.NoError(t, err)
		require.Nil(t, re.FindIndex(data), "%s cites %q", f.path, re.FindString(string(data)))
	}
}

// repoFiles walks the repository's own files: no VCS metadata, no
// testdata, no build output or local state.
func repoFiles(t *testing.T, keep func(path string) bool) []string {
	t.Helper()
	ignored := gitignoredTopLevel(t)
	var out []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != "." && (name == ".git" || name == "testdata" || ignored[path] || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if keep(path) {
			out = append(out, path)
		}
		return nil
	})
	require.NoError(t, err)
	return out
}

// gitignoredTopLevel are the top-level names .gitignore keeps out of the
// repository (the data directory, the workspace, bin/).
func gitignoredTopLevel(t *testing.T) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(".gitignore")
	require.NoError(t, err)
	out := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		if name, ok := strings.CutPrefix(strings.TrimSpace(line), "/"); ok && !strings.ContainsAny(name, "*?[") {
			name = strings.TrimSuffix(name, "/")
			if !strings.Contains(name, "/") {
				out[name] = true
			}
		}
	}
	return out
}

var (
	goFilesOnce sync.Once
	goFiles     map[string][]string // path → normalised lines
)

// normalisedLines drops indentation, blank lines and runs of spaces, so
// an excerpt matches whatever its indentation in the file.
func normalisedLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		l = strings.Join(strings.Fields(l), " ")
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// Every Go block is an excerpt of a Go file of the repository, which
// make test compiles, vets and runs: the README's worker is
// examples/refunds' worker, a tool is tool's Example, and so on.
func TestDocsGoBlocksAreRepositoryCode(t *testing.T) {
	goFilesOnce.Do(func() {
		goFiles = map[string][]string{}
		for _, p := range repoFiles(t, func(p string) bool { return strings.HasSuffix(p, ".go") }) {
			data, err := os.ReadFile(p)
			require.NoError(t, err)
			goFiles[p] = normalisedLines(string(data))
		}
	})
	n := 0
	for _, f := range docPages(t) {
		for _, b := range f.blocks {
			if b.lang != "go" {
				continue
			}
			n++
			want := normalisedLines(b.text)
			require.NotEmpty(t, want, b.where(f))
			var found []string
			for p, lines := range goFiles {
				for i := range lines {
					if i+len(want) <= len(lines) && slices.Equal(lines[i:i+len(want)], want) {
						found = append(found, p)
						break
					}
				}
			}
			require.NotEmpty(t, found, "%s: this Go block is not in any Go file of the repository; make it an excerpt of an Example function or of examples/", b.where(f))
		}
	}
	require.Positive(t, n, "the docs show Go code")
}

// JSON blocks parse; those that say what they are decode strictly into
// the type that reads them, so a misspelt field fails here. YAML blocks
// parse.
func TestDocsDataBlocksDecode(t *testing.T) {
	strict := func(data []byte, v any) error {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		return dec.Decode(v)
	}
	kinds := map[string]func([]byte) error{
		"turn-input":   func(b []byte) error { var in workflows.Input; return strict(b, &in) },
		"cards-page":   func(b []byte) error { var p workflows.Cards; return strict(b, &p) },
		"reevaluation": func(b []byte) error { var r workflows.Reevaluation; return strict(b, &r) },
		"api-keys": func(b []byte) error {
			var file struct {
				Keys []apikey.Entry `json:"keys"`
			}
			return strict(b, &file)
		},
		"oauth-providers": func(b []byte) error { var c oauth.Config; return strict(b, &c) },
		"mcp-config":      func(b []byte) error { _, err := mcp.ParseConfig(b); return err },
		"policy":          func(b []byte) error { _, err := policy.Parse(b); return err },
	}
	for _, f := range docPages(t) {
		for _, b := range f.blocks {
			switch b.lang {
			case "json":
				require.True(t, json.Valid([]byte(b.text)), "%s: not JSON", b.where(f))
				for _, tag := range b.tags {
					decode, ok := kinds[tag]
					require.True(t, ok, "%s: unknown JSON kind %q", b.where(f), tag)
					require.NoError(t, decode([]byte(b.text)), "%s: %s", b.where(f), tag)
				}
			case "yaml", "yml":
				var v any
				require.NoError(t, yaml.Unmarshal([]byte(b.text), &v), b.where(f))
				for _, tag := range b.tags {
					// Only policy files are tagged among YAML blocks.
					require.Equal(t, "policy", tag, "%s: unknown YAML kind %q", b.where(f), tag)
					_, err := policy.Parse([]byte(b.text))
					require.NoError(t, err, "%s: policy", b.where(f))
				}
			}
		}
	}
}

// Every TOLLGATE_* variable the docs name is one the code (or the compose
// setup, the Makefile, a script) reads.
func TestDocsNameVariablesTheCodeReads(t *testing.T) {
	var corpus strings.Builder
	for _, p := range repoFiles(t, func(p string) bool {
		base := filepath.Base(p)
		switch filepath.Ext(p) {
		case ".go", ".sh", ".yml", ".yaml", ".tmpl", ".toml":
			return true
		}
		return base == "Makefile" || base == "Dockerfile" || base == ".env"
	}) {
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		corpus.Write(data)
		corpus.WriteByte('\n')
	}
	code := corpus.String()
	re := regexp.MustCompile(`TOLLGATE_[A-Z0-9_]*[A-Z0-9]`)
	for _, f := range docPages(t) {
		check := func(n int, text string) {
			for _, name := range re.FindAllString(text, -1) {
				require.Contains(t, code, name, "%s:%d names %s, which nothing reads", f.path, n, name)
			}
		}
		for _, l := range f.prose {
			if !l.planned {
				check(l.n, l.text)
			}
		}
		for _, b := range f.blocks {
			if !b.planned {
				check(b.line, b.text)
			}
		}
	}
}

// A path in backquotes that starts with a directory of the repository
// names something that exists, and a test, benchmark or example named in
// backquotes is declared.
func TestDocsPathsAndTestNamesExist(t *testing.T) {
	entries, err := os.ReadDir(".")
	require.NoError(t, err)
	ignored := gitignoredTopLevel(t)
	top := map[string]bool{}
	for _, e := range entries {
		if e.IsDir() && !ignored[e.Name()] && e.Name() != ".git" {
			top[e.Name()] = true
		}
	}
	pathRE := regexp.MustCompile(`^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*/?$`)
	// A Go symbol (a profile's internal/runtime/syscall/linux.Syscall6)
	// is not a path of this repository.
	goSymbolRE := regexp.MustCompile(`\.[A-Z][A-Za-z0-9_]*$`)
	testNameRE := regexp.MustCompile(`^(Test|Benchmark|Example|Fuzz)[A-Z_]\w*$`)
	declared := map[string]bool{}
	declRE := regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Example|Fuzz)\w*)\(`)
	for _, p := range repoFiles(t, func(p string) bool { return strings.HasSuffix(p, "_test.go") }) {
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		for _, m := range declRE.FindAllSubmatch(data, -1) {
			declared[string(m[1])] = true
		}
	}
	for _, f := range docPages(t) {
		if f.path == changelog {
			continue
		}
		for _, s := range f.codeSpans() {
			if s.planned {
				continue
			}
			where := fmt.Sprintf("%s:%d: `%s`", f.path, s.n, s.text)
			if testNameRE.MatchString(s.text) {
				require.True(t, declared[s.text], "%s: no such test function", where)
				continue
			}
			first, _, nested := strings.Cut(s.text, "/")
			if !nested || !top[first] || !pathRE.MatchString(s.text) || strings.Contains(s.text, "...") || goSymbolRE.MatchString(s.text) {
				continue
			}
			_, err := os.Stat(strings.TrimSuffix(s.text, "/"))
			require.NoError(t, err, "%s: no such file or directory", where)
		}
	}
}

// Shell blocks, and inline commands, name what exists: `go run ./X`
// programs with the flags and subcommands they define, `go test`
// packages with the tests and test flags they declare, make targets,
// compose services, gateway routes, and the contract's names in
// `temporal workflow` commands.
func TestDocsCommandsNameWhatExists(t *testing.T) {
	c := newCommandChecker(t)
	n := 0
	for _, f := range docPages(t) {
		if f.path == changelog {
			continue
		}
		for _, b := range f.blocks {
			if b.planned || (b.lang != "sh" && b.lang != "bash") {
				continue
			}
			for i, line := range shellLines(b.text) {
				n++
				c.check(fmt.Sprintf("%s (line %d of the block)", b.where(f), i+1), line)
			}
		}
		for _, s := range f.codeSpans() {
			if s.planned {
				continue
			}
			for _, prefix := range []string{"go run ./", "go test ", "go build ", "make ", "starter ", "worker ", "gateway ", "temporal workflow "} {
				if strings.HasPrefix(s.text, prefix) {
					c.check(fmt.Sprintf("%s:%d", f.path, s.n), strings.NewReplacer("[", "", "]", "").Replace(s.text))
					break
				}
			}
		}
	}
	require.Positive(t, n, "the docs show shell commands")
}

// shellLines joins continued lines and drops comments.
func shellLines(block string) []string {
	var out []string
	var cur strings.Builder
	sc := bufio.NewScanner(strings.NewReader(block))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\"))
			cur.WriteByte(' ')
			continue
		}
		cur.WriteString(line)
		out = append(out, cur.String())
		cur.Reset()
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

// shellWords splits a line into words and operators the way a shell
// would, near enough for the docs: quotes group, `#` after a space starts
// a comment, and ( ) | ; & < > separate commands.
func shellWords(line string) [][]string {
	var (
		cmds  [][]string
		words []string
		word  strings.Builder
		has   bool
		quote rune
	)
	flushWord := func() {
		if has {
			words = append(words, word.String())
		}
		word.Reset()
		has = false
	}
	flushCmd := func() {
		flushWord()
		if len(words) > 0 {
			cmds = append(cmds, words)
		}
		words = nil
	}
	runes := []rune(line)
	for i := 0; i < len(runes); i++ {
		r := runes[i]
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				word.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, has = r, true
		case r == '#' && !has:
			flushCmd()
			return cmds
		case r == '$' && i+1 < len(runes) && runes[i+1] == '(':
			flushCmd()
			i++
		case strings.ContainsRune("()|;&<>", r):
			flushCmd()
		case unicode.IsSpace(r):
			flushWord()
		default:
			word.WriteRune(r)
			has = true
		}
	}
	flushCmd()
	return cmds
}

type commandChecker struct {
	t        *testing.T
	targets  map[string]bool
	services map[string]bool
	routes   []string
	names    map[string]bool // Update, Signal and Query names of the contract
	attrs    map[string]bool
	flags    map[string]map[string]bool // dir → flags (test files under dir+"_test")
	strings  map[string]map[string]bool // dir → string literals of its program
	tests    map[string][]string        // dir → test, benchmark and example names
}

func newCommandChecker(t *testing.T) *commandChecker {
	c := &commandChecker{
		t:        t,
		targets:  map[string]bool{},
		services: map[string]bool{},
		names: map[string]bool{
			workflows.RespondName: true, workflows.StateQuery: true,
			workflows.SendName: true, workflows.EndName: true, workflows.ConversationQuery: true,
		},
		attrs:   map[string]bool{},
		flags:   map[string]map[string]bool{},
		strings: map[string]map[string]bool{},
		tests:   map[string][]string{},
	}
	for name := range workflows.SearchAttributes() {
		c.attrs[name] = true
	}
	makefile, err := os.ReadFile("Makefile")
	require.NoError(t, err)
	for _, m := range regexp.MustCompile(`(?m)^([A-Za-z][\w-]*):`).FindAllSubmatch(makefile, -1) {
		c.targets[string(m[1])] = true
	}
	var compose struct {
		Services map[string]any `yaml:"services"`
	}
	data, err := os.ReadFile("docker-compose.yml")
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(data, &compose))
	for s := range compose.Services {
		c.services[s] = true
	}
	gw, err := os.ReadFile(filepath.Join("gateway", "gateway.go"))
	require.NoError(t, err)
	for _, m := range regexp.MustCompile(`\.Handle\("([^"]+)"`).FindAllSubmatch(gw, -1) {
		if r := string(m[1]); r != "/" && r != "/v1/" {
			c.routes = append(c.routes, r)
		}
	}
	require.NotEmpty(t, c.routes)
	return c
}

// programs maps the names a command line uses to the package they run.
var programs = map[string]string{
	"starter":      "starter",
	"worker":       "worker",
	"gateway":      "cmd/gateway",
	"codec-server": "cmd/codec-server",
}

func (c *commandChecker) check(where, line string) {
	for _, words := range shellWords(line) {
		for len(words) > 0 && (regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`).MatchString(words[0]) || slices.Contains([]string{"do", "then", "else", "export"}, words[0])) {
			words = words[1:]
		}
		if len(words) == 0 {
			continue
		}
		switch words[0] {
		case "go":
			c.checkGo(where, words[1:])
		case "make":
			for _, w := range words[1:] {
				if !strings.HasPrefix(w, "-") && !strings.Contains(w, "=") {
					require.True(c.t, c.targets[w], "%s: make has no target %q", where, w)
				}
			}
		case "curl":
			c.checkCurl(where, words[1:])
		case "temporal":
			c.checkTemporal(where, words[1:])
		case "docker":
			if len(words) >= 5 && words[1] == "compose" && words[2] == "exec" {
				require.True(c.t, c.services[words[3]], "%s: docker-compose.yml has no service %q", where, words[3])
				if dir, ok := programs[words[4]]; ok {
					c.checkProgram(where, dir, words[5:])
				}
			}
		default:
			if dir, ok := programs[words[0]]; ok {
				c.checkProgram(where, dir, words[1:])
			}
		}
	}
}

// goTestFlags are the go command's own test flags, which packages do not
// define.
var goTestFlags = map[string]bool{
	"run": true, "bench": true, "benchmem": true, "benchtime": true, "count": true, "timeout": true,
	"v": true, "race": true, "short": true, "cpu": true, "tags": true, "json": true, "cover": true,
	"failfast": true, "list": true, "shuffle": true, "skip": true, "fuzz": true, "o": true, "p": true,
}

func flagName(w string) (string, bool) {
	if !strings.HasPrefix(w, "-") || w == "-" {
		return "", false
	}
	name := strings.TrimLeft(w, "-")
	name, _, _ = strings.Cut(name, "=")
	return name, name != ""
}

func (c *commandChecker) checkGo(where string, args []string) {
	if len(args) == 0 {
		return
	}
	switch args[0] {
	case "run":
		for i, w := range args[1:] {
			if strings.HasPrefix(w, "./") {
				c.checkProgram(where, filepath.Clean(w), args[i+2:])
				return
			}
		}
	case "build", "vet":
		for _, w := range args[1:] {
			if isPackageArg(w) {
				c.requirePackage(where, filepath.Clean(w))
			}
		}
	case "test":
		var dirs []string
		for _, w := range args[1:] {
			if isPackageArg(w) {
				dir := filepath.Clean(w)
				c.requirePackage(where, dir)
				dirs = append(dirs, dir)
			}
		}
		for i := 1; i < len(args); i++ {
			name, ok := flagName(args[i])
			if !ok {
				continue
			}
			if name == "run" || name == "bench" {
				if i+1 < len(args) && !strings.Contains(args[i+1], "<") {
					c.requireTestMatching(where, dirs, name, args[i+1])
				}
				continue
			}
			if goTestFlags[name] || name == "h" {
				continue
			}
			for _, dir := range dirs {
				require.True(c.t, c.flagsOf(dir, true)[name], "%s: the tests of ./%s define no flag -%s", where, dir, name)
			}
		}
	}
}

// isPackageArg reports whether a go command's argument names one package
// of the repository by its directory.
func isPackageArg(w string) bool {
	return (w == "." || strings.HasPrefix(w, "./")) && !strings.HasSuffix(w, "...")
}

func (c *commandChecker) requirePackage(where, dir string) {
	matches, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NotEmpty(c.t, matches, "%s: ./%s is not a package of the repository", where, dir)
}

// checkProgram checks a command line of the program in dir: its flags
// are ones it defines, and a first word that is not a flag is a
// subcommand it knows.
func (c *commandChecker) checkProgram(where, dir string, args []string) {
	c.requirePackage(where, dir)
	mains := c.stringsOf(dir)
	require.True(c.t, mains["package main"], "%s: ./%s is not a program", where, dir)
	if len(args) > 0 && regexp.MustCompile(`^[a-z][a-z-]*$`).MatchString(args[0]) {
		require.True(c.t, mains[args[0]], "%s: ./%s has no subcommand %q", where, dir, args[0])
	}
	flags := c.flagsOf(dir, false)
	for _, w := range args {
		if name, ok := flagName(w); ok && name != "h" && name != "help" {
			require.True(c.t, flags[name], "%s: ./%s defines no flag --%s", where, dir, name)
		}
	}
}

// flagsOf are the flag names the package in dir defines (in its test
// files when tests is set): the name argument of flag.String, fs.BoolVar
// and the like.
func (c *commandChecker) flagsOf(dir string, tests bool) map[string]bool {
	key := dir
	if tests {
		key += "_test"
	}
	if f, ok := c.flags[key]; ok {
		return f
	}
	out := map[string]bool{}
	c.eachFile(dir, tests, func(file *ast.File) {
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || !isFlagFunc(sel.Sel.Name) {
				return true
			}
			for _, a := range call.Args[:min(2, len(call.Args))] {
				if lit, ok := a.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if s, err := strconv.Unquote(lit.Value); err == nil {
						out[s] = true
					}
					break
				}
			}
			return true
		})
	})
	c.flags[key] = out
	return out
}

func isFlagFunc(name string) bool {
	switch strings.TrimSuffix(name, "Var") {
	case "String", "Bool", "Int", "Int64", "Uint", "Uint64", "Float64", "Duration", "Func", "BoolFunc", "Text", "":
		return name != ""
	}
	return false
}

// stringsOf are the string literals of the program in dir (its
// subcommands among them), and "package main" when it is one.
func (c *commandChecker) stringsOf(dir string) map[string]bool {
	if s, ok := c.strings[dir]; ok {
		return s
	}
	out := map[string]bool{}
	c.eachFile(dir, false, func(file *ast.File) {
		if file.Name.Name == "main" {
			out["package main"] = true
		}
		ast.Inspect(file, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil {
					out[s] = true
				}
			}
			return true
		})
	})
	c.strings[dir] = out
	return out
}

func (c *commandChecker) eachFile(dir string, tests bool, f func(*ast.File)) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(c.t, err)
	fset := token.NewFileSet()
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") != tests {
			continue
		}
		file, err := parser.ParseFile(fset, p, nil, 0)
		require.NoError(c.t, err)
		f(file)
	}
}

// requireTestMatching says a -run or -bench pattern selects something in
// dirs (the pattern ^$, which selects nothing on purpose, aside).
func (c *commandChecker) requireTestMatching(where string, dirs []string, flag, pattern string) {
	re, err := regexp.Compile(pattern)
	require.NoError(c.t, err, "%s: -%s %q", where, flag, pattern)
	if re.MatchString("") {
		return
	}
	prefixes := []string{"Test", "Example", "Fuzz"}
	if flag == "bench" {
		prefixes = []string{"Benchmark"}
	}
	for _, dir := range dirs {
		if _, ok := c.tests[dir]; !ok {
			var names []string
			c.eachFile(dir, true, func(file *ast.File) {
				for _, d := range file.Decls {
					if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil {
						names = append(names, fn.Name.Name)
					}
				}
			})
			c.tests[dir] = names
		}
		for _, name := range c.tests[dir] {
			for _, p := range prefixes {
				if strings.HasPrefix(name, p) && re.MatchString(name) {
					return
				}
			}
		}
	}
	require.Fail(c.t, "no test matches", "%s: -%s %q selects nothing in %v", where, flag, pattern, dirs)
}

var routeRE = regexp.MustCompile(`(/(?:v1|inbox|healthz)[^\s"'?#]*)`)

func (c *commandChecker) checkCurl(where string, args []string) {
	for _, w := range args {
		if strings.HasPrefix(w, "-") || (!strings.Contains(w, "://") && !strings.Contains(w, ":8080") && !strings.HasPrefix(w, "$")) {
			continue
		}
		m := routeRE.FindString(w)
		if m == "" {
			continue
		}
		require.True(c.t, c.isRoute(m), "%s: the gateway serves no route for %s", where, m)
	}
}

// isRoute matches a path against the gateway's patterns; a $VAR segment
// stands for any value.
func (c *commandChecker) isRoute(path string) bool {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	for _, r := range c.routes {
		_, pattern, _ := strings.Cut(r, " ") // "GET /x" patterns
		if pattern == "" {
			pattern = r
		}
		ps := strings.Split(strings.Trim(pattern, "/"), "/")
		if len(ps) != len(segs) {
			continue
		}
		ok := true
		for i := range ps {
			if !strings.HasPrefix(ps[i], "{") && ps[i] != segs[i] {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

var attrNameRE = regexp.MustCompile(`\bTollgate[A-Z]\w*`)

func (c *commandChecker) checkTemporal(where string, args []string) {
	if len(args) == 0 || args[0] != "workflow" {
		return
	}
	for i := 1; i+1 < len(args); i++ {
		switch args[i] {
		case "--name", "--type":
			require.True(c.t, c.names[args[i+1]], "%s: the contract has no Update, Signal or Query %q", where, args[i+1])
		case "--query", "-q":
			for _, a := range attrNameRE.FindAllString(args[i+1], -1) {
				require.True(c.t, c.attrs[a], "%s: no search attribute %s", where, a)
			}
		}
	}
}

// Search attribute names in the docs are the contract's.
func TestDocsNameTheContractsSearchAttributes(t *testing.T) {
	attrs := workflows.SearchAttributes()
	for _, f := range docPages(t) {
		for _, s := range f.codeSpans() {
			for _, a := range attrNameRE.FindAllString(s.text, -1) {
				_, ok := attrs[a]
				require.True(t, ok, "%s:%d: no search attribute %s", f.path, s.n, a)
			}
		}
	}
}
