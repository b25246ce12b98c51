package zookeeper

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/hashicorp/go-hclog"
)

// session is one ZooKeeper session of the provider, asked for with a
// timeout. Every lease whose ttl rounds to that timeout keeps its ephemeral
// holder znode in this session, so ZooKeeper deletes the znode when the
// session expires: when the server has heard nothing from this process
// (not a request, not a ping) for the negotiated timeout.
//
// The client (go-zookeeper/zk) reconnects by itself, keeping the session
// when it gets back within the timeout and starting a new one when the
// server says it expired. Ephemeral znodes belong to a session id, so the
// leases compare the znode's ephemeralOwner with SessionID().
type session struct {
	conn    *zk.Conn
	asked   time.Duration // the timeout asked for
	changes chan struct{} // a state event happened (capacity 1)
	// negotiated is the timeout the server granted, and granted the
	// session id it was granted for, read from the connect response on the
	// wire (see sniff): the client does not expose it.
	mu         sync.Mutex
	negotiated time.Duration
	granted    int64
	ready      bool       // it had a session (and sent the credentials) once
	warned     bool       // the raised timeout was logged
	authMu     sync.Mutex // one authentication at a time
	created    time.Time
	cur        net.Conn // the connection dialed last (see moveOff)
}

// zkLogger sends the client's messages to hclog at debug level: errors
// reach the agent as return values, and the client's own reconnect chatter
// would only repeat them.
type zkLogger struct{ log hclog.Logger }

func (l zkLogger) Printf(format string, args ...any) { l.log.Debug(fmt.Sprintf(format, args...)) }

// newSession is a session not yet connected, of timeout asked.
func (p *Provider) newSession(asked time.Duration) *session {
	return &session{asked: asked, changes: make(chan struct{}, 1), created: time.Now()}
}

// dial opens a session's connection to one server, reading the connect
// response as it passes (sniff).
func (s *session) dial(network, address string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, address, timeout)
	if err != nil {
		return nil, err
	}
	sc := &sniff{Conn: c, s: s}
	s.mu.Lock()
	s.cur = sc
	s.mu.Unlock()
	return sc, nil
}

// moveOff closes the session's current connection, keeping the session: the
// client fails the requests waiting on it (ErrConnectionClosed), dials the
// next server of the list and resumes the same session there, with its
// ephemeral znodes and watches. It is how a request that hung past its
// attempt's timeout leaves a server lost silently (packets dropped, no
// RST): left alone, the client gives such a server two thirds of the session
// timeout (the ttl) before it moves, and every request waits on it
// meanwhile, longer than a leader's renewal window. The agent sends a hung
// renewal again at once (agent/term.go), and the retry goes to the next
// server. A connection closed when its server was merely slow costs a
// reconnection within the session, nothing more.
func (p *Provider) moveOff(s *session) {
	s.mu.Lock()
	c := s.cur
	s.mu.Unlock()
	if c == nil {
		return
	}
	p.log.Info("a ZooKeeper request hung past its timeout: moving the session to another server",
		"server", c.RemoteAddr().String(), "session_timeout", s.asked)
	_ = c.Close()
}

// hangGuard moves s off its server (moveOff) if ctx's deadline passes before
// the returned stop is called: an operation calls stop when it returns.
// A canceled ctx (the caller gave up, not the server) moves nothing.
func (p *Provider) hangGuard(ctx context.Context, s *session) (stop func()) {
	if _, ok := ctx.Deadline(); !ok {
		return func() {}
	}
	expired := func() bool { return errors.Is(ctx.Err(), context.DeadlineExceeded) }
	unregister := context.AfterFunc(ctx, func() {
		if expired() {
			p.moveOff(s)
		}
	})
	return func() {
		// An operation that returned on ctx.Done may get here before ctx
		// runs its AfterFuncs: stopping f then must not skip the move.
		if unregister() && expired() {
			p.moveOff(s)
		}
	}
}

// sniff is a connection that reads the negotiated session timeout out of the
// first frame the server sends on it, the connect response (ZooKeeper's wire
// protocol: int32 length, int32 protocolVersion, int32 timeOut in ms, int64
// sessionId, then the password).
type sniff struct {
	net.Conn
	s    *session
	buf  []byte
	done bool
}

const connectResponseHead = 4 + 4 + 4 + 8

func (c *sniff) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if !c.done && n > 0 {
		c.buf = append(c.buf, p[:n]...)
		if len(c.buf) >= connectResponseHead {
			timeout := int32(binary.BigEndian.Uint32(c.buf[8:12]))
			id := int64(binary.BigEndian.Uint64(c.buf[12:20]))
			if id != 0 { // 0: the session expired; a new one follows on another connection
				c.s.mu.Lock()
				c.s.negotiated, c.s.granted = time.Duration(timeout)*time.Millisecond, id
				c.s.mu.Unlock()
			}
			c.done, c.buf = true, nil
		}
	}
	return n, err
}

// timeout is the timeout the server granted to the current session, or 0
// when it is not known (the session is not established).
func (s *session) timeout() time.Duration {
	id := s.conn.SessionID()
	s.mu.Lock()
	defer s.mu.Unlock()
	if id == 0 || id != s.granted {
		return 0
	}
	return s.negotiated
}

// event is the client's callback: it runs on the client's receive loop, so
// it only wakes whoever waits for the session.
func (s *session) event(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	select {
	case s.changes <- struct{}{}:
	default:
	}
}

// sessionMs is the session timeout asked for a ttl: whole milliseconds,
// rounded up, so that ZooKeeper never ends a term before the agent does.
func sessionMs(ttl time.Duration) (time.Duration, error) {
	if ttl <= 0 {
		return 0, fmt.Errorf("ttl %s is not positive", ttl)
	}
	d := (ttl + time.Millisecond - 1).Truncate(time.Millisecond)
	if d > time.Duration(1<<31-1)*time.Millisecond {
		return 0, fmt.Errorf("ttl %s is longer than a ZooKeeper session can be", ttl)
	}
	return d, nil
}

// session returns the established session of timeout ttl (rounded up to
// whole milliseconds), connecting it on first use. With strict set the
// server must have granted at least ttl: a shorter session would let
// ZooKeeper end a term before the leader stops its work, so such a ttl is
// refused (the operator raises the server's maxSessionTimeout or lowers the
// ttl). A longer one is safe, and logged once: a crashed leader's lease
// then ends later than its ttl.
func (p *Provider) session(ctx context.Context, ttl time.Duration, strict bool) (*session, error) {
	want, err := sessionMs(ttl)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errors.New("provider is closed")
	}
	s, ok := p.sessions[want]
	if !ok {
		s = p.newSession(want)
		conn, _, err := zk.Connect(p.servers, want,
			zk.WithDialer(s.dial),
			zk.WithEventCallback(s.event),
			zk.WithLogger(zkLogger{p.log}),
			zk.WithLogInfo(false),
		)
		if err != nil {
			p.mu.Unlock()
			return nil, fmt.Errorf("connect: %w", err)
		}
		s.conn = conn
		p.sessions[want] = s
	}
	p.mu.Unlock()

	if err := p.waitSession(ctx, s); err != nil {
		return nil, err
	}
	got := s.timeout()
	if got == 0 {
		return nil, errNoSession
	}
	if strict && got < want {
		return nil, fmt.Errorf("ZooKeeper granted a session timeout of %s for a ttl of %s: the server's maxSessionTimeout is below the ttl, and ZooKeeper would end a term before its leader stops; lower the job's ttl or raise maxSessionTimeout on the servers", got, ttl)
	}
	if got > want {
		s.mu.Lock()
		warn := !s.warned
		s.warned = true
		s.mu.Unlock()
		if warn {
			p.log.Warn("ZooKeeper raised the session timeout above the ttl (its minSessionTimeout): a crashed leader's lease ends after the longer timeout",
				"ttl", ttl, "session_timeout", got)
		}
	}
	return s, nil
}

// waitSession waits until s has a session (and, with credentials, has
// authenticated once), for at most the connect timeout after s was created.
// A session that never came up within it is closed and dropped, so the next
// call starts afresh.
func (p *Provider) waitSession(ctx context.Context, s *session) error {
	for {
		if s.conn.State() == zk.StateHasSession && s.timeout() > 0 {
			return p.authenticate(ctx, s)
		}
		s.mu.Lock()
		deadline := s.created.Add(p.connectTimeout)
		ready := s.ready
		s.mu.Unlock()
		wait := time.Until(deadline)
		if ready {
			// It had a session and lost the connection: no deadline of its
			// own, the caller's ctx bounds the wait.
			wait = time.Hour
		}
		if wait <= 0 {
			p.drop(s)
			return fmt.Errorf("%w within connect_timeout %s", errNoSession, p.connectTimeout)
		}
		t := time.NewTimer(min(wait, 100*time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			if ready && errors.Is(ctx.Err(), context.DeadlineExceeded) {
				// Still reconnecting at the attempt's deadline: the
				// server it is trying may be lost silently after the
				// handshake (the client waits ten times two thirds of
				// the session timeout for its connect response).
				p.moveOff(s)
			}
			return fmt.Errorf("%w: %w", errNoSession, ctx.Err())
		case <-s.changes:
		case <-t.C:
		}
		t.Stop()
	}
}

var errNoSession = errors.New("no session with ZooKeeper")

// authenticate sends the digest credentials once per session object; the
// client sends them again by itself on every reconnection.
func (p *Provider) authenticate(ctx context.Context, s *session) error {
	s.authMu.Lock()
	defer s.authMu.Unlock()
	s.mu.Lock()
	ready := s.ready
	s.mu.Unlock()
	if ready {
		return nil
	}
	if p.auth != nil {
		err := do(ctx, func() error { return s.conn.AddAuth("digest", p.auth) })
		if err != nil {
			return fmt.Errorf("authenticate: %w", explain(err))
		}
	}
	s.mu.Lock()
	s.ready = true
	s.mu.Unlock()
	return nil
}

// drop closes a session that never came up and forgets it.
func (p *Provider) drop(s *session) {
	p.mu.Lock()
	if p.sessions[s.asked] == s {
		delete(p.sessions, s.asked)
	}
	p.mu.Unlock()
	go s.conn.Close() // Close waits up to a second to send closeSession
}

// anySession is a session for reads and releases, which any session may
// do: the one of ttl when it exists, else any established one, else a new
// one of ttl.
func (p *Provider) anySession(ctx context.Context, ttl time.Duration) (*session, error) {
	if want, err := sessionMs(ttl); err == nil {
		p.mu.Lock()
		_, ok := p.sessions[want]
		p.mu.Unlock()
		if ok {
			return p.session(ctx, ttl, false)
		}
	}
	p.mu.Lock()
	var found *session
	for _, s := range p.sessions {
		if s.conn.State() == zk.StateHasSession {
			found = s
			break
		}
	}
	p.mu.Unlock()
	if found != nil {
		return p.session(ctx, found.asked, false)
	}
	if ttl <= 0 {
		ttl = defaultSession
	}
	return p.session(ctx, ttl, false)
}

// defaultSession is the timeout of a session opened only to read (Observe
// before any Acquire) or to watch.
const defaultSession = 10 * time.Second

// do runs f, a blocking client call, and returns its error, or ctx's when
// ctx ends first (f then finishes on its own; its result is dropped). The
// client has no contexts: a request waits for its answer, or fails when the
// connection is lost.
func do(ctx context.Context, f func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// explain makes a client error say what the operator can do about it.
func explain(err error) error {
	switch {
	case errors.Is(err, zk.ErrNoAuth):
		return fmt.Errorf("not allowed by the znodes' ACL: check username and password, and the ACL of root (%w)", err)
	case errors.Is(err, zk.ErrNoServer):
		return fmt.Errorf("no ZooKeeper server reachable (%w)", err)
	}
	return err
}
