package systest

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// packages is what `make packages` built, once, for the package tests: the
// .deb and the RPM come from one build of the binaries (scripts/package.sh
// with both packagers), as `make deb` and `make rpm` each make it.
var packages struct {
	once sync.Once
	dir  string
	out  []byte
	err  error
}

// builtPackage is the one package in the shared build whose name matches
// pattern.
func builtPackage(t *testing.T, pattern string) string {
	t.Helper()
	packages.once.Do(func() {
		if packages.dir, packages.err = os.MkdirTemp("", "electd-packages-"); packages.err == nil {
			packages.out, packages.err = exec.Command("make", "-C", "..", "packages", "DEBDIR="+packages.dir).CombinedOutput()
		}
	})
	if packages.err != nil {
		t.Fatalf("make packages: %v\n%s", packages.err, packages.out)
	}
	found, _ := filepath.Glob(filepath.Join(packages.dir, pattern))
	if len(found) != 1 {
		t.Fatalf("make packages made %v, want one %s", found, pattern)
	}
	return found[0]
}

// removePackages removes the shared build (TestMain, after the tests).
func removePackages() {
	if packages.dir != "" {
		os.RemoveAll(packages.dir)
	}
}
