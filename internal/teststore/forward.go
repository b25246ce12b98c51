package teststore

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Forwarder is a loopback TCP address that forwards every connection to a
// backend the test can switch: a failover's "the clients' address now
// reaches the promoted replica" (a virtual IP, a DNS name), for stores that
// electd reaches at one address.
type Forwarder struct {
	Addr string
	ln   net.Listener

	mu      sync.Mutex
	backend string
	conns   map[net.Conn]bool
}

// Forward listens on a free loopback port, forwarding to backend, until t
// ends.
func Forward(t testing.TB, backend string) *Forwarder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &Forwarder{Addr: ln.Addr().String(), ln: ln, backend: backend, conns: map[net.Conn]bool{}}
	t.Cleanup(func() { ln.Close(); f.Switch("") })
	go f.serve()
	return f
}

// Switch sends new connections to backend and closes every connection open
// now, as a failover does; "" refuses new ones.
func (f *Forwarder) Switch(backend string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.backend = backend
	for c := range f.conns {
		c.Close()
		delete(f.conns, c)
	}
}

func (f *Forwarder) serve() {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		go f.pipe(c)
	}
}

func (f *Forwarder) pipe(c net.Conn) {
	f.mu.Lock()
	backend := f.backend
	f.mu.Unlock()
	if backend == "" {
		c.Close()
		return
	}
	b, err := net.Dial("tcp", backend)
	if err != nil {
		c.Close()
		return
	}
	f.mu.Lock()
	f.conns[c], f.conns[b] = true, true
	f.mu.Unlock()
	go func() { io.Copy(b, c); b.Close(); c.Close() }()
	io.Copy(c, b)
	c.Close()
	b.Close()
}
