package sql

import (
	"context"
	"database/sql/driver"
	"net"
	"strconv"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// hostRotation opens the pool's PostgreSQL connections on a DSN of several
// hosts. pgx tries the hosts in the DSN's order, each until
// connect_timeout (or, without one, until the request's deadline): a host
// lost silently (packets dropped, no RST) before the primary in the list
// takes the whole deadline of every new connection, and after a failover
// that leaves the old primary first, no agent reaches the new one while
// the partition lasts (the cluster suite's "isolate leader+primary", 60 s
// without a leader). So each new connection starts from one host, and a
// connection that fails moves the start past the host it was dialling
// when it gave up (to the next host when that is not known: a host name
// that resolved to an address): the hosts are tried in the same circular
// order, from where the last success began, and a dead host costs one
// failed connection, not every one.
type hostRotation struct {
	groups [][]*pgconn.FallbackConfig // per host:port, its TLS and plain variants in order
	start  atomic.Int64
}

type startKey struct{}

// dialed is the address a connection dialled last.
type dialed struct{ addr atomic.Pointer[string] }

type dialedKey struct{}

// newHostRotation is nil for a DSN of one host.
func newHostRotation(cfg *pgx.ConnConfig) *hostRotation {
	all := append([]*pgconn.FallbackConfig{{Host: cfg.Host, Port: cfg.Port, TLSConfig: cfg.TLSConfig}}, cfg.Fallbacks...)
	var groups [][]*pgconn.FallbackConfig
	for _, f := range all {
		if n := len(groups); n > 0 && groups[n-1][0].Host == f.Host && groups[n-1][0].Port == f.Port {
			groups[n-1] = append(groups[n-1], f)
			continue
		}
		groups = append(groups, []*pgconn.FallbackConfig{f})
	}
	if len(groups) < 2 {
		return nil
	}
	return &hostRotation{groups: groups}
}

// order is the hosts beginning with group start, the rest after it in the
// DSN's circular order.
func (r *hostRotation) order(start int) []*pgconn.FallbackConfig {
	var out []*pgconn.FallbackConfig
	for i := range r.groups {
		out = append(out, r.groups[(start+i)%len(r.groups)]...)
	}
	return out
}

// before sets a connection's hosts (on pgx's shallow copy of the
// configuration: the slices are new).
func (r *hostRotation) before(ctx context.Context, cfg *pgx.ConnConfig) error {
	start, _ := ctx.Value(startKey{}).(int64)
	hosts := r.order(int(start))
	cfg.Host, cfg.Port, cfg.TLSConfig = hosts[0].Host, hosts[0].Port, hosts[0].TLSConfig
	cfg.Fallbacks = hosts[1:]
	return nil
}

// connector opens the pool's connections through r.
func (r *hostRotation) connector(cfg pgx.ConnConfig) driver.Connector {
	dial := cfg.DialFunc
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		// After the deadline pgx still goes through the remaining hosts,
		// each failing at once: the host that took the time is the last
		// one dialled before it.
		if d, ok := ctx.Value(dialedKey{}).(*dialed); ok && ctx.Err() == nil {
			d.addr.Store(&addr)
		}
		return dial(ctx, network, addr)
	}
	return rotatingConnector{r: r, inner: stdlib.GetConnector(cfg, stdlib.OptionBeforeConnect(r.before))}
}

// after is the start after a connection that began at start failed while
// dialling addr ("" when it dialled nothing).
func (r *hostRotation) after(start int64, addr string) int64 {
	n := int64(len(r.groups))
	for k := int64(0); k < n; k++ {
		i := (start + k) % n
		f := r.groups[i][0]
		if addr != "" && net.JoinHostPort(f.Host, strconv.Itoa(int(f.Port))) == addr {
			return (i + 1) % n
		}
	}
	return (start + 1) % n
}

type rotatingConnector struct {
	r     *hostRotation
	inner driver.Connector
}

func (c rotatingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	start := c.r.start.Load()
	d := &dialed{}
	conn, err := c.inner.Connect(context.WithValue(context.WithValue(ctx, startKey{}, start), dialedKey{}, d))
	if err != nil {
		addr := ""
		if a := d.addr.Load(); a != nil {
			addr = *a
		}
		c.r.start.CompareAndSwap(start, c.r.after(start, addr))
	}
	return conn, err
}

func (c rotatingConnector) Driver() driver.Driver { return c.inner.Driver() }
