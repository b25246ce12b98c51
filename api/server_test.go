package api

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
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
	var inFlight, most, entered atomic.Int32
	release := make(chan struct{}, 16)
	addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered.Add(1)
		n := inFlight.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-release
		inFlight.Add(-1)
		io.WriteString(w, "ok")
	}), lim)

	const clients = 6
	var wg sync.WaitGroup
	var served, wrote atomic.Int32
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr := &http.Transport{DisableKeepAlives: true}
			req, err := http.NewRequest("GET", "http://"+addr+"/", nil)
			if err != nil {
				t.Error(err)
				return
			}
			req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
				WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Add(1) },
			}))
			resp, err := (&http.Client{Transport: tr, Timeout: 30 * time.Second}).Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			served.Add(1)
		}()
	}
	wait := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				close(release)
				t.Fatalf("%s: not within 10s (in the handler %d, entered %d, served %d)", what, inFlight.Load(), entered.Load(), served.Load())
			}
		}
	}
	// Every client has sent its request, and two are in the handler.
	wait("six requests sent, two in the handler", func() bool { return wrote.Load() == clients && inFlight.Load() == 2 })
	// Each answer lets exactly one waiting client in: the server took one
	// connection from those waiting, where without the cap it would have
	// taken them all.
	for i := int32(1); i <= clients-2; i++ {
		release <- struct{}{}
		wait("one more client in after an answer", func() bool { return served.Load() == i && entered.Load() == 2+i })
		if n := inFlight.Load(); n != 2 {
			t.Errorf("%d requests in the handler at once after %d answers, want the cap, 2", n, i)
		}
	}
	release <- struct{}{}
	release <- struct{}{}
	wg.Wait()
	if served.Load() != clients || most.Load() != 2 {
		t.Errorf("%d of %d clients served, at most %d at once; want all, at most 2", served.Load(), clients, most.Load())
	}
}
