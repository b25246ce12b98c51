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

	"github.com/electd/electd/config"
	"github.com/electd/electd/providers"
)

var (
	_ providers.Provider = (*Provider)(nil)
	_ providers.Watcher  = (*Provider)(nil)
)

const (
	// maxField bounds keys and holders; Redis would take more, but these
	// are names, and a bound keeps a typo'd multi-megabyte value out.
	maxField = 1024

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

// Open is the constructor the agent calls by provider type: p.Settings must
// be a *config.RedisSettings.
func Open(ctx context.Context, p config.Provider, log hclog.Logger) (providers.Provider, error) {
	s, ok := p.Settings.(*config.RedisSettings)
	if !ok || s == nil {
		return nil, fmt.Errorf("redis: provider %s: settings are %T, not *config.RedisSettings", p.Ref(), p.Settings)
	}
	return New(ctx, *s, log)
}

// New returns a provider on the servers of s. It does no I/O.
func New(ctx context.Context, s config.RedisSettings, log hclog.Logger) (*Provider, error) {
	_ = ctx // kept for symmetry with the other providers' constructors
	if log == nil {
		log = hclog.NewNullLogger()
	}
	switch n := len(s.Addresses); {
	case n == 0:
		return nil, errors.New("redis: no addresses")
	case n == 2:
		// A majority of two is both: losing either server stops every
		// election, which is worse than one server.
		return nil, errors.New("redis: 2 addresses: give 1 for a single server or 3 or more for Redlock")
	}
	seen := map[string]bool{}
	for _, a := range s.Addresses {
		if seen[a] {
			return nil, fmt.Errorf("redis: address %s given twice: Redlock needs independent servers", a)
		}
		seen[a] = true
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

func checkLease(key, holder string, ttl time.Duration) error {
	return providers.CheckLease(key, holder, ttl, maxField)
}

// drift is the Redlock allowance for clock drift between the servers and
// the client, subtracted from the validity of every term.
func drift(ttl time.Duration) time.Duration { return ttl/100 + 2*time.Millisecond }

// nodeTimeout bounds one call to one server, so a server that hangs costs a
// fraction of the term rather than all of it (Redlock asks for a timeout
// small next to the ttl).
func nodeTimeout(ttl time.Duration) time.Duration {
	return min(max(ttl/5, 200*time.Millisecond), ioTimeout)
}
