package etcd

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2/hcldec"

	"github.com/electd/electd/providers"
)

// Settings are the attributes of a `provider "etcd"` block.
type Settings struct {
	Endpoints   []string // host:port or http(s)://host:port
	Prefix      string   // DefaultPrefix when empty
	Username    string
	Password    string // secret
	DialTimeout time.Duration
}

var _ providers.Settings = (*Settings)(nil)

// DefaultDialTimeout bounds a connection attempt when the block sets none.
const DefaultDialTimeout = 5 * time.Second

// maxField bounds keys and holders; etcd would take more, but they are
// names, and they travel in every request.
const maxField = 255

// A key is one segment of the prefix's key space: no "/".
var limits = providers.Limits{MaxKey: maxField, MaxHolder: maxField, MinTTL: time.Millisecond,
	Key: func(key string) error {
		if strings.Contains(key, "/") {
			return errors.New("key must not contain \"/\"")
		}
		return nil
	}}

// Type is the etcd provider type of the configuration language.
func Type() providers.Type {
	str := func(name string) hcldec.Spec { return providers.StringAttr(name, false) }
	return providers.Type{
		Spec: hcldec.ObjectSpec{
			"endpoints":    providers.ListAttr("endpoints", true),
			"prefix":       str("prefix"),
			"username":     str("username"),
			"password":     str("password"),
			"dial_timeout": str("dial_timeout"),
		},
		Decode: func(b *providers.Block) providers.Settings {
			s := &Settings{
				Endpoints:   b.List("endpoints"),
				Prefix:      b.String("prefix", DefaultPrefix),
				Username:    b.String("username", ""),
				Password:    b.String("password", ""),
				DialTimeout: b.Duration("dial_timeout", DefaultDialTimeout),
			}
			if distinctCount(s.Endpoints) == 2 {
				b.Warnf("endpoints", "Two members: no fault tolerance", twoMembers)
			}
			return s
		},
		URL: urlForm(),
	}
}

// Limits bound keys and holders. A cluster (more than one endpoint) takes
// up to 2 s to elect a new leader with etcd's default --election-timeout
// of 1 s (randomised up to twice that).
func (s *Settings) Limits() providers.Limits {
	l := limits
	if distinctCount(s.Endpoints) > 1 {
		l.Failover = 2 * time.Second
		l.FailoverWhy = "etcd elects a new leader up to 2 s after losing one (the default --election-timeout of 1 s, randomised up to twice that)"
	}
	return l
}

// Secrets are the password.
func (s *Settings) Secrets() []string { return []string{s.Password} }

// Open returns the store; see New.
func (s *Settings) Open(ctx context.Context, log hclog.Logger) (providers.Provider, error) {
	return New(ctx, *s, log)
}

// Validate checks the endpoints.
func (s *Settings) Validate() error {
	var errs []*providers.FieldError
	if len(s.Endpoints) == 0 {
		errs = append(errs, providers.Fieldf("endpoints", "Empty endpoints", "Give at least one etcd endpoint, such as \"127.0.0.1:2379\"."))
	}
	for i, ep := range s.Endpoints {
		if msg := checkEndpoint(ep); msg != "" {
			errs = append(errs, providers.Fieldf("endpoints", "Invalid endpoint",
				"Endpoint %d of the list %s: write host:port or http(s)://host:port, such as \"127.0.0.1:2379\".", i+1, msg))
		}
	}
	if s.Username == "" && s.Password != "" {
		errs = append(errs, providers.Fieldf("password", "Password without username", "A password is sent with a username; set username too."))
	}
	return providers.Invalid(errs...)
}

// checkEndpoint says what is wrong with an endpoint, or "".
func checkEndpoint(ep string) string {
	hostport := ep
	if strings.Contains(ep, "://") {
		u, err := url.Parse(ep)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
			return "is not an http(s) URL"
		}
		hostport = u.Host
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil || host == "" {
		return "is not host:port"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "has no valid port (1 to 65535)"
	}
	return ""
}
