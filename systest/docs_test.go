package systest

import (
	"os"
	"path/filepath"
	"regexp"
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
