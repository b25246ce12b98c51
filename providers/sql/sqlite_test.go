package sql_test

import (
	"bufio"
	"bytes"
	"context"
	dbsql "database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/providers"
	sqlprovider "github.com/electd/electd/providers/sql"
)

const (
	childFileEnv   = "ELECTD_TEST_SQLITE_CHILD_FILE"
	childHolderEnv = "ELECTD_TEST_SQLITE_CHILD_HOLDER"
	childStartEnv  = "ELECTD_TEST_SQLITE_CHILD_START"
	childKeys      = 30
	childProcs     = 4
)

// TestSQLiteMultiProcess runs several processes (this test binary, re-run as
// TestSQLiteChildProcess) on one database file, racing for the same keys at
// the same instants: every key must have exactly one winner.
func TestSQLiteMultiProcess(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("child processes contend for seconds: skipped under -short")
	}
	file := filepath.Join(t.TempDir(), "leases.db")
	start := time.Now().Add(1500 * time.Millisecond) // time for every child to start and open the file
	cmds := make([]*exec.Cmd, childProcs)
	outs := make([]*bytes.Buffer, childProcs)
	for i := range cmds {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSQLiteChildProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(),
			childFileEnv+"="+file,
			childHolderEnv+"="+fmt.Sprintf("proc-%d", i),
			childStartEnv+"="+strconv.FormatInt(start.UnixNano(), 10))
		outs[i] = new(bytes.Buffer)
		cmd.Stdout, cmd.Stderr = outs[i], outs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = cmd
	}
	winners := map[string][]string{}
	wins := map[string]int{}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v\n%s", i, err, outs[i])
		}
		sc := bufio.NewScanner(outs[i])
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 3 && f[0] == "WON" {
				winners[f[1]] = append(winners[f[1]], fmt.Sprintf("proc-%d", i))
				wins[fmt.Sprintf("proc-%d", i)]++
			}
		}
	}
	for k := range childKeys {
		key := fmt.Sprintf("key-%d", k)
		if len(winners[key]) != 1 {
			t.Errorf("%s: winners %v, want exactly one", key, winners[key])
		}
	}
	t.Logf("wins per process over %d keys: %v", childKeys, wins)

	db, err := dbsql.Open("sqlite", file)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var mode string
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q (%v), want wal", mode, err)
	}
}

// TestSQLiteChildProcess is one racer of TestSQLiteMultiProcess; it does
// nothing when run directly.
func TestSQLiteChildProcess(t *testing.T) {
	file := os.Getenv(childFileEnv)
	if file == "" {
		return
	}
	startNs, err := strconv.ParseInt(os.Getenv(childStartEnv), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	holder := os.Getenv(childHolderEnv)
	p := open(t, sqlprovider.Settings{Driver: "sqlite", DSN: file})
	defer p.Close()
	ctx := context.Background()
	if _, err := p.Observe(ctx, "warm-up"); err != nil {
		t.Fatal(err)
	}
	start := time.Unix(0, startNs)
	for k := range childKeys {
		time.Sleep(time.Until(start.Add(time.Duration(k) * 20 * time.Millisecond))) // a deliberate stagger: the processes' attempts interleave
		key := fmt.Sprintf("key-%d", k)
		l, err := p.Acquire(ctx, providers.AcquireRequest{Key: key, Holder: holder, TTL: time.Minute})
		switch {
		case err == nil:
			fmt.Printf("WON %s %d\n", key, l.Token)
		case errors.Is(err, providers.ErrHeld):
			fmt.Printf("HELD %s -\n", key)
		default:
			t.Fatalf("acquire %s: %v", key, err)
		}
	}
}
