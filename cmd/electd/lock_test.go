package main

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/config"
	"github.com/electd/electd/internal/timing"
	"github.com/electd/electd/providers/sql"
)

// TestLockUsage: what electd lock refuses before it touches a store: exit
// 2, the problem and the usage on stderr, and never the URL's password.
// The runs of the real binary against real stores are in systest.
func TestLockUsage(t *testing.T) {
	const pw = "Hunter2-secret"
	db := "sqlite://" + filepath.Join(t.TempDir(), "leases.db")
	cases := []struct {
		name, env string
		args      []string
		stderr    string
	}{
		{"no NAME", "", []string{"-provider", db}, "missing NAME"},
		{"no command", "", []string{"-provider", db, "job"}, "missing COMMAND after --"},
		{"empty command", "", []string{"-provider", db, "job", "--"}, "missing COMMAND after --"},
		{"command without --", "", []string{"-provider", db, "job", "echo", "hi"}, "write -- before the command"},
		{"two names", "", []string{"-provider", db, "job", "other", "--", "true"}, `unexpected argument "other" before --`},
		{"no provider", "", []string{"job", "--", "true"}, "missing -provider URL (or $ELECTD_LOCK_PROVIDER)"},
		{"provider from the environment", "nonsense", []string{"job", "--", "true"}, "the provider is not a URL"},
		{"unknown scheme", "", []string{"-provider", "azblob://acct/c", "job", "--", "true"}, "no lease store of this build has URLs azblob://"},
		{"bad URL", "", []string{"-provider", "postgres://u:" + pw + "@db:port/x", "job", "--", "true"}, "invalid postgres URL"},
		{"bad URL, password", "", []string{"-provider", "redis://u:" + pw + "@a:1,b:2", "job", "--", "true"}, "invalid redis URL"},
		{"bad NAME", "", []string{"-provider", db, "no spaces", "--", "true"}, `the NAME "no spaces" must start with a letter or digit`},
		{"NAME too long", "", []string{"-provider", db, strings.Repeat("a", 256), "--", "true"}, "at most 255 bytes"},
		{"ttl too short", "", []string{"-provider", db, "-ttl", "500ms", "job", "--", "true"}, "-ttl 500ms is shorter than 1s"},
		{"stop timeout too long", "", []string{"-provider", db, "-ttl", "2s", "-stop-timeout", "5s", "job", "--", "true"},
			"-ttl 2s leaves no time to renew the lease: three renewals and the command's stop (-stop-timeout 5s plus a 100ms kill margin) must fit in 99% of the ttl; raise -ttl to at least 6s"},
		{"bad timeout", "", []string{"-provider", db, "-timeout", "soon", "job", "--", "true"}, `invalid value "soon" for flag -timeout`},
		{"negative timeout", "", []string{"-provider", db, "-timeout", "-1s", "job", "--", "true"}, "invalid value"},
		{"bad log level", "", []string{"-provider", db, "-log-level", "loud", "job", "--", "true"}, `-log-level "loud" is not one of`},
		{"flags after NAME", "", []string{"job", "-provider", db, "-ttl", "500ms", "--", "true"}, "-ttl 500ms is shorter than 1s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(envLockProvider, tc.env)
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"lock"}, tc.args...), &stdout, &stderr)
			if code != 2 {
				t.Errorf("exit %d, want 2\n%s", code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("stderr does not contain %q:\n%s", tc.stderr, stderr.String())
			}
			if !strings.Contains(stderr.String(), "Usage: electd lock [flags] NAME -- COMMAND [ARG...]") {
				t.Errorf("no usage on stderr:\n%s", stderr.String())
			}
			if strings.Contains(stderr.String(), pw) {
				t.Errorf("the password was printed:\n%s", stderr.String())
			}
			if stdout.Len() > 0 {
				t.Errorf("stdout: %q, want nothing", stdout.String())
			}
		})
	}
}

// TestLockTimings: the timings electd lock derives satisfy the timing rule
// that `electd check` applies to a job (docs/leases.md), with room for a
// third renewal, for every ttl it accepts.
func TestLockTimings(t *testing.T) {
	for ttl := config.MinTTL; ttl <= 10*time.Minute; ttl += ttl / 4 {
		for _, stop := range []time.Duration{0, min(config.DefaultStopTimeout, ttl/3), ttl / 2} {
			renew, retry, err := lockTimings(ttl, stop)
			budget := timing.Budget(ttl)
			if err != nil {
				if 3*minLockRenew+stop+timing.KillMargin < budget {
					t.Errorf("ttl %s, stop %s: refused (%v), though %s renewals fit", ttl, stop, err, minLockRenew)
				}
				continue
			}
			if timing.CheckJob(ttl, renew, stop) != nil || 3*renew+stop+timing.KillMargin > budget {
				t.Errorf("ttl %s, stop %s: renew_every %s breaks the rule (3×renew + stop + kill margin must fit in %s)", ttl, stop, renew, budget)
			}
			if renew < minLockRenew || retry <= 0 || retry > renew {
				t.Errorf("ttl %s, stop %s: renew_every %s, retry_every %s", ttl, stop, renew, retry)
			}
		}
	}
	// The default stop timeout always fits.
	for _, ttl := range []time.Duration{time.Second, 2 * time.Second, 15 * time.Second, time.Hour} {
		job, problems := lockJob("job", []string{"true"}, "sql", &sql.Settings{Driver: "sqlite", DSN: "x.db"}, ttl, optionalDuration{})
		if len(problems) > 0 {
			t.Errorf("ttl %s: %v", ttl, problems)
		}
		if job.Run.StopTimeout > config.DefaultStopTimeout || job.Run.StopTimeout > ttl/3 {
			t.Errorf("ttl %s: default stop timeout %s", ttl, job.Run.StopTimeout)
		}
	}
}

// electd lock's word on a command that cannot start names the program and
// the system's answer, not the packages that passed the error on.
func TestStartFailure(t *testing.T) {
	for _, tc := range []struct{ program, err, want string }{
		{"nosuch", `the command cannot start on this node: proc: cannot start "nosuch": exec: "nosuch": executable file not found in $PATH`,
			`cannot start the command "nosuch": executable file not found in $PATH`},
		{"/etc/passwd", `the command cannot start on this node: proc: cannot start "/etc/passwd": fork/exec /etc/passwd: permission denied`,
			`cannot start the command "/etc/passwd": permission denied`},
		{"true", `the command cannot start on this node: proc: cannot start "true": chdir /nope: no such file or directory`,
			`cannot start the command "true": chdir /nope: no such file or directory`},
	} {
		if got := startFailure(errors.New(tc.err), tc.program); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.err, got, tc.want)
		}
	}
}
