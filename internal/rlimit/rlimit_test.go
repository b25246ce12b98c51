package rlimit

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

func TestShort(t *testing.T) {
	for _, tc := range []struct {
		err   error
		short bool
		name  string
	}{
		{&os.PathError{Op: "pipe2", Err: syscall.EMFILE}, true, "EMFILE"},
		{fmt.Errorf("fork/exec x: %w", syscall.EAGAIN), true, "EAGAIN"},
		{fmt.Errorf("x: %w", syscall.ENOMEM), true, "ENOMEM"},
		{syscall.ENFILE, true, "ENFILE"},
		{&os.PathError{Op: "open", Err: syscall.ENOENT}, false, ""},
		{syscall.EACCES, false, ""},
		{errors.New("unable to open database file"), false, ""},
	} {
		err := Short(tc.err)
		if errors.Is(err, ErrShortOfResources) != tc.short || !errors.Is(err, tc.err) {
			t.Errorf("Short(%v) = %v: short %v, want %v, and the cause kept", tc.err, err, errors.Is(err, ErrShortOfResources), tc.short)
		}
		if errno, ok := Errno(err); ok != tc.short || (ok && Name(errno) != tc.name) {
			t.Errorf("Errno(%v) = %v, %v", err, errno, ok)
		}
	}
}

func TestNeed(t *testing.T) {
	if got := Need(10, 2, 256); got != NeedBase+256+10*NeedPerJob+2*NeedPerProvider {
		t.Errorf("Need = %d", got)
	}
}

// TestAtFileLimit with a real limit, in a process of its own.
func TestAtFileLimit(t *testing.T) {
	if os.Getenv("RLIMIT_TEST_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestAtFileLimit$", "-test.v")
		cmd.Env = append(os.Environ(), "RLIMIT_TEST_CHILD=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "CHILD-OK") {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return
	}
	if AtFileLimit() {
		t.Fatal("at the limit before lowering it")
	}
	open, _, err := OpenFiles()
	if err != nil {
		t.Fatal(err)
	}
	var rl syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl)
	rl.Cur = uint64(open) + 4
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Open(os.DevNull); err != nil {
			if !errors.Is(err, syscall.EMFILE) {
				t.Fatal(err)
			}
			break
		}
	}
	if !AtFileLimit() {
		t.Fatal("not at the limit with every file taken")
	}
	fmt.Println("CHILD-OK")
}
