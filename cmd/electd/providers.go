package main

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/electd/electd/config"
	"github.com/electd/electd/providers/registry"
)

// loadOptions are how every command reads the configuration at paths: the
// provider types of this build and its embedded default provider, whose
// file is in stateDir(paths).
func loadOptions(paths []string) config.Options {
	return config.Options{Types: registry.Types(), Default: registry.DefaultIn(stateDir(paths))}
}

// defaultStateDir is the package's state directory (the unit's
// StateDirectory=electd, the image's WORKDIR).
const defaultStateDir = "/var/lib/electd"

// stateDir is where the embedded default keeps electd.db, an absolute path,
// so that `electd run`, `check` and `leases` find the same file from any
// working directory: systemd's $STATE_DIRECTORY when set (the unit's
// StateDirectory=, the first of several); otherwise the directory of the
// configuration (the first path: a directory, or the directory of a file),
// except that the package's /etc/electd has its state in /var/lib/electd.
func stateDir(paths []string) string {
	if d, _, _ := strings.Cut(os.Getenv("STATE_DIRECTORY"), ":"); filepath.IsAbs(d) {
		return filepath.Clean(d)
	}
	p := defaultConfigDir
	if len(paths) > 0 {
		p = paths[0]
	}
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	if fi, err := os.Stat(p); p != defaultConfigDir && (err != nil || !fi.IsDir()) {
		p = filepath.Dir(p)
	}
	if p == defaultConfigDir {
		return defaultStateDir
	}
	return p
}
