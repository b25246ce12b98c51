package teststore

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Freezer is a TCP proxy to a store server that can stop moving bytes on
// every connection, open or new, without closing any: a silent partition
// as the client sees it.
type Freezer struct {
	ln       net.Listener
	upstream string

	mu     sync.Mutex
	thawed chan struct{} // closed while bytes flow
}

// NewFreezer is a Freezer to upstream on a free loopback port, closed when
// t ends.
func NewFreezer(t testing.TB, upstream string) *Freezer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &Freezer{ln: ln, upstream: upstream, thawed: make(chan struct{})}
	close(f.thawed)
	done := make(chan struct{})
	var conns []net.Conn
	var cmu sync.Mutex
	go func() {
		for {
			down, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", upstream)
			if err != nil {
				down.Close()
				continue
			}
			cmu.Lock()
			conns = append(conns, down, up)
			cmu.Unlock()
			go f.copy(up, down, done)
			go f.copy(down, up, done)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		close(done)
		cmu.Lock()
		for _, c := range conns {
			c.Close()
		}
		cmu.Unlock()
	})
	return f
}

// Addr is the proxy's address, host:port.
func (f *Freezer) Addr() string { return f.ln.Addr().String() }

// Freeze stops every byte, both ways, on every connection from now on.
func (f *Freezer) Freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.thawed = make(chan struct{})
}

func (f *Freezer) copy(dst, src net.Conn, done <-chan struct{}) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			f.mu.Lock()
			thawed := f.thawed
			f.mu.Unlock()
			select {
			case <-thawed:
			case <-done:
				return
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			// The end of one side ends the other: a server that
			// closes a connection (or says all it had to, as
			// ZooKeeper's four-letter words do) is seen to by its
			// client, as without the proxy.
			if tc, ok := dst.(*net.TCPConn); ok && err == io.EOF {
				_ = tc.CloseWrite()
			} else {
				dst.Close()
			}
			return
		}
	}
}
