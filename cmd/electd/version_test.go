package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// scripts/version.sh, which make and the packages stamp into the binary,
// run in a repository of its own through the life of a release: untagged,
// at a tag, past it, dirty, a prerelease tag, and tags that are not releases.
func TestVersionScript(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	script, err := os.ReadFile("../../scripts/version.sh")
	if err != nil {
		t.Fatal(err)
	}
	repo := t.TempDir()
	if err := os.MkdirAll(filepath.Join(repo, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "scripts/version.sh"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null")
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, b)
		}
		return strings.TrimSpace(string(b))
	}
	commit := func(msg string) string {
		t.Helper()
		if err := os.WriteFile(filepath.Join(repo, "f"), []byte(msg), 0o644); err != nil {
			t.Fatal(err)
		}
		git("add", "-A")
		git("commit", "-q", "-m", msg)
		return git("rev-parse", "--short=12", "HEAD")
	}
	version := func() string {
		t.Helper()
		cmd := exec.Command("sh", filepath.Join(repo, "scripts/version.sh"))
		cmd.Dir = t.TempDir() // the script finds its checkout itself
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("version.sh: %v", err)
		}
		return strings.TrimSpace(string(b))
	}

	git("init", "-q")
	c := commit("one")
	check := func(what, want string) {
		t.Helper()
		if got := version(); got != want {
			t.Errorf("%s: %q, want %q", what, got, want)
		}
	}
	check("untagged", "0.0.0-dev+"+c)
	git("tag", "not-a-release")
	git("tag", "v1.0")
	check("tags that are not vMAJOR.MINOR.PATCH", "0.0.0-dev+"+c)
	git("tag", "-a", "-m", "release", "v0.9.0")
	check("at the tag", "0.9.0")
	if err := os.WriteFile(filepath.Join(repo, "f"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	check("at the tag, changed", "0.9.0+dirty")
	commit("two")
	c = commit("three")
	check("two commits past", "0.9.0+2.g"+c)
	git("tag", "v0.10.0-rc.1") // lightweight tags count too
	check("a prerelease tag", "0.10.0-rc.1")
	c = commit("four")
	check("past a prerelease", "0.10.0-rc.1+1.g"+c)
	git("tag", "v0.10.0")
	check("the release after", "0.10.0")

	// Every form is a semantic version (semver.org's own pattern).
	semver := regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)
	for _, v := range []string{"0.0.0-dev+" + c, "0.9.0+dirty", "0.9.0+2.g" + c, "0.10.0-rc.1+1.g" + c + ".dirty"} {
		if !semver.MatchString(v) {
			t.Errorf("%q is not a semantic version", v)
		}
	}
}

// electd version prints the stamped release number; an unstamped build
// (plain go build) names itself 0.0.0-dev+COMMIT, as version.sh would.
func TestVersionCommand(t *testing.T) {
	defer func(v, c string) { version, commit = v, c }(version, commit)
	for _, tc := range []struct {
		name, version, commit, want string
	}{
		{"release", "0.9.0", "0123456789abcdef0123", "electd 0.9.0 (commit 0123456789abcdef0123, go"},
		{"past a release", "0.9.0+4.gabc", "abc", "electd 0.9.0+4.gabc (commit abc, go"},
		{"unstamped", "", "0123456789abcdef0123", "electd 0.0.0-dev+0123456789ab (commit 0123456789abcdef0123, go"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			version, commit = tc.version, tc.commit
			var out, errs bytes.Buffer
			if code := run([]string{"version"}, &out, &errs); code != 0 || !strings.HasPrefix(out.String(), tc.want) {
				t.Errorf("electd version: %d %q (stderr %q), want it to start %q", code, out.String(), errs.String(), tc.want)
			}
		})
	}
}
