package redis

import (
	"context"
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/zclconf/go-cty/cty"

	"github.com/electd/electd/providers"
)

// Settings are the attributes of a `provider "redis"` block.
type Settings struct {
	Addresses []string // host:port; 1 = single node, 3+ = Redlock quorum
	Username  string
	Password  string // secret
	DB        int
	TLS       bool
	Prefix    string // key prefix; DefaultPrefix in a configuration
}

var _ providers.Settings = (*Settings)(nil)

// DefaultPrefix starts every key electd writes when the block sets none.
const DefaultPrefix = "electd:"

// maxField bounds keys and holders; Redis would take more, but these are
// names, and a bound keeps a typo'd multi-megabyte value out.
const maxField = 1024

var limits = providers.Limits{MaxKey: maxField, MaxHolder: maxField, MinTTL: time.Millisecond}

// Type is the redis provider type of the configuration language.
func Type() providers.Type {
	return providers.Type{
		Spec: hcldec.ObjectSpec{
			"addresses": providers.ListAttr("addresses", true),
			"username":  providers.StringAttr("username", false),
			"password":  providers.StringAttr("password", false),
			"db":        &hcldec.AttrSpec{Name: "db", Type: cty.Number},
			"tls":       &hcldec.AttrSpec{Name: "tls", Type: cty.Bool},
			"prefix":    providers.StringAttr("prefix", false),
		},
		Decode: func(b *providers.Block) providers.Settings {
			s := &Settings{
				Addresses: b.List("addresses"),
				Username:  b.String("username", ""),
				Password:  b.String("password", ""),
				DB:        b.Int("db", 0, 0, 1<<20),
				TLS:       b.Bool("tls", false),
				Prefix:    b.String("prefix", DefaultPrefix),
			}
			if len(s.Addresses) >= 3 {
				b.Warnf("addresses", "Redlock is not a safe fence",
					"With several Redis nodes electd uses Redlock. Redlock's mutual exclusion depends on bounded clock drift, network delays and process pauses: after a clock jump on a Redis server or a long GC or VM pause two nodes can both believe they lead (Martin Kleppmann, \"How to do distributed locking\"). "+
						"The fencing token still grows from term to term, but only while every Redis server keeps its data (appendonly yes, appendfsync always), and it stops a deposed leader only where the resource it writes checks the token. Work that must never run twice should do that check, or use a store with a single serialising authority (etcd, SQL).")
			}
			return s
		},
		URL: urlForm(),
	}
}

// Limits bound keys and holders.
func (s *Settings) Limits() providers.Limits { return limits }

// Secrets are the password.
func (s *Settings) Secrets() []string { return []string{s.Password} }

// Open returns the store; see New.
func (s *Settings) Open(ctx context.Context, log hclog.Logger) (providers.Provider, error) {
	return New(ctx, *s, log)
}

// Validate checks the number of servers and each address.
func (s *Settings) Validate() error {
	var errs []*providers.FieldError
	switch n := len(s.Addresses); {
	case n == 0:
		errs = append(errs, providers.Fieldf("addresses", "Empty addresses",
			"Give one Redis address for a single node, or at least three for a Redlock quorum."))
	case n == 2:
		// A majority of two is both: losing either server stops every
		// election, which is worse than one server.
		errs = append(errs, providers.Fieldf("addresses", "Invalid number of addresses",
			"Redlock needs a quorum, a majority of independent Redis nodes: with 2 nodes the majority is both, so losing either one stops every election. Give 1 address for a single node, or 3 or more for Redlock."))
	}
	seen := map[string]bool{}
	// Details name an address by its place: a value read with env() may be
	// a secret pasted into the wrong attribute.
	for i, a := range s.Addresses {
		if err := checkAddress(a); err != "" {
			errs = append(errs, providers.Fieldf("addresses", "Invalid address", "Address %d of the list %s: write host:port, such as \"10.0.0.1:6379\".", i+1, err))
			continue
		}
		if seen[a] {
			errs = append(errs, providers.Fieldf("addresses", "Duplicate address", "Address %d of the list is given twice: Redlock needs independent servers.", i+1))
		}
		seen[a] = true
	}
	if s.DB < 0 {
		errs = append(errs, providers.Fieldf("db", "Invalid db", "The db must be a whole, non-negative database number."))
	}
	return providers.Invalid(errs...)
}

// checkAddress says what is wrong with a host:port, or "".
func checkAddress(a string) string {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return "is not host:port"
	}
	if host == "" {
		return "has no host"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "has no valid port (1 to 65535)"
	}
	return ""
}
