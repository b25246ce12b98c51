package api

import (
	"net"
	"net/http"
	"time"

	"golang.org/x/net/netutil"
)

// The API server's bounds: a client that opens connections and sends
// nothing, or keeps them idle, must not hold the agent's file descriptors
// (800 idle keep-alive connections were still open 90 s later before).
const (
	// MaxConns is how many connections the API serves at once; more wait
	// in the listen backlog until one closes.
	MaxConns = 256
	// IdleTimeout closes a keep-alive connection that sends no request.
	IdleTimeout = 30 * time.Second
	// ReadHeaderTimeout closes a connection whose request's header has not
	// come in whole.
	ReadHeaderTimeout = 5 * time.Second
)

// Limits are the bounds of a Server; tests shorten them.
type Limits struct {
	MaxConns                       int
	IdleTimeout, ReadHeaderTimeout time.Duration
}

// DefaultLimits are the agent's.
var DefaultLimits = Limits{MaxConns: MaxConns, IdleTimeout: IdleTimeout, ReadHeaderTimeout: ReadHeaderTimeout}

// Server serves h on ln within the limits: call Serve, and Shutdown or
// Close on the returned server.
func Server(h http.Handler, lim Limits) *http.Server {
	return &http.Server{Handler: h, IdleTimeout: lim.IdleTimeout, ReadHeaderTimeout: lim.ReadHeaderTimeout}
}

// Listener caps ln's connections open at once at lim.MaxConns.
func Listener(ln net.Listener, lim Limits) net.Listener {
	return netutil.LimitListener(ln, lim.MaxConns)
}
