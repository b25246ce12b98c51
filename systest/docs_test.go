package systest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// linkRe finds markdown links and images: [text](target).
var linkRe = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocsStandAlone: README and docs/ link only to files in the repository,
// and every such link resolves (anchors are not checked). Users get the
// repository, nothing beside it.
func TestDocsStandAlone(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	files := []string{filepath.Join(root, "README.md")}
	filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return err
	})
	if len(files) < 5 {
		t.Fatalf("only %d markdown files found", len(files))
	}
	links := 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		if strings.Contains(string(src), "../shared") || strings.Contains(string(src), "SPEC.md") {
			t.Errorf("%s refers to the steering files outside the repository", rel)
		}
		for _, m := range linkRe.FindAllStringSubmatch(string(src), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") || strings.HasPrefix(target, "#") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			abs := filepath.Clean(filepath.Join(filepath.Dir(f), target))
			links++
			if !strings.HasPrefix(abs, root+string(filepath.Separator)) {
				t.Errorf("%s links %s, outside the repository", rel, m[1])
				continue
			}
			if _, err := os.Stat(abs); err != nil {
				t.Errorf("%s links %s, which does not exist", rel, m[1])
			}
		}
	}
	if links < 20 {
		t.Errorf("only %d relative links checked: is the pattern still right?", links)
	}
}

// TestDesignNotesImports: docs/DESIGN-NOTES.md has a row for every package
// of the module, and each row's "depends on" names exactly the packages of
// the module that the package imports (tests aside), as go list reports
// them: the notes are the import graph as it is.
func TestDesignNotesImports(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const module = "github.com/electd/electd/"
	imports := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		var own []string
		for _, imp := range fields[1:] {
			if strings.HasPrefix(imp, module) {
				own = append(own, strings.TrimPrefix(imp, module))
			}
		}
		sort.Strings(own)
		imports[strings.TrimPrefix(fields[0], module)] = strings.Join(own, " ")
	}

	notes, err := os.ReadFile(filepath.Join(root, "docs", "DESIGN-NOTES.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z0-9/-]+)` \\|.*\\| ([^|]*) \\|$")
	quoted := regexp.MustCompile("`([a-z0-9/-]+)`")
	documented := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(string(notes), -1) {
		pkg := m[1]
		documented[pkg] = true
		var deps []string
		for _, d := range quoted.FindAllStringSubmatch(m[2], -1) {
			deps = append(deps, d[1])
		}
		sort.Strings(deps)
		want, ok := imports[pkg]
		if !ok {
			t.Errorf("DESIGN-NOTES.md has a row for %s, which is not a package of the module", pkg)
			continue
		}
		if got := strings.Join(deps, " "); got != want {
			t.Errorf("DESIGN-NOTES.md: %s depends on %q, but it imports %q", pkg, got, want)
		}
	}
	for pkg := range imports {
		if !documented[pkg] {
			t.Errorf("DESIGN-NOTES.md has no row for the package %s", pkg)
		}
	}
}
