package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func copyFile(t *testing.T, from, dir string) string {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	to := filepath.Join(dir, filepath.Base(from))
	if err := os.WriteFile(to, b, 0o640); err != nil {
		t.Fatal(err)
	}
	return to
}

func fmtRun(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = runFmt(args, strings.NewReader(stdin), &o, &e)
	return code, o.String(), e.String()
}

func TestFmt(t *testing.T) {
	want, _ := os.ReadFile("testdata/fmt_out.hcl")
	in, _ := os.ReadFile("testdata/fmt_in.hcl")

	t.Run("writes the canonical form and names the file", func(t *testing.T) {
		p := copyFile(t, "testdata/fmt_in.hcl", t.TempDir())
		code, out, errOut := fmtRun(t, "", p)
		if code != 0 || out != p+"\n" || errOut != "" {
			t.Errorf("exit %d stdout %q stderr %q", code, out, errOut)
		}
		got, _ := os.ReadFile(p)
		if !bytes.Equal(got, want) {
			t.Errorf("formatted:\n%s\nwant:\n%s", got, want)
		}
		if info, _ := os.Stat(p); info.Mode().Perm() != 0o640 {
			t.Errorf("mode changed to %v", info.Mode())
		}
		// Idempotent: a second run changes nothing and prints nothing.
		code, out, _ = fmtRun(t, "", p)
		if got2, _ := os.ReadFile(p); code != 0 || out != "" || !bytes.Equal(got2, want) {
			t.Errorf("second run: exit %d stdout %q", code, out)
		}
	})

	t.Run("check lists the file, exits 1 and writes nothing", func(t *testing.T) {
		dir := t.TempDir()
		p := copyFile(t, "testdata/fmt_in.hcl", dir)
		copyFile(t, "testdata/fmt_out.hcl", dir)
		os.WriteFile(filepath.Join(dir, "ignored.hcl.json"), []byte(`{"job":   {}}`), 0o644)
		code, out, _ := fmtRun(t, "", "-check", dir)
		if code != 1 || out != p+"\n" {
			t.Errorf("exit %d stdout %q", code, out)
		}
		if got, _ := os.ReadFile(p); !bytes.Equal(got, in) {
			t.Error("-check changed the file")
		}
		if code, _, _ := fmtRun(t, "", "-check", filepath.Join(dir, "fmt_out.hcl")); code != 0 {
			t.Errorf("formatted file: exit %d", code)
		}
	})

	t.Run("diff shows the changes", func(t *testing.T) {
		p := copyFile(t, "testdata/fmt_in.hcl", t.TempDir())
		code, out, _ := fmtRun(t, "", "-diff", "-write=false", p)
		if code != 0 {
			t.Errorf("exit %d", code)
		}
		for _, s := range []string{"--- old/" + p, "+++ new/" + p, "@@ -1,10 +1,10 @@", "-    ttl = \"30s\"", "+  ttl         = \"30s\"", " # comment kept"} {
			if !strings.Contains(out, s) {
				t.Errorf("diff lacks %q:\n%s", s, out)
			}
		}
		if got, _ := os.ReadFile(p); !bytes.Equal(got, in) {
			t.Error("-write=false changed the file")
		}
	})

	t.Run("refuses a file that does not parse", func(t *testing.T) {
		dir := t.TempDir()
		p := filepath.Join(dir, "broken.hcl")
		broken := "job \"a\" {\n    ttl = \n"
		os.WriteFile(p, []byte(broken), 0o644)
		code, out, errOut := fmtRun(t, "", p)
		if code != 1 || out != "" || !strings.Contains(errOut, "broken.hcl line 2") {
			t.Errorf("exit %d stdout %q stderr %q", code, out, errOut)
		}
		if got, _ := os.ReadFile(p); string(got) != broken {
			t.Error("the broken file was changed")
		}
	})

	t.Run("stdin to stdout", func(t *testing.T) {
		code, out, _ := fmtRun(t, string(in), "-")
		if code != 0 || out != string(want) {
			t.Errorf("exit %d stdout:\n%s", code, out)
		}
		if code, _, _ := fmtRun(t, string(in), "-check", "-"); code != 1 {
			t.Errorf("-check on stdin: exit %d", code)
		}
	})
}

func TestUnifiedDiff(t *testing.T) {
	tests := []struct {
		name, a, b, want string
	}{
		{"one change", "a\nb\nc\n", "a\nB\nc\n", "--- old/f\n+++ new/f\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"},
		{"two hunks", "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n", "x\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\ny\n",
			"--- old/f\n+++ new/f\n@@ -1,4 +1,4 @@\n-1\n+x\n 2\n 3\n 4\n@@ -9,4 +9,4 @@\n 9\n 10\n 11\n-12\n+y\n"},
		{"insert at end", "a\n", "a\nb\n", "--- old/f\n+++ new/f\n@@ -1,1 +1,2 @@\n a\n+b\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := unifiedDiff("f", tt.a, tt.b); got != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

// fmt reads with check's guards: a FIFO, a device or a file nested deep
// enough to overflow hcl's parser gets one line and exit 1, not a hang or
// a crash.
func TestFmtHostileInput(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "x.hcl")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	deep := filepath.Join(dir, "deep.hcl")
	if err := os.WriteFile(deep, []byte("a = "+strings.Repeat("[", 100000)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"fmt", "-check", fifo}, {"fmt", "-check", "/dev/zero"}, {"fmt", "-check", deep}} {
		done := make(chan int, 1)
		var stdout, stderr bytes.Buffer
		go func() { done <- run(args, &stdout, &stderr) }()
		select {
		case code := <-done:
			if code != 1 || stderr.Len() == 0 || stderr.Len() > 2000 {
				t.Errorf("electd %v: exit %d, %d bytes on stderr:\n%s", args, code, stderr.Len(), stderr.String())
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("electd %v did not return within 10s", args)
		}
	}
	code, _, errOut := fmtRun(t, "a = "+strings.Repeat("{", 100000), "-")
	if code != 1 || !strings.Contains(errOut, "Nesting") && !strings.Contains(errOut, "deep") {
		t.Errorf("fmt - of deep nesting: exit %d\n%s", code, errOut)
	}
}

// TestFmtVarFiles: a directory's variable files are formatted with its
// configuration, as terraform fmt does .tfvars; JSON ones are left alone.
func TestFmtVarFiles(t *testing.T) {
	dir := t.TempDir()
	vars := filepath.Join(dir, "prod.auto.electdvars")
	js := filepath.Join(dir, "more.auto.electdvars.json")
	if err := os.WriteFile(vars, []byte("shards=4\nqueue_url   =  \"amqp://q\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(js, []byte(`{"shards":   4}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := fmtRun(t, "", dir); code != 0 || out != vars+"\n" {
		t.Errorf("exit %d stdout %q stderr %q", code, out, errOut)
	}
	if got, _ := os.ReadFile(vars); string(got) != "shards    = 4\nqueue_url = \"amqp://q\"\n" {
		t.Errorf("formatted:\n%s", got)
	}
	if got, _ := os.ReadFile(js); string(got) != `{"shards":   4}` {
		t.Errorf("the JSON file changed: %s", got)
	}
}
