package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// checkConfigPerms refuses configuration that someone other than root or
// the agent's own user could change: commands in it run with the agent's
// rights. It checks the files and directories given and the *.hcl files in
// those directories.
func checkConfigPerms(paths []string) error {
	var problems []string
	check := func(path string, info fs.FileInfo) {
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			return
		}
		if info.Mode().Perm()&0o002 != 0 {
			problems = append(problems, fmt.Sprintf("%s is world-writable (chmod o-w %s)", path, path))
		}
		if st.Uid != 0 && int(st.Uid) != os.Getuid() {
			problems = append(problems, fmt.Sprintf("%s is owned by uid %d, neither root nor the agent's user (uid %d)", path, st.Uid, os.Getuid()))
		}
	}
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			continue // Load reports missing paths with a proper diagnostic
		}
		check(p, info)
		if !info.IsDir() {
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if e.IsDir() || !(strings.HasSuffix(e.Name(), ".hcl") || strings.HasSuffix(e.Name(), ".hcl.json")) {
				continue
			}
			if fi, err := e.Info(); err == nil {
				check(filepath.Join(p, e.Name()), fi)
			}
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("refusing to run: commands in the configuration would run with this agent's rights, but\n  %s\nfix the permissions, or pass -allow-unsafe-config to run anyway", strings.Join(problems, "\n  "))
	}
	return nil
}
