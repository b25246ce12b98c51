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

// Every command of the table is in `electd -h`, the man page and both
// completion scripts, each with all its flags, and its -h starts with its
// usage line and lists every flag; the hidden commands are in none of them.
func TestCommandTableEverywhere(t *testing.T) {
	t.Setenv(envAddr, "")
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	var top, stderr bytes.Buffer
	if code := run([]string{"-h"}, &top, &stderr); code != 0 {
		t.Fatalf("electd -h: exit %d\n%s", code, stderr.String())
	}
	page := manOutput(t)
	scripts := map[string]string{}
	for _, shell := range []string{"bash", "zsh"} {
		src, err := os.ReadFile(completionScript(t, shell))
		if err != nil {
			t.Fatal(err)
		}
		scripts[shell] = string(src)
	}
	seen := map[string]bool{}
	for _, s := range commands() {
		if seen[s.name] {
			t.Errorf("%s: twice in the table", s.name)
		}
		seen[s.name] = true
		listed := regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(s.name) + ` +` + regexp.QuoteMeta(s.summary) + `$`).MatchString(top.String())
		section := strings.Contains(page, ".SS "+roffQuote(s.line())+"\n")
		bashCase := regexp.MustCompile(`(?m)^\t` + regexp.QuoteMeta(s.name) + `\) flags='`).FindStringIndex(scripts["bash"])
		zshCase := regexp.MustCompile(`(?m)^\t\(` + regexp.QuoteMeta(s.name) + `\)$`).FindStringIndex(scripts["zsh"])
		zshListed := strings.Contains(scripts["zsh"], "\t\t"+zshQuote(s.name+":"+strings.ReplaceAll(s.summary, ":", `\:`))+"\n")
		if s.hidden {
			if listed || section || bashCase != nil || zshCase != nil || zshListed {
				t.Errorf("%s is hidden but listed: electd -h %v, man %v, bash %v, zsh %v", s.name, listed, section, bashCase != nil, zshCase != nil || zshListed)
			}
			continue
		}
		if s.summary == "" || !strings.HasSuffix(s.about, ".") || s.run == nil {
			t.Errorf("%s: a summary, a text ending in a full stop and an entry point are needed", s.name)
		}
		if !listed || !section || bashCase == nil || zshCase == nil || !zshListed {
			t.Errorf("%s: electd -h %v, man %v, bash %v, zsh %v; want it in all", s.name, listed, section, bashCase != nil, zshCase != nil && zshListed)
			continue
		}
		var help bytes.Buffer
		if code := run([]string{s.name, "-h"}, &help, &stderr); code != 0 {
			t.Fatalf("electd %s -h: exit %d\n%s", s.name, code, stderr.String())
		}
		if !strings.HasPrefix(help.String(), "Usage: "+s.line()+"\n\n"+s.about+"\n") {
			t.Errorf("%s -h does not start with its usage line and text:\n%s", s.name, help.String())
		}
		// The command's case in each script: up to the next one.
		bashText := scripts["bash"][bashCase[0]:]
		bashText, _, _ = strings.Cut(bashText, "\n")
		zshText := scripts["zsh"][zshCase[1]:]
		zshText, _, _ = strings.Cut(zshText, ";;")
		for _, f := range s.flags {
			if !strings.Contains(help.String(), "\n  -"+f.name+" ") && !strings.Contains(help.String(), "\n  -"+f.name+"\n") {
				t.Errorf("%s -h lacks -%s:\n%s", s.name, f.name, help.String())
			}
			if !strings.Contains(page, `\fB\-`+roffText(f.name)+`\fR`) {
				t.Errorf("man page: %s lacks -%s", s.name, f.name)
			}
			if !strings.Contains(" "+strings.Trim(strings.SplitN(bashText, "'", 3)[1], "'")+" ", " -"+f.name+" ") {
				t.Errorf("bash: %s lacks -%s: %s", s.name, f.name, bashText)
			}
			if !regexp.MustCompile(`'\*?-` + regexp.QuoteMeta(f.name) + `\[`).MatchString(zshText) {
				t.Errorf("zsh: %s lacks -%s:%s", s.name, f.name, zshText)
			}
		}
	}
}

// The entries the man page and the completions are written from carry
// what the flags are: run -config is a repeatable path.
func TestHelpTable(t *testing.T) {
	for _, e := range helpTable() {
		if e.name != "run" {
			continue
		}
		for _, f := range e.flags {
			if f.name == "config" && (!f.repeatable || !f.takesPath()) {
				t.Errorf("run -config: %+v, want a repeatable path", f)
			}
		}
		return
	}
	t.Error("no run in the table")
}

// man and completion are for the build: `electd -h` does not list them.
func TestHiddenCommands(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"completion", "fish"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), `unknown shell "fish"`) {
		t.Errorf("completion fish: exit %d, stderr %q; want 2 and the problem", code, stderr.String())
	}
	if code := run([]string{"man", "extra"}, &stdout, &stderr); code != 2 {
		t.Errorf("man extra: exit %d, want 2", code)
	}
}

func manOutput(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run(append([]string{"man"}, args...), &stdout, &stderr); code != 0 {
		t.Fatalf("electd man: exit %d\n%s", code, stderr.String())
	}
	return stdout.String()
}

// The page documents every command and flag, dated by SOURCE_DATE_EPOCH, and
// groff sets it without a warning.
func TestManPage(t *testing.T) {
	t.Setenv(envAddr, "http://elsewhere:1")
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	page := manOutput(t, "-docdir", "/opt/electd/doc")
	if os.Getenv(envAddr) != "" {
		t.Errorf("electd man left %s set", envAddr)
	}
	if !strings.Contains(page, `.TH ELECTD 1 "2023-11-14"`) {
		t.Errorf("the page is not dated by SOURCE_DATE_EPOCH:\n%.300s", page)
	}
	if strings.Contains(page, "elsewhere") {
		t.Errorf("the page shows this shell's %s as a default", envAddr)
	}
	if page != manOutput(t, "-docdir", "/opt/electd/doc") {
		t.Error("two runs give two pages")
	}
	for _, line := range strings.Split(strings.TrimSuffix(page, "\n"), "\n") {
		if line == "" || (strings.HasPrefix(line, "'") || strings.HasPrefix(line, ".") && !regexp.MustCompile(`^\.(\\"|TH|SH|SS|TP|PP|RS|RE|nf|fi|nh|BR) ?`).MatchString(line)) {
			t.Errorf("stray line in the roff: %q", line)
		}
	}

	groff, err := exec.LookPath("groff")
	if err != nil {
		t.Log("groff is not installed: the page is not set")
		return
	}
	cmd := exec.Command(groff, "-man", "-Tascii", "-ww", "-P-cbou")
	cmd.Stdin = strings.NewReader(page)
	var text, warnings bytes.Buffer
	cmd.Stdout, cmd.Stderr = &text, &warnings
	if err := cmd.Run(); err != nil || warnings.Len() > 0 {
		t.Fatalf("groff: %v\n%s", err, warnings.String())
	}
	words := strings.Join(strings.Fields(text.String()), " ") // as set, lines wrap anywhere
	for _, want := range []string{"electd step-down [flags] JOB", "-config PATH", "default /etc/electd)",
		`(default "http://127.0.0.1:8790")`, "/opt/electd/doc/", "EXIT STATUS"} {
		if !strings.Contains(words, want) {
			t.Errorf("the set page lacks %q:\n%s", want, text.String())
		}
	}
}

func completionScript(t *testing.T, shell string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run([]string{"completion", shell}, &stdout, &stderr); code != 0 {
		t.Fatalf("electd completion %s: exit %d\n%s", shell, code, stderr.String())
	}
	path := filepath.Join(t.TempDir(), "electd."+shell)
	if err := os.WriteFile(path, stdout.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// Bash completes commands, each command's flags, paths where a command takes
// them, and the command line of electd lock after --.
func TestBashCompletion(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is not installed")
	}
	script := completionScript(t, "bash")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "site.hcl"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// complete returns what Tab offers after the words (the last one is
	// the word being completed).
	complete := func(words ...string) []string {
		t.Helper()
		src := `source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _electd; printf '%s\n' "${COMPREPLY[@]}"`
		out, err := exec.Command(bash, append([]string{"--norc", "-c", src, "bash", script, "electd"}, words...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", words, err, out)
		}
		return strings.Fields(string(out))
	}
	cases := []struct {
		words []string
		want  string
	}{
		{[]string{"st"}, "status step-down"},
		{[]string{"step-down", "-"}, "-h -addr -token"},
		{[]string{"run", "-c"}, "-config"},
		{[]string{"check", "-config", dir + "/s"}, dir + "/site.hcl"},
		{[]string{"check", dir + "/s"}, dir + "/site.hcl"},
		{[]string{"check", "--config", dir + "/s"}, dir + "/site.hcl"},
		{[]string{"status", "-addr", ""}, ""},
		{[]string{"step-down", "j"}, ""},
		{[]string{"lock", "-provider", "sqlite:x.db", "name", "--", "bas"}, "bash"},
		{[]string{"nosuch", "-"}, ""},
	}
	for _, c := range cases {
		got := complete(c.words...)
		if c.want == "bash" { // compgen -c: every command on PATH starting with "bas"
			if !strings.Contains(" "+strings.Join(got, " ")+" ", " bash ") {
				t.Errorf("%v: %v, want bash among them", c.words, got)
			}
			continue
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("%v: %q, want %q", c.words, strings.Join(got, " "), c.want)
		}
	}
}

// zshDriver types each case and Tab into an interactive zsh (zsh/zpty), with
// the completion directory $1 in fpath, and prints what the terminal shows
// after "=== case". Ctrl-U then clears the line, so no case is ever run, and
// a command prints a marker: zle reads keys in order, so everything the
// completion drew comes before the marker's output, whatever the machine's
// load (the driver slept a second per case before, and lost the slowest
// completion, of a command on PATH, under load).
const zshDriver = `
zmodload zsh/zpty
zpty z zsh -f -i
zpty -n -w z "PROMPT='> '; fpath=(${(q)1} \$fpath); autoload -Uz compinit; compinit -u -D; LISTMAX=1000; zstyle ':completion:*' format '<%d>'"$'\n'
shift
local out all n=0
zpty -n -w z "print -r -- READY\$((1+1))"$'\n'
zpty -r z out '*READY2*> *'
for c in "$@"; do
	n=$((n+1))
	zpty -n -w z "$c"$'\t'
	zpty -n -w z $'\C-u'"print -r -- DONE\$(($n+1000))"$'\n'
	all=
	zpty -r z all "*DONE$((n+1000))*> *"
	print -r -- "=== $c"
	print -r -- "$all"
done
zpty -d z
`

// The zsh script parses, compinit registers it for electd, and Tab in an
// interactive zsh completes commands, flags, paths and the command of lock.
func TestZshCompletion(t *testing.T) {
	zsh, err := exec.LookPath("zsh")
	if err != nil {
		t.Skip("zsh is not installed (scripts/services.sh lintian installs it)")
	}
	script := completionScript(t, "zsh")
	if out, err := exec.Command(zsh, "-n", script).CombinedOutput(); err != nil {
		t.Fatalf("zsh -n: %v\n%s", err, out)
	}
	dir := t.TempDir()
	if err := os.Rename(script, filepath.Join(dir, "_electd")); err != nil {
		t.Fatal(err)
	}
	src := `fpath=("$1" $fpath); autoload -Uz compinit; compinit -u -D; print -r -- "$_comps[electd]"`
	out, err := exec.Command(zsh, "-f", "-c", src, "zsh", dir).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "_electd" {
		t.Errorf("compinit: %v, electd completes with %q, want _electd", err, out)
	}

	if err := os.WriteFile(filepath.Join(dir, "site.hcl"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[string][]string{
		"electd st":                        {"status", "step-down", "show the jobs of a running agent"},
		"electd check -":                   {"-json", "-no-env", "-config"},
		"electd run -config " + dir + "/s": {"site.hcl"},
		"electd step-down ":                {"<JOB>"},
		"electd lock -ttl 5s x -- slee":    {"-- sleep "}, // a command on PATH
	}
	args := []string{"-f", "-c", zshDriver, "zsh", dir}
	for c := range cases {
		args = append(args, c)
	}
	out, err = exec.Command(zsh, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("zsh: %v\n%s", err, out)
	}
	screen := regexp.MustCompile("\x1b\\[[0-9;?]*[a-zA-Z]|\r").ReplaceAllString(string(out), "")
	shown := map[string]string{}
	for _, part := range strings.Split(screen, "=== ")[1:] {
		c, text, _ := strings.Cut(part, "\n")
		shown[c] = text
	}
	for c, wants := range cases {
		for _, w := range wants {
			if !strings.Contains(shown[c], w) {
				t.Errorf("%q then Tab shows no %q:\n%s", c, w, shown[c])
			}
		}
	}
}
