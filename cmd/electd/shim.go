package main

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// shimName is the supervisor's binary, installed beside electd (a build
// tree's bin/) or in ../lib/electd/ (/usr/bin/electd and
// /usr/lib/electd/electd-shim in the Debian package).
const shimName = "electd-shim"

// shimFile holds the located shim open for the life of the process, so
// that its /proc/self/fd path stays valid.
var shimFile *os.File

// locateShim returns the program every command runs under (package
// actions/proc) and what it is, for the log.
//
// It is electd-shim, held open and run through /proc/self/fd/N, so that an
// upgrade that replaces or removes the file does not change the shim of a
// running agent; else this very binary through /proc/self/exe, which calls
// proc.MaybeShim first thing and stays valid across upgrades the same way;
// else "" (no /proc): commands then run without the supervisor.
func locateShim() (path, what string) {
	if shimFile != nil {
		return fdPath(shimFile), shimFile.Name()
	}
	if exe, err := os.Executable(); err == nil {
		if exe, err = filepath.EvalSymlinks(exe); err == nil {
			dir := filepath.Dir(exe)
			for _, p := range []string{filepath.Join(dir, shimName), filepath.Join(dir, "..", "lib", "electd", shimName)} {
				if f := openShim(filepath.Clean(p)); f != nil {
					shimFile = f
					return fdPath(f), f.Name()
				}
			}
		}
	}
	if _, err := os.Stat("/proc/self/exe"); err == nil {
		return "/proc/self/exe", "electd itself (no " + shimName + " beside it)"
	}
	return "", ""
}

// openShim opens p if it is a regular, executable file. The descriptor is
// moved to shimFd or above: between fork and exec, os/exec moves a child's
// low descriptors (stdio, ExtraFiles) into place, which could overwrite a
// low one before the kernel opens /proc/self/fd/N.
func openShim(p string) *os.File {
	f, err := os.Open(p)
	if err != nil {
		return nil
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return nil
	}
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, shimFd)
	if err != nil {
		return nil
	}
	high := os.NewFile(uintptr(fd), p)
	if _, err := os.Stat(fdPath(high)); err != nil { // no /proc
		high.Close()
		return nil
	}
	return high
}

// shimFd is the lowest descriptor the held shim may have.
const shimFd = 100

func fdPath(f *os.File) string { return fmt.Sprintf("/proc/self/fd/%d", f.Fd()) }
