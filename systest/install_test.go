package systest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/internal/cluster"
)

// make install lays out the binary (stamped with version and commit), the
// unit where systemd looks for a vendor's units, naming that binary, the man
// page, the completions, the documentation, /etc/default/electd and an
// /etc/electd that runs nothing; systemd accepts the unit as installed, for
// the default PREFIX and for PREFIX=/usr. A second install leaves the
// administrator's /etc alone.
func TestMakeInstall(t *testing.T) {
	for _, c := range []struct {
		prefix, bin, unit, zsh string
	}{
		{"", "usr/local/bin/electd", "usr/local/lib/systemd/system/electd.service", "usr/local/share/zsh/site-functions/_electd"},
		{"/usr", "usr/bin/electd", "lib/systemd/system/electd.service", "usr/share/zsh/vendor-completions/_electd"},
	} {
		t.Run("PREFIX="+c.prefix, func(t *testing.T) {
			dest := t.TempDir()
			args := []string{"-C", "..", "install", "DESTDIR=" + dest}
			prefix := "/usr/local"
			if c.prefix != "" {
				args = append(args, "PREFIX="+c.prefix)
				prefix = c.prefix
			}
			install := func() {
				t.Helper()
				if out, err := exec.Command("make", args...).CombinedOutput(); err != nil {
					t.Fatalf("make install: %v\n%s", err, out)
				}
			}
			install()
			doc := strings.TrimPrefix(prefix, "/") + "/share/doc/electd"
			for _, f := range []string{c.bin, c.unit, c.zsh, "etc/default/electd", "etc/electd/electd.hcl",
				strings.TrimPrefix(prefix, "/") + "/lib/electd/electd-shim",
				strings.TrimPrefix(prefix, "/") + "/share/man/man1/electd.1.gz",
				strings.TrimPrefix(prefix, "/") + "/share/bash-completion/completions/electd",
				doc + "/README.md", doc + "/docs/operations.md", doc + "/docs/providers/sql.md", doc + "/examples/quickstart.hcl"} {
				if _, err := os.Stat(filepath.Join(dest, f)); err != nil {
					t.Errorf("make install did not install %s: %v", f, err)
				}
			}
			if _, err := os.Stat(filepath.Join(dest, "etc/systemd")); err == nil {
				t.Error("make install wrote into /etc/systemd, the administrator's directory")
			}
			if st, err := os.Stat(filepath.Join(dest, "etc/default/electd")); err == nil && st.Mode().Perm() != 0o600 {
				t.Errorf("/etc/default/electd has mode %v, want 0600: it is where secrets go", st.Mode().Perm())
			}
			unit, _ := os.ReadFile(filepath.Join(dest, c.unit))
			for _, want := range []string{"ExecStart=" + prefix + "/bin/electd run -config /etc/electd\n",
				"file://" + prefix + "/share/doc/electd/docs/operations.md"} {
				if !strings.Contains(string(unit), want) {
					t.Errorf("the installed unit lacks %q:\n%s", want, unit)
				}
			}
			verifyUnit(t, dest, "/"+c.unit, prefix+"/share/man")

			bin := filepath.Join(dest, c.bin)
			v, err := exec.Command(bin, "version").Output()
			if err != nil {
				t.Fatal(err)
			}
			commit, _ := exec.Command("git", "rev-parse", "HEAD").Output()
			if c := strings.TrimSpace(string(commit)); c != "" && !strings.Contains(string(v), c) {
				t.Errorf("electd version = %q, want the commit %s stamped in", v, c)
			}
			renderMan(t, filepath.Join(dest, strings.TrimPrefix(prefix, "/")+"/share/man/man1/electd.1.gz"))
			checkIdleConfig(t, bin, filepath.Join(dest, "etc/electd"))

			// The administrator's files survive another install.
			mine := []byte("# mine\n")
			for _, f := range []string{"etc/default/electd", "etc/electd/electd.hcl"} {
				if err := os.WriteFile(filepath.Join(dest, f), mine, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			install()
			for _, f := range []string{"etc/default/electd", "etc/electd/electd.hcl"} {
				if b, _ := os.ReadFile(filepath.Join(dest, f)); !bytes.Equal(b, mine) {
					t.Errorf("a second make install replaced /%s", f)
				}
			}
		})
	}
}

// An upgrade replaces or removes the binaries under a running agent: the
// agent still starts its commands under the shim it started with, whether
// that is electd-shim beside it (held open) or, without one, electd itself
// (/proc/self/exe).
func TestBinaryRemovedWhileRunning(t *testing.T) {
	t.Parallel()
	for _, withShim := range []bool{true, false} {
		name := map[bool]string{true: "electd-shim", false: "electd alone"}[withShim]
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			bins := []string{filepath.Join(dir, "electd")}
			if withShim {
				bins = append(bins, filepath.Join(dir, "electd-shim"))
			}
			for _, b := range bins {
				data, err := os.ReadFile(filepath.Join(filepath.Dir(binary), filepath.Base(b)))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(b, data, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			cfg := filepath.Join(dir, "electd.hcl")
			runsFile := filepath.Join(dir, "runs")
			// Each run records the program of its parent, the shim.
			src := `
agent {
  node_id = "node-1"
  listen  = ""
}
provider "sql" "s" {
  driver = "sqlite"
  dsn    = "` + filepath.Join(dir, "leases.db") + `"
}
job "restarts" {
  ttl         = "4s"
  renew_every = "1s"
  run {
    command      = ["sh", "-c", "echo \"run $(readlink /proc/$PPID/exe)\" >> ` + runsFile + `; sleep 0.3"]
    restart      = "always"
    restart_wait = "100ms"
    stop_timeout = "1s"
  }
}
`
			if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			a, err := cluster.StartProcess(cluster.Spec{Name: "node-1", Argv: []string{bins[0], "run", "-config", cfg}, Dir: dir,
				LogPath: filepath.Join(dir, "agent.log")})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Stop(30 * time.Second)
			lines := func() []string {
				b, _ := os.ReadFile(runsFile)
				return strings.Split(strings.TrimSpace(string(b)), "\n")
			}
			runs := func() int {
				b, _ := os.ReadFile(runsFile)
				return strings.Count(string(b), "run ")
			}
			waitFor := func(n int) {
				t.Helper()
				deadline := time.Now().Add(15 * time.Second)
				for runs() < n {
					if time.Now().After(deadline) {
						t.Fatalf("only %d runs, want %d", runs(), n)
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
			waitFor(2)
			want := bins[len(bins)-1]
			if got := strings.TrimPrefix(lines()[0], "run "); got != want {
				t.Fatalf("the command ran under %q, want %q", got, want)
			}
			for _, b := range bins {
				if err := os.Remove(b); err != nil {
					t.Fatal(err)
				}
			}
			before := runs()
			waitFor(before + 3)
			if got := strings.TrimPrefix(lines()[runs()-1], "run "); got != want+" (deleted)" {
				t.Errorf("after the files were removed, the command ran under %q, want %q", got, want+" (deleted)")
			}
		})
	}
}
