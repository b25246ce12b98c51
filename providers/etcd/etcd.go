package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/connectivity"

	"github.com/electd/electd/providers"
)

// DefaultPrefix is where leases live when the settings give no prefix.
const DefaultPrefix = "/electd/"

// The client's keep-alive (see New): pings after keepAliveTime without
// traffic (gRPC's floor is 10 s), and a connection whose ping or request
// is not acknowledged within keepAliveTimeout is closed.
const (
	keepAliveTime    = 10 * time.Second
	keepAliveTimeout = 2 * time.Second
)

// recordSuffix names the record key of a job key; keys cannot hold "/", so it
// never collides with another key's lease key.
const recordSuffix = "/record"

var _ providers.Provider = (*Provider)(nil)

// Provider is a lease store on an etcd cluster.
type Provider struct {
	cfg    clientv3.Config
	prefix string
	log    hclog.Logger

	mu     sync.Mutex
	cli    *clientv3.Client
	closed bool

	refreshing chan struct{}              // a token held by session's refresh or grant (session.go)
	smu        sync.Mutex                 // guards sessions, readying, keeping, abandoned; never held over a request (session.go)
	sessions   map[int64]session          // by granted ttl in seconds
	readying   map[int64]bool             // a session being made ready for a candidate
	keeping    bool                       // keepIdle runs
	abandoned  map[string]providers.Lease // by key
	sweeping   bool                       // a sweep runs
	done       chan struct{}              // closed by Close: keepIdle ends

	fmu   sync.Mutex
	freed map[string]freedKey // job keys the Notify watch saw released (freed.go)

	chains ttlChains   // reads of other holders' leases, to prove them expired (expired.go)
	probes leaseProbes // the leases a prober reads (expired.go)

	hmu   sync.Mutex
	held  map[string]held          // the terms this provider wrote, by key (held.go)
	terms map[clientv3.LeaseID]int // how many of held are on each session
}

// New returns a provider on the cluster described by s. It does no I/O: the
// client is created on first use.
func New(ctx context.Context, s Settings, log hclog.Logger) (*Provider, error) {
	_ = ctx // kept for symmetry with the other providers' constructors
	if log == nil {
		log = hclog.NewNullLogger()
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("etcd: %w", err)
	}
	if s.Prefix == "" {
		s.Prefix = DefaultPrefix
	}
	if s.DialTimeout <= 0 {
		s.DialTimeout = DefaultDialTimeout
	}
	return &Provider{
		cfg: clientv3.Config{
			Endpoints:   s.Endpoints,
			Username:    s.Username,
			Password:    s.Password,
			DialTimeout: s.DialTimeout,
			// Keep-alives notice a member lost silently (packets dropped, no
			// RST), which gRPC would otherwise keep as a ready connection
			// that round robin sends a share of the requests to, to hang
			// there (etcd-io/etcd#7321, #8673). gRPC pings no more often
			// than every 10 s, but it also sets the timeout as the socket's
			// TCP_USER_TIMEOUT: a request left unacknowledged that long
			// closes the connection, its requests fail, and the member
			// leaves the rotation until it answers again. Requests that hang
			// meanwhile are retried by the agent (agent/term.go).
			DialKeepAliveTime:    keepAliveTime,
			DialKeepAliveTimeout: keepAliveTimeout,
			PermitWithoutStream:  true,
			// Errors reach the agent as return values; the client's own
			// retry chatter would only duplicate them on stderr.
			Logger: zap.NewNop(),
		},
		prefix:     s.Prefix,
		refreshing: make(chan struct{}, 1),
		log:        log.Named("etcd").With("endpoints", strings.Join(s.Endpoints, ",")),
		done:       make(chan struct{}),
	}, nil
}

// client returns the etcd client, creating it on first use. With a username
// the client authenticates while it is created (bounded by dial_timeout), so
// creating it in New would make an agent fail to start while etcd is down.
func (p *Provider) client(ctx context.Context) (*clientv3.Client, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errors.New("provider is closed")
	}
	if p.cli != nil {
		return p.cli, nil
	}
	cli, err := clientv3.New(p.cfg)
	if err != nil {
		// Not wrapped with the config: it holds the password.
		return nil, fmt.Errorf("connect: %w", err)
	}
	p.cli = cli
	return cli, nil
}

// Close revokes the provider's sessions, so that no lease key of this
// process outlives it, and closes the client. It is safe to call more than
// once.
func (p *Provider) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		close(p.done)
	}
	p.closed = true
	if p.cli == nil {
		return nil
	}
	cli := p.cli
	p.cli = nil
	p.revokeSessions(cli)
	return cli.Close()
}

// explain names the connection state in a deadline error. The client waits
// for a connection until ctx ends (gRPC WaitForReady, so a call rides out a
// short outage or an etcd leader election), and then says no more than
// "context deadline exceeded".
func (p *Provider) explain(err error) error {
	if !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	p.mu.Lock()
	cli := p.cli
	p.mu.Unlock()
	if cli == nil {
		return err
	}
	if st := cli.ActiveConnection().GetState(); st != connectivity.Ready {
		return fmt.Errorf("no connection to etcd (%s): %w", strings.ToLower(st.String()), err)
	}
	return err
}

func (p *Provider) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

func (p *Provider) leaseKey(key string) string  { return p.prefix + key }
func (p *Provider) recordKey(key string) string { return p.prefix + key + recordSuffix }

// leaseSeconds is the etcd lease ttl for ttl: whole seconds, rounded up, so
// the store never ends a term before the agent does. etcd may raise it
// further to its minimum lease ttl.
func leaseSeconds(ttl time.Duration) (int64, error) {
	if ttl <= 0 {
		return 0, fmt.Errorf("ttl %s is not positive", ttl)
	}
	s := int64((ttl + time.Second - 1) / time.Second)
	if s > clientv3.MaxLeaseTTL {
		return 0, fmt.Errorf("ttl %s is longer than etcd's maximum lease of %d s", ttl, clientv3.MaxLeaseTTL)
	}
	return s, nil
}

// holding is the content of a lease key.
type holding struct {
	Holder string `json:"holder"`
	Token  uint64 `json:"token"`
	// TTL is the lease ttl asked for, in seconds (etcd may grant more):
	// Renew with another ttl moves the key to a new etcd lease.
	TTL int64 `json:"ttl"`
}

// record is the content of a record key. Holder is the holder of the last
// term, "" once released; it stays set when the term merely expired, so the
// holder may still renew it while nobody else has taken it.
type record struct {
	Holder string `json:"holder"`
	Token  uint64 `json:"token"`
	Value  string `json:"value"`
}

// state is both keys of a job key, read at one revision.
type state struct {
	held      bool // the lease key exists
	hold      holding
	leaseID   clientv3.LeaseID
	leaseRev  int64 // ModRevision of the lease key; 0 when absent
	rec       record
	recordRev int64 // ModRevision of the record; 0 when absent
	revision  int64 // the store revision of the read
}

// read reads both keys of key in one transaction, so they come from the same
// revision.
func (p *Provider) read(ctx context.Context, cli *clientv3.Client, key string) (state, error) {
	lk, rk := p.leaseKey(key), p.recordKey(key)
	resp, err := cli.Txn(ctx).Then(clientv3.OpGet(lk), clientv3.OpGet(rk)).Commit()
	if err != nil {
		return state{}, err
	}
	return p.decode(key, resp.Header.Revision, resp.Responses[0], resp.Responses[1])
}

// decode makes the state of key from the answers to the Gets of its lease
// key and its record, read at revision.
func (p *Provider) decode(key string, revision int64, lease, rec *pb.ResponseOp) (state, error) {
	st := state{revision: revision}
	if kvs := lease.GetResponseRange().GetKvs(); len(kvs) > 0 {
		if err := json.Unmarshal(kvs[0].Value, &st.hold); err != nil {
			return state{}, fmt.Errorf("decode %s: %w", p.leaseKey(key), err)
		}
		st.held, st.leaseID, st.leaseRev = true, clientv3.LeaseID(kvs[0].Lease), kvs[0].ModRevision
	}
	if kvs := rec.GetResponseRange().GetKvs(); len(kvs) > 0 {
		if err := json.Unmarshal(kvs[0].Value, &st.rec); err != nil {
			return state{}, fmt.Errorf("decode %s: %w", p.recordKey(key), err)
		}
		st.recordRev = kvs[0].ModRevision
	}
	return st, nil
}

// unchanged compares both keys with what st read: a transaction guarded by
// it commits only if nobody wrote either key since (a missing key has
// ModRevision 0).
func (p *Provider) unchanged(key string, st state) []clientv3.Cmp {
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.ModRevision(p.leaseKey(key)), "=", st.leaseRev),
		clientv3.Compare(clientv3.ModRevision(p.recordKey(key)), "=", st.recordRev),
	}
}

func encode(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // plain structs of strings and integers always encode
	}
	return string(b)
}

func lost(l providers.Lease) error {
	return fmt.Errorf("etcd: lease %q token %d of %q: %w", l.Key, l.Token, l.Holder, providers.ErrLost)
}
