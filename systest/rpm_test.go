package systest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// make rpm (here make packages, which builds the .deb and the RPM from one
// build) builds, from the description the .deb is built from
// (dist/nfpm.yaml), an RPM with what the .deb has, where RPM-based systems
// put it: rpm reads its header, file list, conffiles and scripts; installed
// into a scratch root, rpm verifies every file, the unit passes systemd's
// checks, the man page sets, and the configuration starts an idle agent.
func TestRPMPackage(t *testing.T) {
	rpm, err := exec.LookPath("rpm")
	if err != nil {
		t.Fatal("rpm is not installed: `scripts/services.sh rpm` (run by make test) installs it")
	}
	pkg := builtPackage(t, "electd-*.rpm")
	st, _ := os.Stat(pkg)
	t.Logf("%s: %d bytes", filepath.Base(pkg), st.Size())
	query := func(args ...string) string {
		t.Helper()
		b, err := exec.Command(rpm, append([]string{"-qp", "--nosignature"}, append(args, pkg)...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("rpm -qp %v: %v\n%s", args, err, b)
		}
		return string(b)
	}

	// The header.
	info := query("-i")
	arch := map[string]string{"amd64": "x86_64", "arm64": "aarch64", "386": "i386", "ppc64le": "ppc64le", "s390x": "s390x", "riscv64": "riscv64"}[runtime.GOARCH]
	for _, want := range []string{`(?m)^Name\s*: electd$`, `(?m)^Release\s*: 1$`, `(?m)^Architecture: ` + arch + `$`,
		`(?m)^License\s*: Apache-2.0$`, `(?m)^Summary\s*: leader-election agent`, `(?m)^Version\s*: [0-9]+\.[0-9]+\.[0-9]+[A-Za-z0-9.+~]*$`,
		`(?s)Description :\n.*exactly one node at a time`} {
		if !regexp.MustCompile(want).MatchString(info) {
			t.Errorf("rpm -qip does not match %s:\n%s", want, info)
		}
	}
	version := strings.TrimSpace(query("--qf", "%{VERSION}-%{RELEASE}.%{ARCH}"))
	if filepath.Base(pkg) != "electd-"+version+".rpm" {
		t.Errorf("the file %s is not named as rpm names it, electd-%s.rpm", filepath.Base(pkg), version)
	}
	requires := query("--requires")
	for _, want := range []string{"glibc", "shadow-utils", "systemd"} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(want) + `\b`).MatchString(requires) {
			t.Errorf("the package does not require %s (its scripts need it):\n%s", want, requires)
		}
	}

	// The files, with their modes and owners, and the conffiles.
	listed := map[string]string{} // path -> "mode owner/group"
	for _, line := range strings.Split(strings.TrimSpace(query("-lv")), "\n") {
		if f := strings.Fields(line); len(f) >= 9 {
			listed[f[len(f)-1]] = f[0] + " " + f[2] + "/" + f[3]
		}
	}
	for path, want := range map[string]string{
		"/usr/bin/electd":                               "-rwxr-xr-x root/root",
		"/usr/lib/electd/electd-shim":                   "-rwxr-xr-x root/root",
		"/usr/lib/systemd/system/electd.service":        "-rw-r--r-- root/root",
		"/etc/default/electd":                           "-rw------- root/root",
		"/etc/electd/electd.hcl":                        "-rw-r--r-- root/root",
		"/usr/share/man/man1/electd.1.gz":               "-rw-r--r-- root/root",
		"/usr/share/bash-completion/completions/electd": "-rw-r--r-- root/root",
		"/usr/share/zsh/site-functions/_electd":         "-rw-r--r-- root/root",
		"/usr/share/licenses/electd/LICENSE":            "-rw-r--r-- root/root",
		"/usr/share/doc/electd/README.md":               "-rw-r--r-- root/root",
		"/usr/share/doc/electd/CHANGELOG.md":            "-rw-r--r-- root/root",
		"/usr/share/doc/electd/docs/operations.md":      "-rw-r--r-- root/root",
		"/usr/share/doc/electd/examples/quickstart.hcl": "-rw-r--r-- root/root",
	} {
		if got := listed[path]; got != want {
			t.Errorf("%s: %q, want %q", path, got, want)
		}
	}
	for path := range listed {
		for _, debian := range []string{"/lib/systemd/", "/usr/share/lintian/", "/usr/share/zsh/vendor-completions/", "/usr/share/doc/electd/copyright", "/usr/local/", "/etc/systemd/"} {
			if strings.HasPrefix(path, debian) {
				t.Errorf("the RPM installs %s, a path of the .deb or the administrator's", path)
			}
		}
	}
	flags := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(query("--qf", "[%{FILENAMES} %{FILEFLAGS:fflags}\n]")), "\n") {
		if path, fl, ok := strings.Cut(line, " "); ok {
			flags[path] = fl
		}
	}
	for path, want := range map[string]string{"/etc/default/electd": "cn", "/etc/electd/electd.hcl": "cn", "/usr/share/licenses/electd/LICENSE": "l"} {
		if flags[path] != want {
			t.Errorf("%s has the flags %q, want %q (c: %%config, n: noreplace, l: %%license)", path, flags[path], want)
		}
	}

	// The scripts: user and state directory on install, the unit handled
	// as the %systemd_* macros do.
	scripts := query("--scripts")
	for _, want := range []string{
		"postinstall scriptlet (using /bin/sh)", "useradd --system --user-group --home-dir /var/lib/electd",
		"install -d -o electd -g electd -m 0755 /var/lib/electd", "systemctl --no-reload preset electd.service",
		"preuninstall scriptlet (using /bin/sh)", "systemctl --no-reload disable --now electd.service",
		"postuninstall scriptlet (using /bin/sh)", "systemctl try-restart electd.service",
	} {
		if !strings.Contains(scripts, want) {
			t.Errorf("the scripts lack %q:\n%s", want, scripts)
		}
	}
	for _, tag := range []string{"POSTIN", "PREUN", "POSTUN"} {
		script := filepath.Join(t.TempDir(), tag)
		if err := os.WriteFile(script, []byte(query("--qf", "%{"+tag+"}")), 0o644); err != nil {
			t.Fatal(err)
		}
		if b, err := exec.Command("sh", "-n", script).CombinedOutput(); err != nil {
			t.Errorf("the %s script does not parse: %v\n%s", tag, err, b)
		}
	}

	// Installed into a scratch root with a database of its own (the
	// scripts, which create a user, are for a real system).
	root := filepath.Join(t.TempDir(), "root")
	for _, args := range [][]string{{"--root", root, "--initdb"},
		{"--root", root, "-i", "--nodeps", "--noscripts", "--nosignature", pkg},
		{"--root", root, "-V", "--nodeps", "--nosignature", "electd"}} {
		b, err := exec.Command(rpm, args...).CombinedOutput()
		// Debian's rpm warns that it is not the system's package manager.
		said := regexp.MustCompile(`(?m)^rpm: (RPM should not be used directly|However assuming).*\n?`).ReplaceAllString(string(b), "")
		if err != nil || strings.TrimSpace(said) != "" {
			t.Fatalf("rpm %v: %v\n%s", args, err, b)
		}
	}
	if b, err := exec.Command(rpm, "--root", root, "-q", "electd").CombinedOutput(); err != nil || strings.TrimSpace(string(b)) != "electd-"+version {
		t.Errorf("rpm -q electd in the scratch root: %v %q, want electd-%s", err, b, version)
	}
	bin := filepath.Join(root, "usr/bin/electd")
	if v, err := exec.Command(bin, "version").Output(); err != nil || !strings.HasPrefix(string(v), "electd ") {
		t.Errorf("electd version: %v %q", err, v)
	}
	unit, _ := os.ReadFile(filepath.Join(root, "usr/lib/systemd/system/electd.service"))
	for _, want := range []string{"ExecStart=/usr/bin/electd run -config /etc/electd", "EnvironmentFile=-/etc/default/electd", "User=electd"} {
		if !strings.Contains(string(unit), want+"\n") {
			t.Errorf("the unit lacks %q", want)
		}
	}
	verifyUnit(t, root, "/usr/lib/systemd/system/electd.service", "/usr/share/man")
	renderMan(t, filepath.Join(root, "usr/share/man/man1/electd.1.gz"))
	if b, err := exec.Command("bash", "-n", filepath.Join(root, "usr/share/bash-completion/completions/electd")).CombinedOutput(); err != nil {
		t.Errorf("bash -n: %v\n%s", err, b)
	}
	checkIdleConfig(t, bin, filepath.Join(root, "etc/electd"))
}
