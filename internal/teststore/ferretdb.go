package teststore

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// StartFerretDBProc starts FerretDB v1.24 (MongoDB wire protocol) with its
// SQLite handler keeping its data under dir, on loopback port (0: a free
// port), and waits until it accepts connections. uri is
// "mongodb://127.0.0.1:PORT/". Called again with the same arguments after
// the first process was stopped, it serves the same data: that is how tests
// restart the store. The caller stops p.
//
// FerretDB is a stand-in for MongoDB in single-client tests only: it has no
// pipeline updates or $$NOW, and racing updates of one document can all
// succeed (see BACKENDS.md).
func StartFerretDBProc(dir string, port int) (uri string, p *Proc, err error) {
	bin, err := Tool("ferretdb", "bin/ferretdb")
	if err != nil {
		return "", nil, err
	}
	if port, err = portOrFree(port); err != nil {
		return "", nil, err
	}
	// FerretDB's SQLite handler wants the data directory to exist and the
	// URI to end with a slash.
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return "", nil, err
	}
	p, err = Start("ferretdb-"+strconv.Itoa(port), dir, bin,
		"--handler=sqlite",
		"--sqlite-url=file:"+data+"/",
		"--listen-addr="+Addr(port),
		"--debug-addr=-",
		"--state-dir="+dir,
		"--telemetry=disable",
		"--log-level=warn",
	)
	if err != nil {
		return "", nil, err
	}
	if err := p.WaitReady(30*time.Second, DialReady(Addr(port))); err != nil {
		p.Stop()
		return "", nil, err
	}
	return "mongodb://" + Addr(port) + "/", p, nil
}

// StartFerretDB is StartFerretDBProc with its data in a fresh t.TempDir(),
// on a free port, stopped when t ends.
func StartFerretDB(t testing.TB) (uri string, p *Proc) {
	t.Helper()
	SkipShort(t, "FerretDB")
	return StartFerretDBAt(t, t.TempDir(), 0)
}

// StartFerretDBAt is StartFerretDBProc for tests: it fails t on error and
// stops the server when t ends.
func StartFerretDBAt(t testing.TB, dir string, port int) (uri string, p *Proc) {
	t.Helper()
	SkipShort(t, "FerretDB")
	uri, p, err := StartFerretDBProc(dir, port)
	started(t, p, err)
	return uri, p
}
