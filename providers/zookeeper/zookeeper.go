package zookeeper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/providers"
)

// holderNode is the name of a key's ephemeral child: it exists exactly while
// the lease is held.
const holderNode = "holder"

var _ providers.Provider = (*Provider)(nil)

// Provider is a lease store on a ZooKeeper ensemble.
type Provider struct {
	servers        []string
	root           string
	auth           []byte // "user:password" for the digest scheme; nil without credentials
	acl            []zk.ACL
	connectTimeout time.Duration
	log            hclog.Logger

	mu        sync.Mutex
	closed    bool
	sessions  map[time.Duration]*session // by timeout asked for
	terms     map[string]*term           // the terms this provider started or renewed, by key
	watchers  map[*watcher]struct{}
	rootReady bool
}

// New returns a provider on the ensemble described by s. It does no I/O:
// sessions are opened on first use, so an agent started while ZooKeeper is
// down keeps running and reports errors per operation.
func New(ctx context.Context, s Settings, log hclog.Logger) (*Provider, error) {
	_ = ctx // kept for symmetry with the other providers' constructors
	if log == nil {
		log = hclog.NewNullLogger()
	}
	if s.Root == "" {
		s.Root = DefaultRoot
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("zookeeper: %w", err)
	}
	if s.ConnectTimeout <= 0 {
		s.ConnectTimeout = DefaultConnectTimeout
	}
	p := &Provider{
		servers:        append([]string(nil), s.Servers...),
		root:           s.Root,
		acl:            zk.WorldACL(zk.PermAll),
		connectTimeout: s.ConnectTimeout,
		log:            log.Named("zookeeper").With("servers", strings.Join(s.Servers, ",")),
		sessions:       map[time.Duration]*session{},
		terms:          map[string]*term{},
		watchers:       map[*watcher]struct{}{},
	}
	if s.Username != "" {
		p.auth = []byte(s.Username + ":" + s.Password)
		// The "auth" scheme stands for the identities the creating session
		// authenticated as: the digest user.
		p.acl = zk.AuthACL(zk.PermAll)
	}
	return p, nil
}

// Close closes every session: ZooKeeper deletes their ephemeral holder
// znodes at once, so every lease still held by this provider ends now (the
// agent releases its leases before it closes a provider). Safe to call more
// than once.
func (p *Provider) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	sessions := p.sessions
	p.sessions = map[time.Duration]*session{}
	for _, t := range p.terms {
		t.timer.Stop()
	}
	p.terms = map[string]*term{}
	watchers := p.watchers
	p.watchers = map[*watcher]struct{}{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range sessions {
		wg.Go(s.conn.Close)
	}
	for w := range watchers {
		wg.Go(w.stop)
	}
	wg.Wait()
	return nil
}

func (p *Provider) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

func (p *Provider) keyPath(key string) string    { return p.root + "/" + key }
func (p *Provider) holderPath(key string) string { return p.root + "/" + key + "/" + holderNode }

// keyOf is the key of a znode path under root: "job" for root/job and for
// root/job/holder, "" for anything else.
func (p *Provider) keyOf(path string) string {
	rest, ok := strings.CutPrefix(path, p.root+"/")
	if !ok {
		return ""
	}
	key, _, _ := strings.Cut(rest, "/")
	return key
}

// record is the data of a key's persistent znode root/<key>: never deleted,
// it keeps the token and the value across terms, releases, expiries and
// server restarts. Holder is the holder of the last term, "" once released;
// it stays set when the term merely expired, so the holder may renew it
// while nobody else has taken it.
type record struct {
	Holder string `json:"holder"`
	Token  uint64 `json:"token"`
	Value  string `json:"value"`
}

// holding is the data of the ephemeral root/<key>/holder: the term it
// belongs to. Its mtime is the server's time of the term's last
// Acquire or Renew.
type holding struct {
	Holder string `json:"holder"`
	Token  uint64 `json:"token"`
	TTLms  int64  `json:"ttl_ms"`
}

func (h holding) ttl() time.Duration { return time.Duration(h.TTLms) * time.Millisecond }

// state is what a key's two znodes held when read.
type state struct {
	exists  bool // root/<key> exists
	rec     record
	recStat zk.Stat
	held    bool // root/<key>/holder exists
	hold    holding
	hold0   zk.Stat
}

// readAttempts bounds the re-reads of a key whose two znodes changed between
// the two reads.
const readAttempts = 5

// read reads a key's record and its holder znode. The two reads are not one
// snapshot; a term that started or ended between them shows as a token that
// differs, and the key is read again. Every write that follows a read is a
// multi-op guarded by the versions read, so a decision taken on a read that
// is already stale is never applied.
func (p *Provider) read(ctx context.Context, s *session, key string) (state, error) {
	for range readAttempts {
		var st state
		err := do(ctx, func() error {
			data, stat, err := s.conn.Get(p.keyPath(key))
			if errors.Is(err, zk.ErrNoNode) {
				return nil
			}
			if err != nil {
				return err
			}
			if err := json.Unmarshal(data, &st.rec); err != nil {
				return fmt.Errorf("decode %s: %w", p.keyPath(key), err)
			}
			st.exists, st.recStat = true, *stat
			data, stat, err = s.conn.Get(p.holderPath(key))
			if errors.Is(err, zk.ErrNoNode) {
				return nil
			}
			if err != nil {
				return err
			}
			if err := json.Unmarshal(data, &st.hold); err != nil {
				return fmt.Errorf("decode %s: %w", p.holderPath(key), err)
			}
			st.held, st.hold0 = true, *stat
			return nil
		})
		if err != nil {
			return state{}, explain(err)
		}
		if !st.held || st.hold.Token == st.rec.Token {
			return st, nil
		}
	}
	return state{}, errChanged
}

var errChanged = errors.New("lease changed hands during the operation; gave up after retries")

// ensureRoot creates root and its parents when missing, once per provider
// (and again when a write finds it gone).
func (p *Provider) ensureRoot(ctx context.Context, s *session, again bool) error {
	p.mu.Lock()
	ready := p.rootReady && !again
	p.mu.Unlock()
	if ready {
		return nil
	}
	path := ""
	for _, name := range strings.Split(p.root[1:], "/") {
		path += "/" + name
		err := do(ctx, func() error {
			_, err := s.conn.Create(path, nil, zk.FlagPersistent, p.acl)
			return err
		})
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create root %s: %w", path, explain(err))
		}
	}
	p.mu.Lock()
	p.rootReady = true
	p.mu.Unlock()
	return nil
}

func encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // plain structs of strings and integers always encode
	}
	return b
}

// conflict reports whether a multi-op failed because a znode changed since
// it was read (a racing client, an expiry): the caller reads again.
func conflict(err error) bool {
	return errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNodeExists) ||
		errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrNotEmpty)
}

// multiResult is the answer to a multi-op.
type multiResult struct {
	res []zk.MultiResponse
	err error
}

// send starts ops as one ZooKeeper transaction (all or none) and returns
// where its answer will arrive. A failed op's error is the answer's error.
func send(s *session, ops ...any) <-chan multiResult {
	ch := make(chan multiResult, 1)
	go func() {
		res, err := s.conn.Multi(ops...)
		if err == nil {
			for _, r := range res {
				if r.Error != nil {
					err = r.Error
					break
				}
			}
		}
		ch <- multiResult{res, err}
	}()
	return ch
}

// multi runs ops as one transaction and waits for the answer, or for ctx
// (the transaction may still commit then: callers that must know use send).
func multi(ctx context.Context, s *session, ops ...any) ([]zk.MultiResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case r := <-send(s, ops...):
		return r.res, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func lost(l providers.Lease) error {
	return fmt.Errorf("zookeeper: lease %q token %d of %q: %w", l.Key, l.Token, l.Holder, providers.ErrLost)
}
