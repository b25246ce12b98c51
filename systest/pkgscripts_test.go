package systest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The maintainer scripts of both packages (dist/debian, dist/rpm), run as
// dpkg and rpm run them, with their programs (getent, adduser, useradd,
// install, systemctl, deb-systemd-helper, deb-systemd-invoke) replaced by
// stubs that record their arguments, and the paths they test and remove
// (/var/lib/electd, /etc/electd, /run/systemd/system) moved under a scratch
// root: what each script does on install, upgrade, removal and purge. The
// package tests read the scripts; here they run.
func TestMaintainerScripts(t *testing.T) {
	type env struct {
		userExists, stateDir, systemd, wasEnabled bool
	}
	type step struct {
		script string
		args   []string
		env    env
		want   []string // the calls, in order, ROOT standing for the scratch root
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"rpm install", []step{{"rpm/postinstall", []string{"1"}, env{systemd: true}, []string{
			"getent passwd electd",
			"useradd --system --user-group --home-dir ROOT/var/lib/electd --no-create-home --shell /sbin/nologin --comment electd leader-election agent electd",
			"install -d -o electd -g electd -m 0755 ROOT/var/lib/electd",
			"systemctl --no-reload preset electd.service",
			"systemctl daemon-reload",
		}}}},
		{"rpm upgrade", []step{
			{"rpm/preremove", []string{"1"}, env{userExists: true, stateDir: true, systemd: true}, nil},
			{"rpm/postinstall", []string{"2"}, env{userExists: true, stateDir: true, systemd: true}, []string{
				"getent passwd electd",
				"systemctl daemon-reload",
			}},
			{"rpm/postremove", []string{"1"}, env{userExists: true, stateDir: true, systemd: true}, []string{
				"systemctl daemon-reload",
				"systemctl try-restart electd.service",
			}},
		}},
		{"rpm remove", []step{
			{"rpm/preremove", []string{"0"}, env{userExists: true, stateDir: true, systemd: true}, []string{
				"systemctl --no-reload disable --now electd.service",
			}},
			{"rpm/postremove", []string{"0"}, env{userExists: true, stateDir: true, systemd: true}, []string{
				"systemctl daemon-reload",
			}},
		}},
		{"rpm install without systemd running", []step{{"rpm/postinstall", []string{"1"}, env{}, []string{
			"getent passwd electd",
			"useradd --system --user-group --home-dir ROOT/var/lib/electd --no-create-home --shell /sbin/nologin --comment electd leader-election agent electd",
			"install -d -o electd -g electd -m 0755 ROOT/var/lib/electd",
			"systemctl --no-reload preset electd.service",
		}}}},
		{"deb install", []step{{"debian/postinst", []string{"configure", ""}, env{systemd: true, wasEnabled: true}, []string{
			"getent passwd electd",
			"adduser --quiet --system --group --no-create-home --home ROOT/var/lib/electd electd",
			"install -d -o electd -g electd -m 0755 ROOT/var/lib/electd",
			"deb-systemd-helper unmask electd.service",
			"deb-systemd-helper --quiet was-enabled electd.service",
			"deb-systemd-helper enable electd.service",
			"systemctl --system daemon-reload",
			"deb-systemd-invoke start electd.service",
		}}}},
		{"deb upgrade, disabled by the administrator", []step{
			{"debian/prerm", []string{"upgrade", "0.9.1-1"}, env{userExists: true, stateDir: true, systemd: true}, nil},
			{"debian/postinst", []string{"configure", "0.9.0-1"}, env{userExists: true, stateDir: true, systemd: true}, []string{
				"getent passwd electd",
				"deb-systemd-helper unmask electd.service",
				"deb-systemd-helper --quiet was-enabled electd.service",
				"deb-systemd-helper update-state electd.service",
				"systemctl --system daemon-reload",
				"deb-systemd-invoke restart electd.service",
			}},
		}},
		{"deb remove and purge", []step{
			{"debian/prerm", []string{"remove"}, env{userExists: true, stateDir: true, systemd: true}, []string{
				"deb-systemd-invoke stop electd.service",
			}},
			{"debian/postrm", []string{"remove"}, env{userExists: true, stateDir: true, systemd: true}, []string{
				"systemctl --system daemon-reload",
				"deb-systemd-helper mask electd.service",
			}},
			{"debian/postrm", []string{"purge"}, env{userExists: true, stateDir: true, systemd: true}, []string{
				"deb-systemd-helper purge electd.service",
				"deb-systemd-helper unmask electd.service",
			}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			stubs := filepath.Join(root, "stubs")
			log := filepath.Join(root, "calls")
			if err := os.MkdirAll(stubs, 0o755); err != nil {
				t.Fatal(err)
			}
			// Each stub records its name and arguments; getent and
			// deb-systemd-helper was-enabled answer as the step says.
			stub := `#!/bin/sh
printf '%s\n' "$(basename "$0") $*" >> "$CALLS"
case "$(basename "$0") $*" in
"getent passwd electd") [ -n "$USER_EXISTS" ] ;;
"deb-systemd-helper --quiet was-enabled electd.service") [ -n "$WAS_ENABLED" ] ;;
*) exit 0 ;;
esac
`
			for _, name := range []string{"getent", "adduser", "useradd", "install", "systemctl", "deb-systemd-helper", "deb-systemd-invoke"} {
				if err := os.WriteFile(filepath.Join(stubs, name), []byte(stub), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			// /etc/electd keeps a job file of the administrator's.
			if err := os.MkdirAll(filepath.Join(root, "etc/electd"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, "etc/electd/mine.hcl"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			for i, st := range tc.steps {
				src, err := os.ReadFile(filepath.Join("../dist", st.script))
				if err != nil {
					t.Fatal(err)
				}
				script := string(src)
				for _, p := range []string{"/var/lib/electd", "/etc/electd", "/run/systemd/system"} {
					script = strings.ReplaceAll(script, p, root+p)
				}
				// Nothing else on the host is named (the shell, /dev/null).
				for _, line := range strings.Split(script, "\n") {
					code, _, _ := strings.Cut(line, "#")
					for _, f := range strings.Fields(strings.ReplaceAll(code, root, "ROOT")) {
						f = strings.Trim(f, `;"'>`)
						if strings.HasPrefix(f, "/") && f != "/dev/null" && f != "/sbin/nologin" && f != "/bin/sh" {
							t.Fatalf("%s names %s on the host: the test would touch it", st.script, f)
						}
					}
				}
				path := filepath.Join(root, "script")
				if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
					t.Fatal(err)
				}
				state := filepath.Join(root, "var/lib/electd")
				systemd := filepath.Join(root, "run/systemd/system")
				os.RemoveAll(systemd)
				if st.env.systemd {
					os.MkdirAll(systemd, 0o755)
				}
				if st.env.stateDir {
					os.MkdirAll(state, 0o755)
				}
				os.Remove(log)
				cmd := exec.Command("/bin/sh", append([]string{path}, st.args...)...)
				cmd.Env = []string{"PATH=" + stubs + ":/usr/bin:/bin", "CALLS=" + log}
				if st.env.userExists {
					cmd.Env = append(cmd.Env, "USER_EXISTS=1")
				}
				if st.env.wasEnabled {
					cmd.Env = append(cmd.Env, "WAS_ENABLED=1")
				}
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("step %d: %s %v: %v\n%s", i, st.script, st.args, err, out)
				}
				b, _ := os.ReadFile(log)
				got := strings.Split(strings.TrimSpace(strings.ReplaceAll(string(b), root, "ROOT")), "\n")
				if len(b) == 0 {
					got = nil
				}
				if strings.Join(got, "\n") != strings.Join(st.want, "\n") {
					t.Errorf("step %d: %s %v called:\n  %s\nwant:\n  %s", i, st.script, st.args,
						strings.Join(got, "\n  "), strings.Join(st.want, "\n  "))
				}
			}
			if strings.HasSuffix(tc.name, "purge") {
				if _, err := os.Stat(filepath.Join(root, "var/lib/electd")); !os.IsNotExist(err) {
					t.Errorf("purge left the state directory: %v", err)
				}
				if _, err := os.Stat(filepath.Join(root, "etc/electd/mine.hcl")); err != nil {
					t.Errorf("purge removed the administrator's job file: %v", err)
				}
			}
		})
	}
}
