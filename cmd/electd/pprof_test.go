package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestPprofLoopbackOnly(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:6060", "example.com:6060", "127.0.0.1"} {
		if srv, err := servePprof(addr, io.Discard); err == nil {
			srv.Close()
			t.Errorf("-pprof %s was accepted", addr)
		}
	}
	var out bytes.Buffer
	srv, err := servePprof("127.0.0.1:0", &out)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	url := strings.TrimSpace(strings.TrimPrefix(out.String(), "electd run: serving runtime profiles on "))
	resp, err := http.Get(url + "heap?debug=1")
	if err != nil {
		t.Fatalf("%v (stderr said %q)", err, out.String())
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Contains(body, []byte("heap profile")) {
		t.Errorf("GET %sheap: %s\n%.200s", url, resp.Status, body)
	}
}
