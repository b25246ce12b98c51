package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"

	"github.com/electd/electd/internal/teststore"
)

var built struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// Electd returns the electd binary of this process: built from ./cmd/electd
// on the first call into a temporary directory, which Cleanup removes.
func Electd() (string, error) {
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "electd-bin-")
		if err != nil {
			built.err = err
			return
		}
		built.dir = dir
		built.path = filepath.Join(dir, "electd")
		built.err = Build(built.path)
	})
	return built.path, built.err
}

// Cleanup removes the binary Electd built. A TestMain calls it after m.Run.
func Cleanup() {
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
}

// Build builds ./cmd/electd as out and ./cmd/electd-shim beside it, as an
// installation has them, in the module's root; the compiler's messages go
// to stderr.
func Build(out string) error {
	root, err := teststore.RepoRoot()
	if err != nil {
		return err
	}
	for pkg, to := range map[string]string{"./cmd/electd": out, "./cmd/electd-shim": filepath.Join(filepath.Dir(out), "electd-shim")} {
		cmd := exec.Command("go", "build", "-o", to, pkg)
		cmd.Dir = root
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("building %s: %w", pkg, err)
		}
	}
	return nil
}
