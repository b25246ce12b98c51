package config

import (
	"fmt"
	"os"
	"syscall"

	"github.com/hashicorp/hcl/v2"
)

// checkFilePerms refuses configuration that someone other than root or the
// agent's own user could change: commands in it run with the agent's
// rights. It checks the paths given (files and directories) and the files
// read from them.
func checkFilePerms(paths, files []string) hcl.Diagnostics {
	var diags hcl.Diagnostics
	seen := map[string]bool{}
	for _, p := range append(append([]string(nil), paths...), files...) {
		if seen[p] {
			continue
		}
		seen[p] = true
		info, err := os.Stat(p)
		if err != nil {
			continue // reading the path reports it
		}
		var problem string
		st, _ := info.Sys().(*syscall.Stat_t)
		switch {
		case info.Mode().Perm()&0o002 != 0:
			problem = fmt.Sprintf("%s is world-writable (chmod o-w %s)", p, p)
		case st != nil && st.Uid != 0 && int(st.Uid) != os.Getuid():
			problem = fmt.Sprintf("%s is owned by uid %d, neither root nor this process's user (uid %d)", p, st.Uid, os.Getuid())
		default:
			continue
		}
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Unsafe configuration file",
			Detail:   fmt.Sprintf("Commands in the configuration run with the agent's rights, but %s. Fix the permissions, or pass -allow-unsafe-config to run anyway.", problem),
		})
	}
	return diags
}
