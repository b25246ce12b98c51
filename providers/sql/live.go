package sql

import (
	"context"
	"net"
	"time"

	"github.com/electd/electd/internal/tcpopt"
)

// A connection to a PostgreSQL or MySQL server lost silently (packets
// dropped, no RST) would otherwise look alive to the pool for as long as
// the system's TCP defaults say (15 s of Go's keep-alive, then minutes of
// retransmissions): a renewal that picks it hangs until its deadline. With
// these, an idle pooled connection to a lost server is closed within about
// keepIdle + keepCount × keepInterval, and one whose request goes
// unacknowledged for userTimeout is closed at once (Linux's
// TCP_USER_TIMEOUT). A request that hangs meanwhile is abandoned at its
// deadline and sent again by the agent, on another connection.
const (
	keepIdle     = 5 * time.Second
	keepInterval = time.Second
	keepCount    = 3
	userTimeout  = 5 * time.Second
)

type dialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// live wraps dial so that every TCP connection it makes gets the
// keep-alive and user timeout above.
func live(dial dialFunc) dialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if tc, ok := c.(*net.TCPConn); ok {
			// Best effort: a connection without them still works.
			_ = tc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: keepIdle, Interval: keepInterval, Count: keepCount})
			_ = tcpopt.SetUserTimeout(tc, userTimeout)
		}
		return c, nil
	}
}
