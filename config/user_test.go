package config

import (
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// noSwitchOpts load as an agent that cannot switch users would, whatever
// user the test runs as: the error fixtures are the same everywhere.
var noSwitchOpts = func() Options {
	o := testOpts
	o.canSwitchUser = func() error { return errors.New("the agent (uid 1000) lacks CAP_SETUID, CAP_SETGID and CAP_KILL") }
	o.agentIDs = func() (uint32, uint32, []uint32) { return 1000, 1000, nil }
	return o
}()

func writeConfig(t *testing.T, src string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "electd.hcl")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A job's user, group and umask are looked up when the configuration loads:
// the user's uid, primary group and supplementary groups, a group that
// replaces the primary one, the umask in octal.
func TestRunAs(t *testing.T) {
	setTestEnv(t)
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody here: %v", err)
	}
	path := writeConfig(t, `
job "as-nobody" {
  user  = "nobody"
  umask = "0027"
  run { command = ["id"] }
}
job "as-nobody-root-group" {
  user  = "nobody"
  group = "0"
  task {
    schedule = "@hourly"
    command  = ["id"]
  }
}
job "umask-only" {
  umask = "077"
  run { command = ["id"] }
}
job "plain" {
  run { command = ["id"] }
}
`)
	opts := testOpts
	opts.canSwitchUser = func() error { return nil }
	cfg, diags := Load([]string{path}, opts)
	if diags.HasErrors() {
		t.Fatal(diags.Err())
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	r := job(t, cfg, "as-nobody").RunAs
	if r == nil || !r.Resolved || !r.Switches() || r.Uid != uint32(uid) || r.Gid != uint32(gid) || r.Umask == nil || *r.Umask != 0o027 {
		t.Errorf("as-nobody: RunAs %+v, want uid %d gid %d umask 027, resolved", r, uid, gid)
	}
	if r := job(t, cfg, "as-nobody-root-group").RunAs; r == nil || r.Uid != uint32(uid) || r.Gid != 0 || r.Umask != nil {
		t.Errorf("as-nobody-root-group: RunAs %+v, want uid %d gid 0, no umask", r, uid)
	}
	if r := job(t, cfg, "umask-only").RunAs; r == nil || r.Switches() || !r.Resolved || r.Umask == nil || *r.Umask != 0o077 {
		t.Errorf("umask-only: RunAs %+v, want umask 077 and no switch", r)
	}
	if r := job(t, cfg, "plain").RunAs; r != nil {
		t.Errorf("plain: RunAs %+v, want nil", r)
	}

	// An agent that cannot switch users refuses the first two jobs, on the
	// user attribute's line; the umask alone needs nothing.
	_, diags = Load([]string{path}, noSwitchOpts)
	var lines []int
	for _, d := range diags.All() {
		if d.Summary != "Cannot switch users" || d.Subject == nil {
			t.Errorf("unexpected diagnostic %s: %s", d.Summary, d.Detail)
			continue
		}
		if !strings.Contains(d.Detail, "CAP_SETUID") || !strings.Contains(d.Detail, "docs/operations.md") {
			t.Errorf("the detail does not say what is missing and where to read how: %q", d.Detail)
		}
		lines = append(lines, d.Subject.Start.Line)
	}
	if len(lines) != 2 || lines[0] != 3 || lines[1] != 8 {
		t.Errorf("Cannot switch users on lines %v, want [3 8] (the user attributes)", lines)
	}

	// check -no-env looks nothing up: a user of the production hosts need
	// not exist where CI checks the configuration, nor CI run as root.
	path = writeConfig(t, `
job "a" {
  user  = "electd-no-such-user"
  group = env("JOB_GROUP")
  umask = "0027"
  run { command = ["id"] }
}
`)
	opts = noSwitchOpts
	opts.NoEnv = true
	cfg, diags = Load([]string{path}, opts)
	if diags.HasErrors() {
		t.Fatalf("check -no-env: %s", diags.Err())
	}
	if r := job(t, cfg, "a").RunAs; r == nil || r.Resolved || r.User != "electd-no-such-user" {
		t.Errorf("check -no-env: RunAs %+v, want the user as written, unresolved", r)
	}
}

// canSwitchUser reads this process's capabilities: as root (with the full
// set) it can, and says nothing.
func TestCanSwitchUser(t *testing.T) {
	if os.Geteuid() != 0 {
		if err := canSwitchUser(); err == nil {
			t.Skip("not root, yet able to switch users (capabilities given): nothing to compare")
		} else if !strings.Contains(err.Error(), "CAP_") {
			t.Errorf("the refusal does not name the missing capabilities: %v", err)
		}
		return
	}
	if err := canSwitchUser(); err != nil {
		t.Errorf("as root: %v", err)
	}
}

// A job that names the agent's own user (or its primary group) switches
// nothing, so an agent without the capabilities to switch takes it: the
// packaged unit's agent runs as electd, and a job may say user = "electd".
func TestRunAsTheAgentsOwnUser(t *testing.T) {
	setTestEnv(t)
	me, err := user.Current()
	if err != nil {
		t.Skipf("this process's user is not in the user database: %v", err)
	}
	ids, err := lookupUser(me.Username)
	if err != nil {
		t.Skip(err)
	}
	uid, gid, groups := processIDs()
	if ids.uid != uid || ids.gid != gid || !sameGroups(ids.groups, groups, ids.gid) {
		t.Skipf("this process's ids differ from its user's in the database (%+v): not the agent's own user", ids)
	}
	g, err := user.LookupGroupId(strconv.Itoa(os.Getgid()))
	if err != nil {
		t.Skip(err)
	}
	path := writeConfig(t, `
job "as-me" {
  user  = "`+me.Username+`"
  umask = "0027"
  run { command = ["id"] }
}
job "my-group" {
  group = "`+g.Name+`"
  run { command = ["id"] }
}
`)
	// An agent that cannot switch users, running as this process does.
	opts := noSwitchOpts
	opts.agentIDs = nil
	cfg, diags := Load([]string{path}, opts)
	if diags.HasErrors() {
		t.Fatalf("an agent that cannot switch users refuses its own user: %s", diags.Err())
	}
	for _, name := range []string{"as-me", "my-group"} {
		if r := job(t, cfg, name).RunAs; r == nil || !r.Resolved || r.Switches() || !r.Agents {
			t.Errorf("%s: RunAs %+v, want resolved, the agent's own, no switch", name, r)
		}
	}
	if r := job(t, cfg, "as-me").RunAs; r.Umask == nil || *r.Umask != 0o027 {
		t.Errorf("as-me: umask %v, want 027 kept", r.Umask)
	}

	// Another user is still refused.
	if _, err := user.Lookup("nobody"); err == nil && me.Username != "nobody" {
		other := writeConfig(t, `
job "as-nobody" {
  user = "nobody"
  run { command = ["id"] }
}
`)
		if _, diags := Load([]string{other}, opts); !diags.HasErrors() {
			t.Error("user = \"nobody\" on an agent that cannot switch users: no error")
		}
	}
}
