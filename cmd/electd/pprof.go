package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// servePprof serves Go's runtime profiles (heap, allocs, CPU, goroutines)
// on addr, for diagnosing the agent's memory and CPU, until the process
// exits or the server is closed. It is opt-in (`electd run -pprof ADDR`)
// and loopback only: the profiles hold no secret values, but they have no
// token either.
func servePprof(addr string, stderr io.Writer) (*http.Server, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("%q is not a loopback address (127.0.0.1:PORT, [::1]:PORT or localhost:PORT)", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	fmt.Fprintf(stderr, "electd run: serving runtime profiles on http://%s/debug/pprof/\n", ln.Addr())
	go srv.Serve(ln)
	return srv, nil
}
