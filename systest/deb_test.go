package systest

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// make deb (here make packages, which builds the .deb and the RPM from one
// build) builds a package that lintian accepts, with what an operator
// needs where Debian puts it; the unit it carries passes systemd's checks
// against the packaged binary and man page, the man page and completions
// work, and its configuration starts an agent that runs nothing.
func TestDebianPackage(t *testing.T) {
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		t.Skip("dpkg-deb is not installed: not a Debian system")
	}
	lintian, err := exec.LookPath("lintian")
	if err != nil {
		t.Fatal("lintian is not installed: `scripts/services.sh lintian` (run by make test) installs it")
	}
	deb := builtPackage(t, "electd_*.deb")
	st, _ := os.Stat(deb)
	t.Logf("%s: %d bytes", filepath.Base(deb), st.Size())

	// The control file.
	field := func(name string) string {
		b, err := exec.Command("dpkg-deb", "-f", deb, name).Output()
		if err != nil {
			t.Fatalf("dpkg-deb -f %s: %v", name, err)
		}
		return strings.TrimSpace(string(b))
	}
	arch, _ := exec.Command("dpkg", "--print-architecture").Output()
	if got, want := field("Architecture"), strings.TrimSpace(string(arch)); got != want {
		t.Errorf("Architecture %q, want %q", got, want)
	}
	if v := field("Version"); !regexp.MustCompile(`^[0-9][A-Za-z0-9.+~]*-1$`).MatchString(v) ||
		!strings.HasSuffix(deb, "electd_"+v+"_"+strings.TrimSpace(string(arch))+".deb") {
		t.Errorf("Version %q, file %s", v, filepath.Base(deb))
	}
	if d := field("Depends"); !strings.Contains(d, "adduser") || !strings.Contains(d, "libc6") {
		t.Errorf("Depends %q, want adduser (postinst) and libc6", d)
	}
	info, err := exec.Command("dpkg-deb", "--info", deb).CombinedOutput()
	if err != nil {
		t.Fatalf("dpkg-deb --info: %v\n%s", err, info)
	}
	for _, member := range []string{"control", "conffiles", "md5sums", "postinst", "prerm", "postrm"} {
		if !regexp.MustCompile(`(?m)^\s+\d+ bytes,\s+\d+ lines\s+\*?\s+` + member + `\b`).Match(info) {
			t.Errorf("the control archive has no %s:\n%s", member, info)
		}
	}

	// The files, with their modes and owners.
	contents, err := exec.Command("dpkg-deb", "--contents", deb).Output()
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]string{} // path -> "mode owner"
	for _, line := range strings.Split(strings.TrimSpace(string(contents)), "\n") {
		f := strings.Fields(line)
		if len(f) >= 6 {
			listed[strings.TrimPrefix(f[len(f)-1], ".")] = f[0] + " " + f[1]
		}
	}
	for path, want := range map[string]string{
		"/usr/bin/electd":                               "-rwxr-xr-x root/root",
		"/usr/lib/electd/electd-shim":                   "-rwxr-xr-x root/root",
		"/lib/systemd/system/electd.service":            "-rw-r--r-- root/root",
		"/etc/default/electd":                           "-rw------- root/root",
		"/etc/electd/electd.hcl":                        "-rw-r--r-- root/root",
		"/usr/share/man/man1/electd.1.gz":               "-rw-r--r-- root/root",
		"/usr/share/bash-completion/completions/electd": "-rw-r--r-- root/root",
		"/usr/share/zsh/vendor-completions/_electd":     "-rw-r--r-- root/root",
		"/usr/share/doc/electd/copyright":               "-rw-r--r-- root/root",
		"/usr/share/doc/electd/changelog.Debian.gz":     "-rw-r--r-- root/root",
		"/usr/share/doc/electd/docs/operations.md":      "-rw-r--r-- root/root",
		"/usr/share/doc/electd/examples/quickstart.hcl": "-rw-r--r-- root/root",
	} {
		if got := listed[path]; got != want {
			t.Errorf("%s: %q, want %q", path, got, want)
		}
	}
	for path := range listed {
		if strings.HasPrefix(path, "/etc/systemd/") || strings.HasPrefix(path, "/usr/local/") {
			t.Errorf("the package installs %s: /etc/systemd is the administrator's, /usr/local the local one", path)
		}
	}

	// lintian: errors fail, the rest is listed.
	lint, err := exec.Command(lintian, "--info", "--display-info", deb).CombinedOutput()
	for _, line := range strings.Split(string(lint), "\n") {
		switch {
		case strings.HasPrefix(line, "E: "):
			t.Errorf("lintian: %s", line)
		case strings.HasPrefix(line, "W: "), strings.HasPrefix(line, "I: "):
			t.Logf("lintian: %s", line)
		}
	}
	if err != nil && !t.Failed() {
		t.Errorf("lintian: %v\n%s", err, lint)
	}

	// Unpacked: control files, md5sums, maintainer scripts.
	root := filepath.Join(t.TempDir(), "root")
	ctrl := filepath.Join(t.TempDir(), "DEBIAN")
	for _, args := range [][]string{{"-x", deb, root}, {"-e", deb, ctrl}} {
		if b, err := exec.Command("dpkg-deb", args...).CombinedOutput(); err != nil {
			t.Fatalf("dpkg-deb %s: %v\n%s", args[0], err, b)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(ctrl, "conffiles")); string(b) != "/etc/default/electd\n/etc/electd/electd.hcl\n" {
		t.Errorf("conffiles: %q, want /etc/default/electd and /etc/electd/electd.hcl", b)
	}
	checkMD5sums(t, root, filepath.Join(ctrl, "md5sums"), listed)
	for _, script := range []string{"postinst", "prerm", "postrm"} {
		path := filepath.Join(ctrl, script)
		if b, err := exec.Command("sh", "-n", path).CombinedOutput(); err != nil {
			t.Errorf("%s does not parse: %v\n%s", script, err, b)
		}
	}
	postinst, _ := os.ReadFile(filepath.Join(ctrl, "postinst"))
	postrm, _ := os.ReadFile(filepath.Join(ctrl, "postrm"))
	for _, want := range []string{"adduser --quiet --system --group", "deb-systemd-helper enable electd.service", "deb-systemd-invoke $_action electd.service"} {
		if !strings.Contains(string(postinst), want) {
			t.Errorf("postinst lacks %q", want)
		}
	}
	if !strings.Contains(string(postrm), "rm -rf /var/lib/electd") || !strings.Contains(string(postrm), "deb-systemd-helper purge electd.service") {
		t.Errorf("postrm does not clean up on purge:\n%s", postrm)
	}

	// The copyright file names the license of every Go module compiled in.
	copyright, _ := os.ReadFile(filepath.Join(root, "usr/share/doc/electd/copyright"))
	if !strings.Contains(string(copyright), "Files: *\nCopyright: the electd authors\nLicense: Apache-2.0\n") {
		t.Errorf("the copyright file does not give electd's own license as Apache-2.0:\n%.600s", copyright)
	}
	mods, err := exec.Command("go", "version", "-m", filepath.Join(root, "usr/bin/electd")).Output()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(mods), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "dep" {
			n++
			if !strings.Contains(string(copyright), "\nFiles: "+f[1]+"/*\n") {
				t.Errorf("the copyright file does not name the module %s", f[1])
			}
		}
	}
	t.Logf("the copyright file covers %d Go modules", n)

	// The unit runs the packaged binary, and systemd accepts it.
	unit, _ := os.ReadFile(filepath.Join(root, "lib/systemd/system/electd.service"))
	for _, want := range []string{"ExecStart=/usr/bin/electd run -config /etc/electd",
		"ExecStartPre=/usr/bin/electd check -config /etc/electd", "Documentation=man:electd(1) file:///usr/share/doc/electd/docs/operations.md"} {
		if !strings.Contains(string(unit), want+"\n") {
			t.Errorf("the unit lacks %q", want)
		}
	}
	if regexp.MustCompile(`(?m)^[^#].*/usr/local`).Match(unit) {
		t.Errorf("the packaged unit names /usr/local:\n%s", unit)
	}
	verifyUnit(t, root, "/lib/systemd/system/electd.service", "/usr/share/man")

	// The man page sets without a warning and documents every command.
	manPath := filepath.Join(root, "usr/share/man/man1/electd.1.gz")
	page := renderMan(t, manPath)
	help, _ := exec.Command(filepath.Join(root, "usr/bin/electd"), "-h").Output()
	for _, line := range strings.Split(string(help), "\n") {
		if f := strings.Fields(line); strings.HasPrefix(line, "  ") && len(f) > 1 {
			if !strings.Contains(page, "electd "+f[0]+" ") && !strings.Contains(page, "electd "+f[0]+"\n") {
				t.Errorf("the man page has no section for %s", f[0])
			}
		}
	}

	// The completions parse.
	if b, err := exec.Command("bash", "-n", filepath.Join(root, "usr/share/bash-completion/completions/electd")).CombinedOutput(); err != nil {
		t.Errorf("bash -n: %v\n%s", err, b)
	}
	if zsh, err := exec.LookPath("zsh"); err != nil {
		t.Log("zsh is not installed: the zsh completion is not parsed")
	} else if b, err := exec.Command(zsh, "-n", filepath.Join(root, "usr/share/zsh/vendor-completions/_electd")).CombinedOutput(); err != nil {
		t.Errorf("zsh -n: %v\n%s", err, b)
	}

	// /etc/default/electd sets nothing until the administrator does.
	env, _ := os.ReadFile(filepath.Join(root, "etc/default/electd"))
	for _, line := range strings.Split(string(env), "\n") {
		if strings.TrimSpace(line) != "" && !strings.HasPrefix(line, "#") {
			t.Errorf("/etc/default/electd sets %q", line)
		}
	}
	checkIdleConfig(t, filepath.Join(root, "usr/bin/electd"), filepath.Join(root, "etc/electd"))
}

// checkMD5sums: md5sums lists every file but the conffiles, with its sum.
func checkMD5sums(t *testing.T, root, md5sums string, listed map[string]string) {
	t.Helper()
	f, err := os.Open(md5sums)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	summed := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, path, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("md5sums: bad line %q", sc.Text())
		}
		b, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			t.Errorf("md5sums lists %s: %v", path, err)
			continue
		}
		if h := md5.Sum(b); hex.EncodeToString(h[:]) != sum {
			t.Errorf("md5sums: %s has another sum", path)
		}
		summed["/"+path] = true
	}
	for path, mode := range listed {
		if strings.HasPrefix(mode, "-") && !strings.HasPrefix(path, "/etc/") && !summed[path] {
			t.Errorf("md5sums does not list %s", path)
		}
	}
}

// verifyUnit runs systemd-analyze verify on the unit as installed under
// root (--root: ExecStart= must name a binary under root) with the man page
// of Documentation= looked up under root too. The host's own units stand in
// for the targets the unit is ordered with.
func verifyUnit(t *testing.T, root, unit, manDir string) {
	t.Helper()
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze is not installed: the unit is not verified")
		return
	}
	// A copy of root, so that the host's units do not land in the tree
	// under test.
	vroot := filepath.Join(t.TempDir(), "root")
	if b, err := exec.Command("cp", "-a", root, vroot).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, b)
	}
	units := filepath.Join(vroot, "lib/systemd/system")
	if err := os.MkdirAll(units, 0o755); err != nil {
		t.Fatal(err)
	}
	host, _ := filepath.Glob("/lib/systemd/system/*.target")
	for _, u := range host {
		dst := filepath.Join(units, filepath.Base(u))
		if _, err := os.Stat(dst); err != nil {
			if b, err := exec.Command("cp", "-L", u, dst).CombinedOutput(); err != nil {
				t.Fatalf("cp: %v\n%s", err, b)
			}
		}
	}
	verify := func(unit string) ([]byte, error) {
		cmd := exec.Command(sa, "verify", "--root="+vroot, filepath.Join(vroot, unit))
		cmd.Env = append(os.Environ(), "MANPATH="+filepath.Join(vroot, manDir), "SYSTEMD_LOG_COLOR=0")
		return cmd.CombinedOutput()
	}
	if b, err := verify(unit); err != nil || len(bytes.TrimSpace(b)) > 0 {
		t.Errorf("systemd-analyze verify --root %s: %v\n%s", unit, err, b)
	}
	// The same unit naming a binary that is not there fails: verify looks
	// under root, not on this host.
	text, err := os.ReadFile(filepath.Join(vroot, unit))
	if err != nil {
		t.Fatal(err)
	}
	wrong := regexp.MustCompile(`(?m)^(ExecStart=)\S+`).ReplaceAll(text, []byte("${1}/nonexistent/electd"))
	wrongUnit := filepath.Join(filepath.Dir(unit), "electd-wrong.service")
	if err := os.WriteFile(filepath.Join(vroot, wrongUnit), wrong, 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := verify(wrongUnit); err == nil || !strings.Contains(string(b), "/nonexistent/electd") {
		t.Errorf("systemd-analyze verify accepts a unit whose ExecStart is missing (%v):\n%s", err, b)
	}
}

// renderMan sets a gzipped man page as man(1) would, failing on warnings,
// and returns its text.
func renderMan(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	src, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var cmd *exec.Cmd
	if man, err := exec.LookPath("man"); err == nil {
		cmd = exec.Command(man, "--warnings", "-E", "UTF-8", "-l", "-")
		cmd.Env = append(os.Environ(), "MANWIDTH=80", "MAN_KEEP_FORMATTING=0", "MANPAGER=cat", "PAGER=cat")
	} else if groff, err := exec.LookPath("groff"); err == nil {
		cmd = exec.Command(groff, "-man", "-Tutf8", "-ww", "-P-cbou")
	} else {
		t.Log("neither man nor groff is installed: the man page is not set")
		return string(src)
	}
	cmd.Stdin = bytes.NewReader(src)
	var text, warnings bytes.Buffer
	cmd.Stdout, cmd.Stderr = &text, &warnings
	if err := cmd.Run(); err != nil || warnings.Len() > 0 {
		t.Errorf("%s: %v\n%s", cmd, err, warnings.String())
	}
	// man -l may still embolden by overstriking: drop "X\bX".
	return regexp.MustCompile(".\b").ReplaceAllString(text.String(), "")
}

// checkIdleConfig: the configuration as installed passes check, and an
// agent started on it (its API moved to a free port) tells systemd it is
// ready, runs no job, and stops cleanly.
func checkIdleConfig(t *testing.T, bin, etc string) {
	t.Helper()
	if b, err := exec.Command(bin, "check", "-config", etc).CombinedOutput(); err != nil || !strings.Contains(string(b), "(0 jobs") {
		t.Fatalf("electd check -config %s: %v\n%s", etc, err, b)
	}
	work := t.TempDir() // the unit's WorkingDirectory, /var/lib/electd
	port := freePort(t)
	extra := filepath.Join(work, "listen.hcl")
	if err := os.WriteFile(extra, []byte(fmt.Sprintf("agent {\n  listen = \"127.0.0.1:%d\"\n}\n", port)), 0o644); err != nil {
		t.Fatal(err)
	}
	sd := newNotifySocket(t)
	var log bytes.Buffer
	cmd := exec.Command(bin, "run", "-config", etc, "-config", extra)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+sd.path, "WATCHDOG_USEC=400000")
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Kill()
		if t.Failed() {
			t.Logf("agent log:\n%s", log.String())
		}
	}()
	sd.expect(t, "READY=1", 15*time.Second)
	sd.expect(t, "WATCHDOG=1", 5*time.Second)
	var jobs []map[string]any
	getJSON(t, fmt.Sprintf("http://127.0.0.1:%d/v1/jobs", port), &jobs)
	if len(jobs) != 0 {
		t.Errorf("the installed configuration runs jobs: %v", jobs)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("agent exit: %v, want 0", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the agent did not stop after SIGTERM")
	}
}
