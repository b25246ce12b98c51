package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The shim is held open at a high descriptor and runs through
// /proc/self/fd/N, even once its file is removed (an upgrade); what is not
// a regular executable file is not taken.
func TestOpenShim(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Skip("no /bin/true")
	}
	exe := filepath.Join(dir, shimName)
	if err := os.WriteFile(exe, data, 0o755); err != nil {
		t.Fatal(err)
	}
	f := openShim(exe)
	if f == nil {
		t.Fatal("openShim refused an executable file")
	}
	defer f.Close()
	if f.Fd() < shimFd {
		t.Errorf("shim held at descriptor %d, want %d or above", f.Fd(), shimFd)
	}
	if err := os.Remove(exe); err != nil {
		t.Fatal(err)
	}
	// Through os/exec with an extra file, as proc.Start runs it.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command(fdPath(f))
	cmd.ExtraFiles = []*os.File{w}
	if err := cmd.Run(); err != nil {
		t.Fatalf("running the removed shim through %s: %v", fdPath(f), err)
	}
	w.Close()

	plain := filepath.Join(dir, "plain")
	os.WriteFile(plain, data, 0o644)
	for name, p := range map[string]string{"not executable": plain, "a directory": dir, "missing": filepath.Join(dir, "nope")} {
		if f := openShim(p); f != nil {
			f.Close()
			t.Errorf("openShim took %s (%s)", p, name)
		}
	}
}
