package proc

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The shim learns who its command runs as from one string, in its
// environment (envShimAs) or, for a spare, in its spec: "" for the shim's
// own user and umask, else "UID:GID:G1,G2,...:UMASK" with the ids empty to
// keep the shim's user and the umask (octal) empty to keep its umask.
//
// The shim itself stays the agent's user: the agent can signal its group,
// and the shim, a subreaper, can signal and reap what the command leaves
// behind, whatever user the command switched to.
func encodeAs(cred *syscall.Credential, umask *uint32) string {
	if cred == nil && umask == nil {
		return ""
	}
	var f [4]string
	if cred != nil {
		f[0] = strconv.FormatUint(uint64(cred.Uid), 10)
		f[1] = strconv.FormatUint(uint64(cred.Gid), 10)
		gs := make([]string, len(cred.Groups))
		for i, g := range cred.Groups {
			gs[i] = strconv.FormatUint(uint64(g), 10)
		}
		f[2] = strings.Join(gs, ",")
	}
	if umask != nil {
		f[3] = strconv.FormatUint(uint64(*umask), 8)
	}
	return strings.Join(f[:], ":")
}

var errBadAs = errors.New("bad user spec")

func decodeAs(s string) (cred *syscall.Credential, umask *uint32, err error) {
	if s == "" {
		return nil, nil, nil
	}
	f := strings.Split(s, ":")
	if len(f) != 4 {
		return nil, nil, errBadAs
	}
	id := func(s string, base int) (uint32, error) {
		n, err := strconv.ParseUint(s, base, 32)
		if err != nil {
			return 0, fmt.Errorf("%w: %q", errBadAs, s)
		}
		return uint32(n), nil
	}
	if f[0] != "" {
		cred = &syscall.Credential{}
		if cred.Uid, err = id(f[0], 10); err != nil {
			return nil, nil, err
		}
		if cred.Gid, err = id(f[1], 10); err != nil {
			return nil, nil, err
		}
		if f[2] != "" {
			for _, g := range strings.Split(f[2], ",") {
				n, err := id(g, 10)
				if err != nil {
					return nil, nil, err
				}
				cred.Groups = append(cred.Groups, n)
			}
		}
	}
	if f[3] != "" {
		n, err := id(f[3], 8)
		if err != nil || n > 0o777 {
			return nil, nil, fmt.Errorf("%w: umask %q", errBadAs, f[3])
		}
		umask = &n
	}
	return cred, umask, nil
}

// lowerSwitchCaps takes CAP_SETUID, CAP_SETGID and CAP_KILL out of the
// shim's ambient set before it starts its command. An agent that runs as
// an ordinary user with them as ambient capabilities (the systemd drop-in
// of docs/operations.md) needs them to switch users and stop the commands
// it started as others; a command would otherwise keep them across
// execve, and could become root. The shim keeps them in its own permitted
// and effective sets: it still signals whatever its command leaves.
// Other ambient capabilities a unit gives on purpose (CAP_NET_BIND_SERVICE)
// stay. Errors are ignored: a kernel without ambient capabilities has none
// to pass on.
func lowerSwitchCaps() {
	for _, c := range []uintptr{unix.CAP_SETUID, unix.CAP_SETGID, unix.CAP_KILL} {
		unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_LOWER, c, 0, 0)
	}
}
