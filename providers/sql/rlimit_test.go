package sql

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/electd/electd/internal/rlimit"
	"github.com/electd/electd/providers"
)

// TestSQLiteShortOfFiles: SQLite says only "unable to open database file"
// when the process has no file left to open; the provider says it is this
// node's shortage of files. With a real limit, in a process of its own.
func TestSQLiteShortOfFiles(t *testing.T) {
	if os.Getenv("SQL_TEST_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSQLiteShortOfFiles$", "-test.v")
		cmd.Env = append(os.Environ(), "SQL_TEST_CHILD=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "CHILD-OK") {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return
	}
	p, err := New(context.Background(), Settings{Driver: "sqlite", DSN: filepath.Join(t.TempDir(), "leases.db")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// The runtime's poller opens its own descriptors on first use: before
	// the files run out.
	if ln, err := net.Listen("tcp", "127.0.0.1:0"); err == nil {
		ln.Close()
	}
	open, _, err := rlimit.OpenFiles()
	if err != nil {
		t.Fatal(err)
	}
	var rl syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl)
	low := rl
	low.Cur = uint64(open)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	var held []*os.File
	for {
		f, err := os.Open(os.DevNull)
		if err != nil {
			break
		}
		held = append(held, f)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = p.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "n1", TTL: time.Minute})
	for _, f := range held {
		f.Close()
	}
	syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
	if !errors.Is(err, rlimit.ErrShortOfResources) || !errors.Is(err, syscall.EMFILE) || !strings.Contains(err.Error(), "unable to open database file") {
		t.Fatalf("acquire with no file to spare: %v, want short of resources (EMFILE) and SQLite's words", err)
	}
	// Files to be had again: the store works.
	if _, err := p.Acquire(context.Background(), providers.AcquireRequest{Key: "job", Holder: "n1", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	fmt.Println("CHILD-OK")
}
