package redis

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	goredis "github.com/redis/go-redis/v9"

	"github.com/electd/electd/providers"
)

var _ providers.Provider = (*Provider)(nil)

const (
	dialTimeout = 2 * time.Second
	ioTimeout   = 3 * time.Second
)

// Provider is a lease store on one Redis server or on a Redlock quorum of
// independent servers.
type Provider struct {
	nodes  []*node
	quorum int
	prefix string
	log    hclog.Logger

	// closed ends watches when the provider is closed.
	closed    context.Context
	closeAll  context.CancelFunc
	closeOnce sync.Once
	closeErr  error
}

// node is one Redis server.
type node struct {
	addr string
	c    *goredis.Client
}

// New returns a provider on the servers of s. It does no I/O.
func New(ctx context.Context, s Settings, log hclog.Logger) (*Provider, error) {
	_ = ctx // kept for symmetry with the other providers' constructors
	if log == nil {
		log = hclog.NewNullLogger()
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	prefix := s.Prefix
	p := &Provider{
		quorum: len(s.Addresses)/2 + 1,
		prefix: prefix,
		log:    log.Named("redis"),
	}
	p.closed, p.closeAll = context.WithCancel(context.Background())
	for _, addr := range s.Addresses {
		opt := &goredis.Options{
			Addr:     addr,
			Username: s.Username,
			Password: s.Password,
			DB:       s.DB,
			// A retried script could run twice: a Release retried after
			// its reply was lost would answer "lost" for a release that
			// happened. The agent retries at its own pace instead.
			MaxRetries:            -1,
			DialTimeout:           dialTimeout,
			DialerRetries:         1,
			ReadTimeout:           ioTimeout,
			WriteTimeout:          ioTimeout,
			ContextTimeoutEnabled: true,
			PoolSize:              16,
			DisableIdentity:       true,
		}
		if s.TLS {
			opt.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		p.nodes = append(p.nodes, &node{addr: addr, c: goredis.NewClient(opt)})
	}
	if len(p.nodes) > 1 {
		p.log.Debug("redlock", "servers", len(p.nodes), "quorum", p.quorum)
	}
	return p, nil
}

// Close closes the connections and ends every watch. It is safe to call
// more than once.
func (p *Provider) Close() error {
	p.closeOnce.Do(func() {
		p.closeAll()
		var errs []error
		for _, n := range p.nodes {
			if err := n.c.Close(); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", n.addr, err))
			}
		}
		p.closeErr = errors.Join(errs...)
	})
	return p.closeErr
}

// The three names of a lease. Fixed words between prefix and key keep the
// names of different keys apart ("a" and "a:live" cannot collide).
func (p *Provider) stateKey(key string) string { return p.prefix + "lease:" + key }
func (p *Provider) liveKey(key string) string  { return p.prefix + "live:" + key }
func (p *Provider) channel(key string) string  { return p.prefix + "notify:" + key }

// drift is the Redlock allowance for clock drift between the servers and
// the client, subtracted from the validity of every term.
func drift(ttl time.Duration) time.Duration { return ttl/100 + 2*time.Millisecond }

// nodeTimeout bounds one call to one server, so a server that hangs costs a
// fraction of the term rather than all of it (Redlock asks for a timeout
// small next to the ttl).
func nodeTimeout(ttl time.Duration) time.Duration {
	return min(max(ttl/5, 200*time.Millisecond), ioTimeout)
}
