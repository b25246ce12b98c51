package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/config"
)

// Results of one delivery, as counted in electd_action_runs_total.
const (
	ResultOK      = "ok"      // a 2xx answer
	ResultFailed  = "failed"  // final failure: a 4xx, or every attempt used
	ResultDropped = "dropped" // the job's queue was full, or the agent stopped first
)

// Options configure a Sender. Zero values take the defaults.
type Options struct {
	Logger    hclog.Logger
	Version   string // for User-Agent: electd/<version>
	QueueSize int    // pending deliveries per job; default 256
	// BaseBackoff is the wait before the second attempt; it doubles per
	// attempt up to MaxBackoff, with jitter. Defaults 1s and 30s.
	BaseBackoff time.Duration
	MaxBackoff  time.Duration
	// OnResult, if set, is called once per delivery with its outcome.
	OnResult func(job, event, result string)
}

// Sender queues and delivers webhooks. Send never blocks.
type Sender struct {
	opts Options
	log  hclog.Logger

	ctx    context.Context // cancelled when Close gives up waiting
	cancel context.CancelFunc

	mu      sync.Mutex
	closed  bool
	queues  map[string]chan delivery // one worker per job keeps its order
	clients map[string]*http.Client  // by ca_file ("" = system roots)
	wg      sync.WaitGroup
}

// delivery is one webhook evaluated for one event: everything it sends is
// fixed at Send time, so retries send the same bytes.
type delivery struct {
	job, event string
	id         string
	url        string
	body       []byte
	headers    map[string]string
	secret     string
	timeout    time.Duration
	attempts   int
	client     *http.Client
}

func New(opts Options) *Sender {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = 256
	}
	if opts.BaseBackoff <= 0 {
		opts.BaseBackoff = time.Second
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 30 * time.Second
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Sender{
		opts:    opts,
		log:     opts.Logger,
		ctx:     ctx,
		cancel:  cancel,
		queues:  map[string]chan delivery{},
		clients: map[string]*http.Client{},
	}
}

// Send evaluates the webhook with ev and queues it behind the job's earlier
// deliveries. It returns at once; the outcome is logged and reported to
// OnResult. An expression that fails to evaluate is a failed delivery.
func (s *Sender) Send(ctx context.Context, job string, w *config.Webhook, ev config.Event) {
	log := s.log.With("job", job, "event", ev.Type)
	d, err := s.prepare(job, w, ev)
	if err != nil {
		log.Error("webhook not sent", "error", err)
		s.result(job, ev.Type, ResultFailed)
		return
	}
	log = log.With("url", redactURL(d.url), "delivery", d.id)

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		log.Warn("webhook dropped: the agent is stopping")
		s.result(job, ev.Type, ResultDropped)
		return
	}
	q, ok := s.queues[job]
	if !ok {
		q = make(chan delivery, s.opts.QueueSize)
		s.queues[job] = q
		s.wg.Add(1)
		go s.worker(q)
	}
	select {
	case q <- d:
	default:
		log.Error("webhook dropped: the job's delivery queue is full (is the receiver down?)", "queue_size", s.opts.QueueSize)
		s.result(job, ev.Type, ResultDropped)
	}
}

// Close stops taking deliveries and waits for queued ones until ctx is done;
// then it cancels what is still in flight and drops the rest.
func (s *Sender) Close(ctx context.Context) error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		for _, q := range s.queues {
			close(q)
		}
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.cancel()
		<-done
		return fmt.Errorf("webhook: stopped before every delivery finished: %w", ctx.Err())
	}
}

func (s *Sender) worker(q chan delivery) {
	defer s.wg.Done()
	for d := range q {
		if s.ctx.Err() != nil {
			s.log.Warn("webhook dropped: the agent stopped", "job", d.job, "event", d.event, "delivery", d.id)
			s.result(d.job, d.event, ResultDropped)
			continue
		}
		s.result(d.job, d.event, s.deliver(d))
	}
}

func (s *Sender) result(job, event, result string) {
	if s.opts.OnResult != nil {
		s.opts.OnResult(job, event, result)
	}
}

func (s *Sender) prepare(job string, w *config.Webhook, ev config.Event) (delivery, error) {
	url, err := w.URL.Eval(ev)
	if err != nil {
		return delivery{}, fmt.Errorf("webhook: url: %w", err)
	}
	var body []byte
	if w.Body.IsSet() {
		b, err := w.Body.Eval(ev)
		if err != nil {
			return delivery{}, fmt.Errorf("webhook: body: %w", err)
		}
		body = []byte(b)
	} else {
		body = DefaultPayload(ev)
	}
	headers, err := w.Headers.Eval(ev)
	if err != nil {
		return delivery{}, errors.New("webhook: headers could not be evaluated") // values are secret: no detail
	}
	client, err := s.client(w.CAFile)
	if err != nil {
		return delivery{}, err
	}
	timeout := w.Timeout
	if timeout <= 0 {
		timeout = config.DefaultWebhookTimeout
	}
	attempts := w.MaxAttempts
	if attempts <= 0 {
		attempts = config.DefaultWebhookAttempts
	}
	return delivery{
		job: job, event: ev.Type, id: uuid.NewString(),
		url: url, body: body, headers: headers, secret: w.Secret,
		timeout: timeout, attempts: attempts, client: client,
	}, nil
}

// DefaultPayload is the body sent when a webhook sets none. A task run's
// event (task_failed, task_succeeded) carries the run's fields too: slot,
// started_at, ended_at, exit_code, result, why, trigger and output (its
// last lines, secrets masked).
func DefaultPayload(ev config.Event) []byte {
	t := ""
	if !ev.Time.IsZero() {
		t = ev.Time.UTC().Format(time.RFC3339)
	}
	p := map[string]string{
		"type":            ev.Type,
		"job":             ev.Job,
		"node":            ev.Node,
		"leader":          ev.Leader,
		"previous_leader": ev.PreviousLeader,
		"token":           ev.TokenString(),
		"time":            t,
	}
	if ev.Run != nil {
		for k, v := range ev.Run.Fields() {
			p[k] = v
		}
	}
	b, _ := json.Marshal(p)
	return b
}

// Sign is the X-Electd-Signature-256 value for body.
func Sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// deliver makes up to d.attempts attempts and returns the delivery's result.
func (s *Sender) deliver(d delivery) string {
	log := s.log.With("job", d.job, "event", d.event, "url", redactURL(d.url), "delivery", d.id)
	for attempt := 1; ; attempt++ {
		status, retryAfter, err := s.attempt(d)
		switch {
		case err == nil && status/100 == 2:
			log.Debug("webhook delivered", "status", status, "attempt", attempt)
			return ResultOK
		case err == nil && !retryable(status):
			log.Error("webhook refused; not retrying", "status", status, "attempt", attempt)
			return ResultFailed
		case s.ctx.Err() != nil:
			log.Warn("webhook dropped: the agent stopped during an attempt", "attempt", attempt)
			return ResultDropped
		}
		if ae, ok := err.(*attemptError); ok && ae.final {
			log.Error("webhook failed; not retrying: the receiver's certificate is not trusted (see ca_file)", "attempt", attempt, "error", err)
			return ResultFailed
		}
		if attempt >= d.attempts {
			log.Error("webhook failed; giving up", "attempts", attempt, "status", status, "error", err)
			return ResultFailed
		}
		wait := s.backoff(attempt)
		if retryAfter > wait {
			wait = retryAfter
		}
		log.Warn("webhook attempt failed; retrying", "attempt", attempt, "status", status, "error", err, "retry_in", wait)
		select {
		case <-time.After(wait):
		case <-s.ctx.Done():
			log.Warn("webhook dropped: the agent stopped while retrying")
			return ResultDropped
		}
	}
}

// attempt sends one request. It returns the status, the Retry-After wait
// asked for (0 if none), or a network error.
func (s *Sender) attempt(d delivery) (int, time.Duration, error) {
	ctx, cancel := context.WithTimeout(s.ctx, d.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url, bytes.NewReader(d.body))
	if err != nil {
		return 0, 0, withoutURL(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "electd/"+s.opts.Version)
	// The block's headers may replace Content-Type or User-Agent, but not
	// the X-Electd-* headers a receiver relies on to verify and dedupe.
	for k, v := range d.headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("X-Electd-Event", d.event)
	req.Header.Set("X-Electd-Delivery", d.id)
	if d.secret != "" {
		req.Header.Set("X-Electd-Signature-256", Sign(d.secret, d.body))
	} else {
		req.Header.Del("X-Electd-Signature-256")
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return 0, 0, &attemptError{msg: withoutURL(err).Error(), final: untrusted(err)}
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
	return resp.StatusCode, retryAfter(resp), nil
}

// attemptError is a failed attempt with no HTTP answer. Its text has no
// URL: the log shows the URL's scheme and host beside it.
type attemptError struct {
	msg   string
	final bool // retrying cannot help
}

func (e *attemptError) Error() string { return e.msg }

// untrusted reports a certificate the client does not trust: another
// attempt would be refused the same way, so it is not retried.
func untrusted(err error) bool {
	var verr *tls.CertificateVerificationError
	var unknown x509.UnknownAuthorityError
	var invalid x509.CertificateInvalidError
	var host x509.HostnameError
	return errors.As(err, &verr) || errors.As(err, &unknown) || errors.As(err, &invalid) || errors.As(err, &host)
}

// retryable: 408, 429 and 5xx are worth another try; other statuses are final.
func retryable(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500
}

// backoff is the wait after the given failed attempt: BaseBackoff doubled per
// attempt, capped, with jitter in [50%, 100%] so that many agents retrying
// after one outage do not all come back at once.
func (s *Sender) backoff(attempt int) time.Duration {
	d := s.opts.BaseBackoff << (attempt - 1)
	if d > s.opts.MaxBackoff || d <= 0 {
		d = s.opts.MaxBackoff
	}
	return d/2 + rand.N(d/2+1)
}

// retryAfter reads Retry-After (seconds or an HTTP date) on 429 and 503,
// capped at a minute so a receiver cannot park a job's queue for long.
func retryAfter(resp *http.Response) time.Duration {
	if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable {
		return 0
	}
	v := resp.Header.Get("Retry-After")
	if v == "" {
		return 0
	}
	var d time.Duration
	if secs, err := strconv.Atoi(v); err == nil {
		d = time.Duration(secs) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = time.Until(t)
	}
	return min(max(d, 0), time.Minute)
}

// client returns the HTTP client for a CA file: TLS is always verified,
// against the system roots plus the file's certificates when one is given.
func (s *Sender) client(caFile string) (*http.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.clients[caFile]; ok {
		return c, nil
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("webhook: ca_file: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("webhook: ca_file %s holds no PEM certificate", caFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	// Redirects are not followed: a signed delivery goes where it was configured to.
	c := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	s.clients[caFile] = c
	return c, nil
}
