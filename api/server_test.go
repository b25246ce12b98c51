package api

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func serve(t *testing.T, h http.Handler, lim Limits) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := Server(h, lim)
	go srv.Serve(Listener(ln, lim))
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// TestServerClosesIdleConnections: a keep-alive connection that sends no
// more requests, and one that never finishes its header, are closed by the
// server.
func TestServerClosesIdleConnections(t *testing.T) {
	lim := Limits{MaxConns: 8, IdleTimeout: 200 * time.Millisecond, ReadHeaderTimeout: 200 * time.Millisecond}
	addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }), lim)

	for _, tc := range []struct{ name, send string }{
		{"idle after a request", "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"},
		{"header never finished", "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n"},
		{"nothing sent", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			began := time.Now()
			io.WriteString(c, tc.send)
			// The server closes the connection: reading ends (after the
			// answer, for the first case) well before this deadline.
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err = io.ReadAll(bufio.NewReader(c))
			if err != nil {
				t.Fatalf("the server did not close the connection: %v", err)
			}
			if took := time.Since(began); took < 150*time.Millisecond {
				t.Errorf("closed after %s, before the timeout", took)
			}
		})
	}
}

// TestServerCapsConnections: with a cap of 2, a third client is served
// only once one of the first two is done.
func TestServerCapsConnections(t *testing.T) {
	lim := Limits{MaxConns: 2, IdleTimeout: time.Minute, ReadHeaderTimeout: time.Minute}
	var inFlight, most atomic.Int32
	release := make(chan struct{})
	addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-release
		inFlight.Add(-1)
		io.WriteString(w, "ok")
	}), lim)

	const clients = 6
	var wg sync.WaitGroup
	var served atomic.Int32
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr := &http.Transport{DisableKeepAlives: true}
			resp, err := (&http.Client{Transport: tr, Timeout: 30 * time.Second}).Get("http://" + addr + "/")
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			served.Add(1)
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for inFlight.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	// Without the cap the other four would be in the handler by now.
	time.Sleep(300 * time.Millisecond)
	if n := inFlight.Load(); n != 2 {
		t.Errorf("%d requests in the handler at once, want the cap, 2", n)
	}
	close(release)
	wg.Wait()
	if served.Load() != clients || most.Load() != 2 {
		t.Errorf("%d of %d clients served, at most %d at once; want all, at most 2", served.Load(), clients, most.Load())
	}
}
