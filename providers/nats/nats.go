package nats

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/electd/electd/providers"
)

var _ providers.Provider = (*Provider)(nil)

const (
	// opTimeout bounds a request whose caller's context has no deadline,
	// and the probes shared by several callers.
	opTimeout = 5 * time.Second
	// reconnectWait is the pause between two rounds of reconnection
	// attempts (plus jitter): short, so that a restarted server is found
	// again well within a term.
	reconnectWait = 250 * time.Millisecond
	// pingInterval × (maxPingsOut+1) is how long a connection that stopped
	// moving bytes (a partition, a frozen server) takes to be given up and
	// replaced; operations on it fail by their own deadlines meanwhile.
	pingInterval = 2 * time.Second
	maxPingsOut  = 2
	// pingCheck is how long a server has to answer a ping after a request
	// ran out of time before its connection is given up (suspect).
	pingCheck = 500 * time.Millisecond
)

// Provider is a lease store on a JetStream key-value bucket.
type Provider struct {
	nc       *nats.Conn
	js       jetstream.JetStream
	bucket   string
	replicas int
	log      hclog.Logger

	kvMu sync.Mutex
	kv   jetstream.KeyValue // nil until the bucket is found or created

	mu        sync.Mutex
	own       map[string]written // this client's last write of each key it holds
	connErr   error              // the last connection error, for "not connected"
	permErr   error              // the last permissions violation, and when
	permAt    time.Time
	watches   map[*watch]struct{}
	probing   *probe        // the clock probe in flight, shared
	lastProbe *probeReading // the last one done, reused for probeReuse

	// closed ends watches and probes when the provider is closed.
	closed    context.Context
	closeAll  context.CancelFunc
	closeOnce sync.Once

	checking atomic.Bool // a suspect check runs
}

// New connects to the servers of s. When no server answers it returns all
// the same, with a connection that keeps trying in the background: an agent
// started while NATS is down keeps running and reports an error per
// operation. The bucket is looked up (and created when missing) on first
// use.
func New(ctx context.Context, s Settings, log hclog.Logger) (*Provider, error) {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("nats: %w", err)
	}
	if s.ConnectTimeout == 0 {
		s.ConnectTimeout = DefaultConnectTimeout
	}
	p := &Provider{
		bucket:   s.Bucket,
		replicas: max(s.Replicas, 1),
		log:      log.Named("nats"),
		own:      map[string]written{},
		watches:  map[*watch]struct{}{},
	}
	if p.bucket == "" {
		p.bucket = DefaultBucket
	}
	opts, err := p.options(s)
	if err != nil {
		return nil, err
	}
	p.closed, p.closeAll = context.WithCancel(context.Background())
	nc, err := connect(ctx, strings.Join(s.Servers, ","), opts)
	if err != nil {
		p.closeAll()
		return nil, fmt.Errorf("nats: connect: %w", err)
	}
	p.nc = nc
	if !nc.IsConnected() {
		if err := nc.LastError(); err != nil && p.lastConnErr() == nil {
			p.setConnErr(err)
		}
		p.log.Warn("no NATS server answers yet; retrying in the background", "error", p.lastConnErr())
	}
	if p.js, err = jetstream.New(nc, jetstream.WithDefaultTimeout(opTimeout)); err != nil {
		nc.Close()
		p.closeAll()
		return nil, fmt.Errorf("nats: %w", err)
	}
	return p, nil
}

// connect makes the connection: its first attempt (ConnectTimeout per
// server) runs while ctx allows; a connection that comes too late is closed.
func connect(ctx context.Context, servers string, opts []nats.Option) (*nats.Conn, error) {
	type result struct {
		nc  *nats.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		nc, err := nats.Connect(servers, opts...)
		done <- result{nc, err}
	}()
	select {
	case r := <-done:
		return r.nc, r.err
	case <-ctx.Done():
		go func() {
			if r := <-done; r.nc != nil {
				r.nc.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

// options are the connection's options: authentication, TLS, timeouts,
// and reconnection for ever.
func (p *Provider) options(s Settings) ([]nats.Option, error) {
	opts := []nats.Option{
		nats.Name("electd"),
		nats.Timeout(s.ConnectTimeout),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(reconnectWait),
		nats.ReconnectJitter(100*time.Millisecond, time.Second),
		nats.PingInterval(pingInterval),
		nats.MaxPingsOutstanding(maxPingsOut),
		// No buffering while reconnecting: a write the caller gave up on
		// must not reach the store later (a late Acquire or Renew would
		// hold a lease for a node that believes it failed). Requests fail
		// at once instead, and the agent retries at its own pace.
		nats.ReconnectBufSize(-1),
		nats.NoCallbacksAfterClientClose(),
		nats.ConnectHandler(func(*nats.Conn) { p.connected() }),
		nats.ReconnectHandler(func(*nats.Conn) { p.connected() }),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				p.setConnErr(err)
			}
		}),
		nats.ReconnectErrHandler(func(_ *nats.Conn, err error) { p.setConnErr(err) }),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			// A request the server refused gets no answer: the caller
			// sees its deadline pass, and explain adds why.
			if errors.Is(err, nats.ErrPermissionViolation) {
				p.mu.Lock()
				p.permErr, p.permAt = err, time.Now()
				p.mu.Unlock()
			}
			p.log.Debug("asynchronous error", "error", err)
		}),
	}
	switch {
	case s.CredentialsFile != "":
		// Read now for a clear error; the client reads it again on every
		// connection (a rotated file is picked up). Its contents are
		// never logged.
		if _, err := os.ReadFile(s.CredentialsFile); err != nil {
			return nil, fmt.Errorf("nats: credentials_file: %w", err)
		}
		opts = append(opts, nats.UserCredentials(s.CredentialsFile))
	case s.User != "":
		opts = append(opts, nats.UserInfo(s.User, s.Password))
	case s.Token != "":
		opts = append(opts, nats.Token(s.Token))
	}
	if s.useTLS() {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if s.TLSCAFile != "" {
			pem, err := os.ReadFile(s.TLSCAFile)
			if err != nil {
				return nil, fmt.Errorf("nats: tls_ca_file: %w", err)
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return nil, errors.New("nats: tls_ca_file: no PEM certificate in the file")
			}
		}
		if s.TLSCertFile != "" {
			cert, err := tls.LoadX509KeyPair(s.TLSCertFile, s.TLSKeyFile)
			if err != nil {
				return nil, fmt.Errorf("nats: tls_cert_file and tls_key_file: %w", err)
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		opts = append(opts, nats.Secure(cfg))
	}
	return opts, nil
}

// Close closes the connection and ends every watch. It is safe to call
// more than once.
func (p *Provider) Close() error {
	p.closeOnce.Do(func() {
		p.closeAll()
		p.nc.Close()
	})
	return nil
}

func (p *Provider) setConnErr(err error) {
	p.mu.Lock()
	p.connErr = err
	p.mu.Unlock()
}

func (p *Provider) lastConnErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.connErr
}

// connected runs when the connection is (re)established: the watches are
// made again (their consumers may have gone with the server), and
// notifications may have been missed meanwhile.
func (p *Provider) connected() {
	p.mu.Lock()
	p.connErr = nil
	ws := make([]*watch, 0, len(p.watches))
	for w := range p.watches {
		ws = append(ws, w)
	}
	p.mu.Unlock()
	for _, w := range ws {
		select {
		case w.reset <- struct{}{}: // the watch, made again, calls changed("")
		default: // a reset is pending
		}
	}
}

// store returns the bucket, looking it up or creating it on first use.
func (p *Provider) store(ctx context.Context) (jetstream.KeyValue, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !p.nc.IsConnected() {
		return nil, p.notConnected()
	}
	p.kvMu.Lock()
	defer p.kvMu.Unlock()
	if p.kv != nil {
		return p.kv, nil
	}
	kv, err := answered(ctx, func(ctx context.Context) (jetstream.KeyValue, error) { return p.js.KeyValue(ctx, p.bucket) })
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = p.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      p.bucket,
			Description: "electd leases",
			History:     1,
			Storage:     jetstream.FileStorage,
			Replicas:    p.replicas,
		})
		if errors.Is(err, jetstream.ErrBucketExists) || errors.Is(err, errSubjectsOverlap) {
			// Another agent was first. A create that races
			// another's is refused as a subject overlap, not as a
			// name in use: it is that agent's bucket if one
			// appears under the name.
			kv, err = p.createdByAnother(ctx, err)
		} else if err == nil {
			p.log.Info("created the lease bucket", "bucket", p.bucket, "replicas", p.replicas)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("bucket %q: %w", p.bucket, p.explain(err))
	}
	st, err := answered(ctx, kv.Status)
	if err != nil {
		return nil, fmt.Errorf("bucket %q: %w", p.bucket, err)
	}
	// A bucket created a moment ago may leave its first reads
	// unanswered (below): one read answered before any caller reads.
	if _, err := answered(ctx, func(ctx context.Context) (entry, error) {
		e, err := p.get(ctx, clockKey)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			err = nil
		}
		return e, err
	}); err != nil {
		return nil, fmt.Errorf("bucket %q: %w", p.bucket, p.explain(err))
	}
	if st.TTL() > 0 {
		// A record that vanishes takes its fencing token with it: the
		// next term would start again at 1.
		return nil, fmt.Errorf("bucket %q has a ttl (max_age %s): records would vanish and fencing tokens start again from 1; use a bucket without ttl (electd creates one when the bucket is missing)", p.bucket, st.TTL())
	}
	if js, ok := st.(*jetstream.KeyValueBucketStatus); ok && js.StreamInfo().Config.Storage == jetstream.MemoryStorage {
		p.log.Warn("the lease bucket is in memory: a restart of NATS forgets every fencing token", "bucket", p.bucket)
	}
	p.kv = kv
	return kv, nil
}

func (p *Provider) notConnected() error {
	if err := p.lastConnErr(); err != nil {
		return fmt.Errorf("not connected to NATS (%s): %w", strings.ToLower(p.nc.Status().String()), err)
	}
	return fmt.Errorf("not connected to NATS (%s)", strings.ToLower(p.nc.Status().String()))
}

// errSubjectsOverlap is JetStream's refusal of a stream whose subjects
// another stream has: also its answer to a create that races another
// create of the same stream.
var errSubjectsOverlap = &jetstream.APIError{ErrorCode: 10065}

// createdByAnother returns the bucket another agent created while this one
// tried to, or createErr when none appears under the name within a second
// (a stream of another name holds the subjects).
func (p *Provider) createdByAnother(ctx context.Context, createErr error) (jetstream.KeyValue, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	for {
		kv, err := answered(ctx, func(ctx context.Context) (jetstream.KeyValue, error) { return p.js.KeyValue(ctx, p.bucket) })
		if !errors.Is(err, jetstream.ErrBucketNotFound) {
			return kv, err
		}
		select {
		case <-ctx.Done():
			return nil, createErr
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// answered runs a read that nats-server may leave unanswered while the
// bucket's stream is being created (2.9 drops a lookup or a Get that races
// another client's create of the stream: it hangs until its context ends,
// and the same read again is answered at once). Each try has a deadline of
// its own, from 100 ms and doubling, so that a slow server is still waited
// for, until one answers or ctx ends.
func answered[T any](ctx context.Context, read func(context.Context) (T, error)) (T, error) {
	for wait := 100 * time.Millisecond; ; wait *= 2 {
		try, cancel := context.WithTimeout(ctx, wait)
		v, err := read(try)
		cancel()
		if err == nil || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
			return v, err
		}
	}
}

// explain wraps err with what it means for an operator, where the client's
// words are not enough.
func (p *Provider) explain(err error) error {
	switch {
	case errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
		return fmt.Errorf("%w (start nats-server with JetStream, -js, and enable it for the account)", err)
	case errors.Is(err, nats.ErrNoResponders):
		return fmt.Errorf("%w (no JetStream answered: is JetStream enabled, and does the bucket's stream have a leader?)", err)
	case errors.Is(err, nats.ErrConnectionReconnecting), errors.Is(err, nats.ErrReconnectBufExceeded):
		return p.notConnected()
	case errors.Is(err, context.DeadlineExceeded):
		p.suspect()
		p.mu.Lock()
		perm, at := p.permErr, p.permAt
		p.mu.Unlock()
		if perm != nil && time.Since(at) < time.Minute {
			return fmt.Errorf("%w (the server refused a request of this client lately: %v; see the permissions in docs/providers/nats.md)", err, perm)
		}
	}
	return err
}

// suspect checks the connection after a request ran out of time. A server
// lost silently (packets dropped, no RST) would otherwise keep it until the
// client's own pings give up, pingInterval × (maxPingsOut+1), longer than
// a short term's renewal window, and every retry would hang on it too. A
// server that does not answer a ping within pingCheck is left at once for
// another of the servers; one that answers (the request waited for a
// stream leader, say) is kept.
func (p *Provider) suspect() {
	if p.nc == nil || !p.nc.IsConnected() || !p.checking.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer p.checking.Store(false)
		ctx, cancel := context.WithTimeout(p.closed, pingCheck)
		defer cancel()
		err := p.nc.FlushWithContext(ctx)
		if err == nil || p.closed.Err() != nil || !p.nc.IsConnected() {
			return
		}
		p.log.Warn("the server does not answer a ping; connecting to another", "server", p.nc.ConnectedUrlRedacted(), "error", err)
		if err := p.nc.ForceReconnect(); err != nil {
			p.log.Debug("cannot force a reconnection", "error", err)
		}
	}()
}

// written is this client's last write of a key it holds: a compare-and-set
// on its revision succeeds only if nobody wrote the key since, so a Renew or
// Release of that term needs no read.
type written struct {
	holder string
	token  uint64
	rev    uint64
}

func (p *Provider) remember(key string, w written) {
	p.mu.Lock()
	p.own[key] = w
	p.mu.Unlock()
}

func (p *Provider) forget(key string) {
	p.mu.Lock()
	delete(p.own, key)
	p.mu.Unlock()
}

// lastWrite is the revision of this client's last write of the lease's
// term, if it has one.
func (p *Provider) lastWrite(l providers.Lease) (uint64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w, ok := p.own[l.Key]
	if !ok || w.holder != l.Holder || w.token != l.Token {
		return 0, false
	}
	return w.rev, true
}
