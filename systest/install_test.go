package systest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// make install lays out the binary (stamped with version and commit), the
// unit and an example configuration under DESTDIR, and that configuration
// passes check.
func TestMakeInstall(t *testing.T) {
	dest := t.TempDir()
	out, err := exec.Command("make", "-C", "..", "install", "DESTDIR="+dest).CombinedOutput()
	if err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	for _, f := range []string{"usr/local/bin/electd", "etc/systemd/system/electd.service",
		"etc/electd/electd.hcl", "usr/local/share/doc/electd/operations.md"} {
		if _, err := os.Stat(filepath.Join(dest, f)); err != nil {
			t.Errorf("make install did not install %s: %v", f, err)
		}
	}
	bin := filepath.Join(dest, "usr/local/bin/electd")
	v, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	commit, _ := exec.Command("git", "rev-parse", "HEAD").Output()
	if c := strings.TrimSpace(string(commit)); c != "" && !strings.Contains(string(v), c) {
		t.Errorf("electd version = %q, want the commit %s stamped in", v, c)
	}
	if out, err := exec.Command(bin, "check", "-config", filepath.Join(dest, "etc/electd")).CombinedOutput(); err != nil {
		t.Errorf("the installed configuration fails check: %v\n%s", err, out)
	}
}
