package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// fakeAgent records the requests the CLI sends to an agent's API.
type fakeAgent struct {
	mu   sync.Mutex
	reqs []string // "METHOD PATH AUTHORIZATION"
}

func (a *fakeAgent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	a.reqs = append(a.reqs, strings.TrimSpace(r.Method+" "+r.URL.EscapedPath()+" "+r.Header.Get("Authorization")))
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if r.Method == http.MethodPost {
		w.WriteHeader(http.StatusAccepted)
		w.Write([]byte(`{"result":"stepping down"}`))
		return
	}
	w.Write([]byte(`[]`))
}

func (a *fakeAgent) requests() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.reqs...)
}

// TestArguments: every subcommand takes flags before and after its
// positionals, treats everything after "--" as positional, and refuses
// with exit 2 and its usage what it would otherwise drop. In args, URL is
// a fake agent, UNFORMATTED an unformatted file.
func TestArguments(t *testing.T) {
	t.Setenv(envAddr, "")
	t.Setenv(envToken, "")
	cases := []struct {
		name    string
		args    string
		code    int
		stdout  string // a substring of stdout, when not ""
		stderr  string // a substring of stderr, when not ""
		request string // the requests the agent got, "|" between them, "" for none
	}{
		{"status: flags", "status -addr URL -json", 0, "[]", "", "GET /v1/jobs"},
		{"status: -- alone", "status -addr URL --", 0, "JOB", "", "GET /v1/jobs|GET /v1/agent|GET /healthz"},
		{"status: extra argument", "status extra", 2, "", `unexpected argument "extra"`, ""},
		{"status: extra argument before flags", "status extra -addr URL", 2, "", `unexpected argument "extra"`, ""},
		{"status: extra argument after --", "status -addr URL -- extra", 2, "", `unexpected argument "extra"`, ""},
		{"status: unknown flag", "status -nope", 2, "", "flag provided but not defined: -nope", ""},
		{"status: flag without its value", "status -addr", 2, "", "flag needs an argument: -addr", ""},

		{"step-down: flags after the job", "step-down billing -addr URL", 0, "billing: stepping down", "", "POST /v1/jobs/billing/step-down"},
		{"step-down: flags before the job", "step-down -addr URL billing", 0, "", "", "POST /v1/jobs/billing/step-down"},
		{"step-down: flags around the job", "step-down -token T billing -addr URL", 0, "", "", "POST /v1/jobs/billing/step-down Bearer T"},
		{"step-down: double-dash flags", "step-down billing --addr=URL", 0, "", "", "POST /v1/jobs/billing/step-down"},
		{"step-down: job after --", "step-down -addr URL -- -odd", 0, "", "", "POST /v1/jobs/-odd/step-down"},
		{"step-down: flag after -- is a second job", "step-down -- billing -addr URL", 2, "", `unexpected argument "-addr"`, ""},
		{"step-down: two jobs", "step-down a b -addr URL", 2, "", `unexpected argument "b"`, ""},
		{"step-down: no job", "step-down -addr URL", 2, "", "missing JOB", ""},

		{"drain: flags", "drain -addr URL -wait 0", 0, "draining", "", "POST /v1/drain"},
		{"drain: cancel", "drain -cancel -addr URL -token T", 0, "cancelled", "", "POST /v1/drain Bearer T"},
		{"drain: extra argument", "drain extra", 2, "", `unexpected argument "extra"`, ""},
		{"history: flags after the job", "history etl -addr URL", 0, "REASON", "", "GET /v1/jobs/etl/history"},
		{"history: no job", "history -addr URL", 2, "", "missing JOB", ""},
		{"trigger: flags after the job", "trigger report -addr URL -token T", 0, "report: run requested", "", "POST /v1/jobs/report/trigger Bearer T"},
		{"trigger: no job", "trigger -addr URL", 2, "", "missing JOB", ""},

		{"version: extra argument", "version extra", 2, "", `unexpected argument "extra"`, ""},
		{"version: -- alone", "version --", 0, "electd ", "", ""},

		{"check: flag after the path", "check testdata/check_warning.hcl -json", 0, `"valid": true`, "", ""},
		{"check: bad flag after the path", "check testdata/check_warning.hcl -bogus", 2, "", "flag provided but not defined: -bogus", ""},
		{"check: -config after a path", "check testdata/check_warning.hcl -config testdata/check_errors.hcl", 1, "", "check_errors.hcl", ""},

		{"leases: bad value after the path", "leases testdata/check_errors.hcl -timeout soon", 2, "", `invalid value "soon" for flag -timeout`, ""},

		{"fmt: flag after the path", "fmt UNFORMATTED -write=false", 0, "UNFORMATTED", "", ""},
		{"fmt: -check before --", "fmt -check -- UNFORMATTED", 1, "UNFORMATTED", "", ""},

		{"run: flag without its value", "run -config", 2, "", "flag needs an argument: -config", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			agent := &fakeAgent{}
			srv := httptest.NewServer(agent)
			defer srv.Close()
			dir := t.TempDir()
			unformatted := copyFile(t, "testdata/fmt_in.hcl", dir)
			r := strings.NewReplacer("URL", srv.URL, "UNFORMATTED", unformatted)
			args := strings.Fields(r.Replace(tc.args))

			var stdout, stderr bytes.Buffer
			code := run(args, &stdout, &stderr)
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, stdout.String(), stderr.String())
			}
			if want := r.Replace(tc.stdout); !strings.Contains(stdout.String(), want) {
				t.Errorf("stdout does not contain %q:\n%s", want, stdout.String())
			}
			if !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("stderr does not contain %q:\n%s", tc.stderr, stderr.String())
			}
			if tc.code == 2 && !strings.Contains(stderr.String(), "Usage: electd "+args[0]) {
				t.Errorf("exit 2 without the usage on stderr:\n%s", stderr.String())
			}
			var want []string
			if tc.request != "" {
				want = strings.Split(tc.request, "|")
			}
			if got := agent.requests(); !reflect.DeepEqual(got, want) {
				t.Errorf("agent got %q, want %q", got, want)
			}
			// Neither fmt case may write: a flag read as a path would let it.
			src, _ := os.ReadFile(unformatted)
			if orig, _ := os.ReadFile("testdata/fmt_in.hcl"); !bytes.Equal(src, orig) {
				t.Errorf("electd %s rewrote the file", tc.args)
			}
		})
	}
}

// TestRunFlagAfterThePath: run reads -allow-unsafe-config after the path,
// so it gets past the permission check to the (invalid) configuration; a
// case of its own because a valid one would start the agent.
func TestRunFlagAfterThePath(t *testing.T) {
	unsafe := filepath.Join(t.TempDir(), "unsafe.hcl")
	if err := os.WriteFile(unsafe, []byte("job \"a\" {\n  ttl = \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(unsafe, 0o666); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"run", unsafe, "-allow-unsafe-config"}, &stdout, &stderr)
	if code != 1 || strings.Contains(stderr.String(), "world-writable") || !strings.Contains(stderr.String(), "the configuration is invalid") {
		t.Errorf("exit %d, want 1 for the invalid configuration, not its permissions:\n%s", code, stderr.String())
	}
}

// TestHelp: -h of every subcommand prints on stdout what the command is
// for and every flag with a description, and exits 0.
func TestHelp(t *testing.T) {
	t.Setenv(envAddr, "")
	// want: the usage line, then the flags and the defaults the help must show.
	want := map[string][]string{
		"run":       {"Usage: electd run [flags] [PATH...]", "-config PATH", "default /etc/electd", "-allow-unsafe-config"},
		"check":     {"Usage: electd check [flags] [PATH...]", "-config PATH", "default /etc/electd", "-json"},
		"fmt":       {"Usage: electd fmt [flags] [PATH...]", "-check", "-diff", "-write", "(default true)"},
		"status":    {"Usage: electd status [flags]\n", "-addr URL", `(default "http://127.0.0.1:8790")`, "-json"},
		"step-down": {"Usage: electd step-down [flags] JOB\n", "-addr URL", `(default "http://127.0.0.1:8790")`, "-token TOKEN", "env ELECTD_API_TOKEN"},
		"leases":    {"Usage: electd leases [flags] [PATH...]", "-config PATH", "default /etc/electd", "-json", "-timeout duration", "(default 10s)"},
		"lock":      {"Usage: electd lock [flags] NAME -- COMMAND [ARG...]\n", "-provider URL", "$ELECTD_LOCK_PROVIDER", "-ttl duration", "(default 15s)", "-timeout D", "-stop-timeout D", "Exit status:", "sqlite://", "postgres://", "etcd://"},
		"version":   {"Usage: electd version\n"},
		"drain":     {"Usage: electd drain [flags]\n", "-addr URL", "-token TOKEN", "-cancel", "-wait D", "(default 2m0s)"},
		"history":   {"Usage: electd history [flags] JOB\n", "-addr URL", "-json"},
		"trigger":   {"Usage: electd trigger [flags] JOB\n", "-addr URL", "-token TOKEN", "-wait", "-timeout D", "at most once"},
		"plan":      {"Usage: electd plan [flags] [PATH...]", "-config PATH", "-addr URL", "-token TOKEN", "-json", "Exit status: 0 when nothing would change, 2 when something would"},
		"reload":    {"Usage: electd reload [flags]\n", "-addr URL", "-token TOKEN", "-json", "as SIGHUP does"},
	}
	var names []string
	for _, s := range commands() {
		if !s.hidden {
			names = append(names, s.name)
		}
	}
	for _, name := range names {
		for _, h := range []string{"-h", "-help", "--help"} {
			t.Run(name+" "+h, func(t *testing.T) {
				wants, ok := want[name]
				if !ok {
					t.Fatalf("no help expectations for the subcommand %q: add them", name)
				}
				var stdout, stderr bytes.Buffer
				if code := run([]string{name, h}, &stdout, &stderr); code != 0 {
					t.Errorf("exit %d, want 0\n%s", code, stderr.String())
				}
				out := stdout.String()
				for _, w := range wants {
					if !strings.Contains(out, w) {
						t.Errorf("help does not contain %q:\n%s", w, out)
					}
				}
				checkHelpShape(t, out)
			})
		}
	}
}

// checkHelpShape: a sentence after the usage line, and a description under
// every flag that PrintDefaults lists ("  -name type" then "    \tusage").
func checkHelpShape(t *testing.T, help string) {
	t.Helper()
	lines := strings.Split(help, "\n")
	if len(lines) < 3 || lines[1] != "" || !strings.HasSuffix(strings.TrimSpace(lines[2]), ".") {
		t.Errorf("help lacks a sentence on what the command does after the usage line:\n%s", help)
	}
	for i, l := range lines {
		if !strings.HasPrefix(l, "  -") {
			continue
		}
		if i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "    \t") || len(strings.TrimSpace(lines[i+1])) < 10 {
			t.Errorf("flag %q has no description:\n%s", strings.TrimSpace(l), help)
		}
	}
}

func TestSplitArgs(t *testing.T) {
	fs := newCommandFrom(cmdSpec{name: "x", operands: "[ARG...]", max: anyNumber, about: "A command for the test.",
		flags: []flagSpec{{"addr", stringFlag, "", "address"}, {"json", boolFlag, false, "json"}}})
	cases := []struct {
		args, flags, pos string
	}{
		{"a -addr X b", "-addr X", "a b"},
		{"a --addr X b", "--addr X", "a b"},
		{"a -addr=X b", "-addr=X", "a b"},
		{"-json a -json=false b", "-json -json=false", "a b"},
		{"-addr -- a", "-addr --", "a"}, // "--" as a flag's value ends nothing
		{"a -- -json -addr X", "", "a -json -addr X"},
		{"- -json", "-json", "-"}, // "-" is fmt's stdin, a positional
		{"-nope a", "-nope", "a"}, // unknown flags are left for Parse to report
	}
	for _, tc := range cases {
		flags, pos := fs.split(strings.Fields(tc.args))
		if strings.Join(flags, " ") != tc.flags || strings.Join(pos, " ") != tc.pos {
			t.Errorf("split(%q) = flags %q, positionals %q; want %q, %q", tc.args, flags, pos, tc.flags, tc.pos)
		}
	}
}
