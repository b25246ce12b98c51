package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Configuration that another user could change is refused by Load, so
// `electd check` says so as `electd run` does; AllowUnsafeFiles accepts it.
func TestUnsafeConfigFiles(t *testing.T) {
	cases := []struct {
		name    string
		setup   func(t *testing.T, dir, file string)
		wantErr string
	}{
		{"owned by us, not world-writable", func(t *testing.T, dir, file string) {}, ""},
		{"world-writable file", func(t *testing.T, dir, file string) { chmod(t, file, 0o666) }, "world-writable"},
		{"world-writable directory", func(t *testing.T, dir, file string) { chmod(t, dir, 0o777) }, "world-writable"},
		{"file owned by another user", func(t *testing.T, dir, file string) {
			if os.Getuid() != 0 {
				t.Skip("chown to another user needs root; the test machines run as root")
			}
			if err := os.Chown(file, 12345, 12345); err != nil {
				t.Fatal(err)
			}
		}, "owned by uid 12345"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			chmod(t, dir, 0o755)
			file := filepath.Join(dir, "jobs.hcl")
			if err := os.WriteFile(file, []byte("job \"a\" {}\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			tc.setup(t, dir, file)
			_, diags := Load([]string{dir}, testOpts)
			err := diags.Err()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), "-allow-unsafe-config"):
				t.Errorf("error does not name the override flag: %v", err)
			}
			opts := testOpts
			opts.AllowUnsafeFiles = true
			if _, diags := Load([]string{dir}, opts); diags.HasErrors() {
				t.Errorf("AllowUnsafeFiles: %v", diags.Err())
			}
		})
	}
}

func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}
