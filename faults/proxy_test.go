package faults

import (
	"io"
	"net"
	"sync"
	"testing"
)

// proxy is a TCP proxy between one agent and the store, so that the test
// can break that agent's connections:
//
//	cut     resets every open connection (RST) and refuses new ones;
//	freeze  stops moving bytes both ways on every connection, old and new,
//	        like a network partition. On restore the bytes held back are
//	        delivered late, as after a partition heals: a request the agent
//	        gave up on can still reach the store.
type proxy struct {
	ln       net.Listener
	upstream string

	mu     sync.Mutex
	state  string // up | cut | freeze
	thawed chan struct{}
	conns  map[net.Conn]struct{}
}

func newProxy(t *testing.T, upstream string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, upstream: upstream, state: "up", thawed: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	close(p.thawed)
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) close() {
	p.ln.Close()
	p.set("cut")
}

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		cut := p.state == "cut"
		p.mu.Unlock()
		if cut {
			reset(c)
			continue
		}
		go p.pipe(c)
	}
}

func (p *proxy) pipe(down net.Conn) {
	up, err := net.Dial("tcp", p.upstream)
	if err != nil {
		reset(down)
		return
	}
	p.mu.Lock()
	if p.state == "cut" {
		p.mu.Unlock()
		reset(down)
		reset(up)
		return
	}
	p.conns[down], p.conns[up] = struct{}{}, struct{}{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.copy(up, down) }()
	go func() { defer wg.Done(); p.copy(down, up) }()
	wg.Wait()
	p.mu.Lock()
	delete(p.conns, down)
	delete(p.conns, up)
	p.mu.Unlock()
}

// copy moves bytes from src to dst, holding them while frozen. Either side
// closing closes both.
func (p *proxy) copy(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			thawed := p.thawed
			p.mu.Unlock()
			<-thawed
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				reset(dst)
			}
			return
		}
	}
}

// set moves the proxy to state up, cut or freeze.
func (p *proxy) set(state string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if state == p.state {
		return
	}
	wasFrozen := p.state == "freeze"
	p.state = state
	switch state {
	case "freeze":
		p.thawed = make(chan struct{})
	case "cut":
		for c := range p.conns {
			reset(c)
		}
		if wasFrozen {
			close(p.thawed)
		}
	case "up":
		if wasFrozen {
			close(p.thawed)
		}
	}
}

// reset closes c with an RST, as a dropped connection looks to its peer.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}
