package teststore

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// StartFerretDB starts FerretDB v1.24 (MongoDB wire protocol) with its SQLite
// handler keeping its data in a fresh t.TempDir(), on a free loopback port,
// waits until it accepts connections, and stops it when t ends. uri is
// "mongodb://127.0.0.1:PORT/".
//
// FerretDB is a stand-in for MongoDB in single-client tests only: it has no
// pipeline updates or $$NOW, and racing updates of one document can all
// succeed (see BACKENDS.md).
func StartFerretDB(t testing.TB) (uri string, p *Proc) {
	t.Helper()
	return StartFerretDBAt(t, t.TempDir(), MustFreePort(t))
}

// StartFerretDBAt starts FerretDB on port with its data under dir. Called
// again with the same arguments after the first process was stopped, it
// serves the same data: that is how tests restart the store.
func StartFerretDBAt(t testing.TB, dir string, port int) (uri string, p *Proc) {
	t.Helper()
	bin, err := Tool("ferretdb", "bin/ferretdb")
	if err != nil {
		t.Fatal(err)
	}
	// FerretDB's SQLite handler wants the data directory to exist and the
	// URI to end with a slash.
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
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
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	if err := p.WaitReady(30*time.Second, DialReady(Addr(port))); err != nil {
		p.Stop()
		t.Fatal(err)
	}
	return "mongodb://" + Addr(port) + "/", p
}
