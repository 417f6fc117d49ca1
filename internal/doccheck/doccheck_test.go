package doccheck

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// maxREADMELines is the README's length limit.
const maxREADMELines = 250

// root returns the module's root directory: the nearest parent with a go.mod.
func root(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestREADMELength(t *testing.T) {
	readme := read(t, filepath.Join(root(t), "README.md"))
	if n := strings.Count(readme, "\n"); n > maxREADMELines {
		t.Errorf("README.md has %d lines, more than %d: move the detail to docs/", n, maxREADMELines)
	}
}

// goBlocks returns the contents of the README's ```go blocks.
func goBlocks(md string) []string {
	var blocks []string
	var cur *strings.Builder
	sc := bufio.NewScanner(strings.NewReader(md))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case cur == nil && strings.TrimSpace(line) == "```go":
			cur = &strings.Builder{}
		case cur != nil && strings.TrimSpace(line) == "```":
			blocks = append(blocks, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line + "\n")
		}
	}
	return blocks
}

func TestGoBlocks(t *testing.T) {
	got := goBlocks("text\n```go\npackage main\n\nfunc main() {}\n```\n```\nnot go\n```\n```go\nx := 1\n```\n")
	want := []string{"package main\n\nfunc main() {}\n", "x := 1\n"}
	if !slices.Equal(got, want) {
		t.Errorf("goBlocks = %q, want %q", got, want)
	}
}

// TestREADMEProgram builds and vets the README's program (its one ```go
// block that starts with "package main") as a package of this module, in a
// temporary directory under testdata (which ./... leaves out).
func TestREADMEProgram(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program with the go command; not in -short")
	}
	dir := root(t)
	var programs []string
	for _, b := range goBlocks(read(t, filepath.Join(dir, "README.md"))) {
		if strings.HasPrefix(b, "package main\n") {
			programs = append(programs, b)
		}
	}
	if len(programs) != 1 {
		t.Fatalf("README.md has %d ```go blocks that start with \"package main\", want exactly 1 (the complete example program)", len(programs))
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the README's program: %v", err)
	}
	testdata := filepath.Join(dir, "internal", "doccheck", "testdata")
	if err := os.MkdirAll(testdata, 0o755); err != nil {
		t.Fatal(err)
	}
	pkgDir, err := os.MkdirTemp(testdata, "readme-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(pkgDir) })
	if err := os.WriteFile(filepath.Join(pkgDir, "main.go"), []byte(programs[0]), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("gofmt", "-l", pkgDir).CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("the README's program is not gofmt-formatted (gofmt -l: %s %v)", out, err)
	}
	rel, err := filepath.Rel(dir, pkgDir)
	if err != nil {
		t.Fatal(err)
	}
	pkg := "./" + filepath.ToSlash(rel)
	for _, args := range [][]string{
		{"build", "-o", filepath.Join(t.TempDir(), "readme"), pkg},
		{"vet", pkg},
	} {
		cmd := exec.Command(goCmd, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("go %s on the README's program failed: %v\n%s", args[0], err, out)
		}
	}
}

// markdownFiles returns the Markdown files whose links are checked,
// relative to the root.
func markdownFiles(t *testing.T, dir string) []string {
	t.Helper()
	files := []string{"README.md", "CONTRIBUTING.md", "ARCHITECTURE.md"}
	docs, err := filepath.Glob(filepath.Join(dir, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 {
		t.Fatal("no docs/*.md")
	}
	for _, d := range docs {
		rel, _ := filepath.Rel(dir, d)
		files = append(files, filepath.ToSlash(rel))
	}
	return files
}

var (
	mdLink    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdHeading = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *$`)
	notSlug   = regexp.MustCompile(`[^\p{L}\p{N} _-]`)
)

// anchors returns the heading anchors GitHub makes for md.
func anchors(md string) map[string]bool {
	a := map[string]bool{}
	inFence := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		if m := mdHeading.FindStringSubmatch(line); m != nil {
			s := notSlug.ReplaceAllString(strings.ToLower(m[1]), "")
			a[strings.ReplaceAll(s, " ", "-")] = true
		}
	}
	return a
}

func TestAnchors(t *testing.T) {
	a := anchors("# Title\n## What `nil` means\n```\n# not a heading\n```\n### TiDB, in detail\n")
	for _, want := range []string{"title", "what-nil-means", "tidb-in-detail"} {
		if !a[want] {
			t.Errorf("anchors lack %q: %v", want, a)
		}
	}
	if a["not-a-heading"] {
		t.Errorf("a line in a code block made an anchor")
	}
}

// TestDocLinks fails when a relative link of the Markdown files names a
// file, or a heading, that does not exist.
func TestDocLinks(t *testing.T) {
	dir := root(t)
	for _, f := range markdownFiles(t, dir) {
		md := read(t, filepath.Join(dir, f))
		for _, m := range mdLink.FindAllStringSubmatch(md, -1) {
			link := m[1]
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			target, anchor, _ := strings.Cut(link, "#")
			targetPath := filepath.Join(dir, filepath.Dir(f), filepath.FromSlash(target))
			if target == "" {
				targetPath = filepath.Join(dir, f)
			}
			info, err := os.Stat(targetPath)
			if err != nil {
				t.Errorf("%s links to %s, which does not exist", f, link)
				continue
			}
			if anchor != "" && !info.IsDir() && !anchors(read(t, targetPath))[anchor] {
				t.Errorf("%s links to %s: no heading of %s makes the anchor #%s", f, link, target, anchor)
			}
		}
	}
}

// mappedRoots are the package trees whose every non-test Go file
// ARCHITECTURE.md names, each with the section its lines belong in (a
// subpackage of namedlock goes in "### namedlock subpackages").
var mappedRoots = []struct{ dir, section string }{
	{"namedlock", "## namedlock"},
	{"pool", "## pool"},
	{"keyfmt", "## keyfmt"},
	{"schedlock", "## schedlock"},
	{"cmd/namedlock", "## cmd/namedlock"},
}

// section returns the ARCHITECTURE.md section where the lines of package
// directory dir belong, and whether each of its files needs a line.
func section(dir string) (string, bool) {
	for _, r := range mappedRoots {
		if dir == r.dir || strings.HasPrefix(dir, r.dir+"/") {
			if r.dir == "namedlock" && dir != r.dir {
				return "### namedlock subpackages", true
			}
			return r.section, true
		}
	}
	return "## Other packages", false
}

// goPackages returns, for each directory of the module that holds non-test
// Go files (testdata and hidden directories left out), those files' paths,
// relative to the root with forward slashes.
func goPackages(t *testing.T, dir string) map[string][]string {
	t.Helper()
	pkgs := map[string][]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != dir && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		pkgs[filepath.ToSlash(filepath.Dir(rel))] = append(pkgs[filepath.ToSlash(filepath.Dir(rel))], rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// archPath matches a path named in ARCHITECTURE.md: a Go file or a
// directory (trailing slash), in backquotes.
var archPath = regexp.MustCompile("`([a-z0-9_][a-z0-9_./-]*(?:\\.go|/))`")

// TestArchitecture fails when ARCHITECTURE.md misses a Go file of a mapped
// package or a package directory, or names a path that does not exist; the
// message says which line to add or remove, and where.
func TestArchitecture(t *testing.T) {
	dir := root(t)
	arch := read(t, filepath.Join(dir, "ARCHITECTURE.md"))
	named := map[string]int{} // path → first line that names it
	for i, line := range strings.Split(arch, "\n") {
		for _, m := range archPath.FindAllStringSubmatch(line, -1) {
			if _, ok := named[m[1]]; !ok {
				named[m[1]] = i + 1
			}
		}
	}
	pkgs := goPackages(t, dir)
	dirs := make([]string, 0, len(pkgs))
	for d := range pkgs {
		dirs = append(dirs, d)
	}
	slices.Sort(dirs)
	for _, d := range dirs {
		if d == "." {
			continue
		}
		sec, mapped := section(d)
		if !mapped {
			if _, ok := named[d+"/"]; !ok {
				t.Errorf("ARCHITECTURE.md does not name the package directory %s/: add the line\n\t- `%s/`: <what the package is for>.\nto its %q section", d, d, sec)
			}
			continue
		}
		files := pkgs[d]
		slices.Sort(files)
		for _, f := range files {
			if _, ok := named[f]; !ok {
				t.Errorf("ARCHITECTURE.md does not name %s: add the line\n\t- `%s`: <what the file holds>.\nto its %q section", f, f, sec)
			}
		}
	}
	paths := make([]string, 0, len(named))
	for p := range named {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		info, err := os.Stat(filepath.Join(dir, filepath.FromSlash(p)))
		switch {
		case err != nil:
			t.Errorf("ARCHITECTURE.md line %d names %s, which does not exist: remove it from that line (or the line)", named[p], p)
		case strings.HasSuffix(p, "/") != info.IsDir():
			t.Errorf("ARCHITECTURE.md line %d names %s, which is not a %s", named[p], p, map[bool]string{true: "directory", false: "file"}[strings.HasSuffix(p, "/")])
		}
	}
}

// TestArchitectureSections checks the section that a package's lines are
// said to belong in.
func TestArchitectureSections(t *testing.T) {
	for dir, want := range map[string]string{
		"namedlock":            "## namedlock",
		"namedlock/sqlxlock":   "### namedlock subpackages",
		"namedlock/holders":    "### namedlock subpackages",
		"schedlock/gocronlock": "## schedlock",
		"cmd/namedlock":        "## cmd/namedlock",
		"internal/doccheck":    "## Other packages",
		"cmd/demo":             "## Other packages",
		"namedlockextra":       "## Other packages",
	} {
		if got, _ := section(dir); got != want {
			t.Errorf("section(%q) = %q, want %q", dir, got, want)
		}
	}
}
