package config

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"regexp"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// RunAs is a job's `user`, `group` and `umask`: who its commands (run, task,
// health command and exec hooks) run as. A job without any of them has
// none (Job.RunAs is nil): its commands run as the agent's user.
type RunAs struct {
	User, Group string // as written; "" when not given
	// Uid, Gid and Groups are what the command runs with, looked up when
	// the configuration is loaded: the user's uid, the group's gid (the
	// user's primary group when group is not given) and the user's
	// supplementary groups. With group alone, the uid is the agent's and
	// the command has no supplementary group.
	Uid, Gid uint32
	Groups   []uint32
	// Umask is the commands' umask; nil keeps the agent's.
	Umask *uint32
	// Resolved is false when the names were not looked up (check -no-env):
	// such a RunAs must not run anything.
	Resolved bool
	// Agents: the user and group named are the agent's own (its uid, gid
	// and supplementary groups), so nothing is switched.
	Agents bool
}

// Switches reports whether the commands run as another user or group (not
// only with another umask).
func (r *RunAs) Switches() bool { return r != nil && (r.User != "" || r.Group != "") && !r.Agents }

var umaskRe = regexp.MustCompile(`^[0-7]{1,4}$`)

// decodeRunAs reads a job's user, group and umask. Names are looked up in
// the user database, and refused where the agent could not switch to them,
// unless the configuration is checked without the environment (CI checks
// it on another host).
func (l *loader) decodeRunAs(b attrs, block *hcl.Block) *RunAs {
	if !b.has("user") && !b.has("group") && !b.has("umask") {
		return nil
	}
	r := &RunAs{User: b.line("user", ""), Group: b.line("group", "")}
	if b.has("umask") {
		if s := b.line("umask", ""); b.known("umask") {
			n, err := strconv.ParseUint(s, 8, 32)
			if !umaskRe.MatchString(s) || err != nil || n > 0o777 {
				b.add(errorf(b.rangeOf("umask", block.DefRange), "Invalid umask",
					"The umask must be an octal string of up to four digits, such as \"0027\" (files the commands create are then not readable by others)."))
			} else {
				u := uint32(n)
				r.Umask = &u
			}
		}
	}
	if l.opts.NoEnv {
		return r
	}
	if !r.Switches() {
		r.Resolved = true
		return r
	}
	ok := true
	if r.User != "" {
		u, err := lookupUser(r.User)
		if err != nil {
			b.add(errorf(b.rangeOf("user", block.DefRange), "Unknown user", "%s", err))
			ok = false
		} else {
			r.Uid, r.Gid, r.Groups = u.uid, u.gid, u.groups
		}
	} else {
		r.Uid = uint32(os.Getuid())
	}
	if r.Group != "" {
		gid, err := lookupGroup(r.Group)
		if err != nil {
			b.add(errorf(b.rangeOf("group", block.DefRange), "Unknown group", "%s", err))
			ok = false
		} else {
			r.Gid = gid
		}
	}
	can := l.opts.canSwitchUser
	if can == nil {
		can = canSwitchUser
	}
	if !ok {
		return r
	}
	// A job may name the user the agent runs as (user = "electd" under the
	// packaged unit, in files shared with hosts whose agent is root): that
	// needs no switch, and no capability.
	ids := l.opts.agentIDs
	if ids == nil {
		ids = processIDs
	}
	if uid, gid, groups := ids(); r.Uid == uid && r.Gid == gid && sameGroups(r.Groups, groups, gid) {
		r.Agents, r.Resolved = true, true
		return r
	}
	if err := can(); err != nil {
		at := "user"
		if r.User == "" {
			at = "group"
		}
		b.add(errorf(b.rangeOf(at, block.DefRange), "Cannot switch users",
			"The job's commands would run as another %s, but %s. Run the agent as root, or give it those capabilities (docs/operations.md, \"Jobs as other users\"); or remove the job's user and group.", at, err))
		ok = false
	}
	r.Resolved = ok
	return r
}

// processIDs are this process's uid, gid and supplementary groups (none
// when they cannot be read).
func processIDs() (uid, gid uint32, groups []uint32) {
	gs, _ := os.Getgroups()
	for _, g := range gs {
		groups = append(groups, uint32(g))
	}
	return uint32(os.Getuid()), uint32(os.Getgid()), groups
}

// sameGroups reports whether groups and own are the same supplementary
// groups, leaving out the primary group gid.
func sameGroups(groups, own []uint32, gid uint32) bool {
	set := map[uint32]bool{}
	for _, g := range own {
		if g != gid {
			set[g] = true
		}
	}
	want := map[uint32]bool{}
	for _, g := range groups {
		if g != gid {
			want[g] = true
		}
	}
	if len(set) != len(want) {
		return false
	}
	for g := range want {
		if !set[g] {
			return false
		}
	}
	return true
}

type userIDs struct {
	uid, gid uint32
	groups   []uint32
}

// lookupUser finds a user by name or by number, with its supplementary
// groups. Its error is a whole sentence.
func lookupUser(name string) (userIDs, error) {
	u, err := user.Lookup(name)
	if err != nil && isNumber(name) {
		u, err = user.LookupId(name)
	}
	if err != nil {
		return userIDs{}, fmt.Errorf("No user %q was found in this host's user database: %v. Create the user, or name one that exists.", name, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return userIDs{}, fmt.Errorf("The user %q has ids that are not numbers (%s:%s).", name, u.Uid, u.Gid)
	}
	ids := userIDs{uid: uint32(uid), gid: uint32(gid)}
	gs, err := u.GroupIds()
	if err != nil {
		return userIDs{}, fmt.Errorf("The supplementary groups of user %q could not be read: %v.", name, err)
	}
	for _, g := range gs {
		if n, err := strconv.ParseUint(g, 10, 32); err == nil && uint32(n) != ids.gid {
			ids.groups = append(ids.groups, uint32(n))
		}
	}
	return ids, nil
}

// lookupGroup finds a group by name or by number.
func lookupGroup(name string) (uint32, error) {
	g, err := user.LookupGroup(name)
	if err != nil && isNumber(name) {
		g, err = user.LookupGroupId(name)
	}
	if err != nil {
		return 0, fmt.Errorf("No group %q was found in this host's group database: %v. Create the group, or name one that exists.", name, err)
	}
	gid, err := strconv.ParseUint(g.Gid, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("The group %q has an id that is not a number (%s).", name, g.Gid)
	}
	return uint32(gid), nil
}

func isNumber(s string) bool {
	_, err := strconv.ParseUint(s, 10, 32)
	return err == nil
}

// The capabilities a process needs to start commands as another user and
// stop them: setuid and setgid (with setgroups) for the switch, kill to
// signal processes of another user.
const (
	capKill   = 5
	capSetgid = 6
	capSetuid = 7
)

// canSwitchUser reports why this process cannot start commands as another
// user and stop them, or nil when it can: it needs CAP_SETUID, CAP_SETGID
// and CAP_KILL in its effective set (root has them, unless its unit's
// CapabilityBoundingSet took them away).
func canSwitchUser() error {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		if os.Geteuid() == 0 {
			return nil
		}
		return fmt.Errorf("it runs as uid %d and its capabilities could not be read (%v)", os.Geteuid(), err)
	}
	var eff uint64
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			eff, _ = strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	var missing []string
	for _, c := range []struct {
		bit  uint
		name string
	}{{capSetuid, "CAP_SETUID"}, {capSetgid, "CAP_SETGID"}, {capKill, "CAP_KILL"}} {
		if eff&(1<<c.bit) == 0 {
			missing = append(missing, c.name)
		}
	}
	if len(missing) > 0 {
		list := missing[len(missing)-1]
		if len(missing) > 1 {
			list = strings.Join(missing[:len(missing)-1], ", ") + " and " + list
		}
		return fmt.Errorf("the agent (uid %d) lacks %s", os.Geteuid(), list)
	}
	return nil
}
