package nats

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/zclconf/go-cty/cty"

	"github.com/electd/electd/providers"
)

// Settings are the attributes of a `provider "nats"` block.
type Settings struct {
	// Servers are the URLs of the cluster's servers: nats://host:port,
	// tls://host:port (TLS) or host:port.
	Servers []string
	// Bucket is the JetStream key-value bucket of the leases, created when
	// missing (DefaultBucket in a configuration).
	Bucket string
	// Replicas is the bucket's replica count when electd creates it.
	Replicas int

	// At most one way to authenticate: a credentials file (JWT and NKey
	// seed), a user and password, or a token.
	CredentialsFile string
	User            string
	Password        string // secret
	Token           string // secret

	// TLS: on with tls:// servers, tls = true or any tls_* file.
	TLS         bool
	TLSCAFile   string // verify the servers against this CA (PEM), not the system's
	TLSCertFile string // client certificate (PEM), with TLSKeyFile
	TLSKeyFile  string

	ConnectTimeout time.Duration // DefaultConnectTimeout when zero
}

var _ providers.Settings = (*Settings)(nil)

// Defaults of a block that does not set them.
const (
	DefaultBucket         = "electd"
	DefaultConnectTimeout = 5 * time.Second
)

// maxField bounds keys and holders: names, which travel in every request.
// A key becomes part of a NATS subject, escaped (up to three bytes per
// byte), well within the server's 4 KiB control line.
const maxField = 255

// maxBucket bounds a bucket name: its stream is KV_<bucket>, and JetStream
// keeps each stream in a directory of that name.
const maxBucket = 200

var limits = providers.Limits{MaxKey: maxField, MaxHolder: maxField, MinTTL: time.Millisecond}

// bucketRe is what JetStream accepts as a key-value bucket name.
var bucketRe = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// Type is the nats provider type of the configuration language.
func Type() providers.Type {
	str := func(name string) hcldec.Spec { return providers.StringAttr(name, false) }
	return providers.Type{
		Spec: hcldec.ObjectSpec{
			"servers":          providers.ListAttr("servers", true),
			"bucket":           str("bucket"),
			"replicas":         &hcldec.AttrSpec{Name: "replicas", Type: cty.Number},
			"credentials_file": str("credentials_file"),
			"user":             str("user"),
			"password":         str("password"),
			"token":            str("token"),
			"tls":              &hcldec.AttrSpec{Name: "tls", Type: cty.Bool},
			"tls_ca_file":      str("tls_ca_file"),
			"tls_cert_file":    str("tls_cert_file"),
			"tls_key_file":     str("tls_key_file"),
			"connect_timeout":  str("connect_timeout"),
		},
		Decode: func(b *providers.Block) providers.Settings {
			s := &Settings{
				Servers:         b.List("servers"),
				Bucket:          b.String("bucket", DefaultBucket),
				Replicas:        b.Int("replicas", 1, 1, 5),
				CredentialsFile: b.String("credentials_file", ""),
				User:            b.String("user", ""),
				Password:        b.String("password", ""),
				Token:           b.String("token", ""),
				TLS:             b.Bool("tls", false),
				TLSCAFile:       b.String("tls_ca_file", ""),
				TLSCertFile:     b.String("tls_cert_file", ""),
				TLSKeyFile:      b.String("tls_key_file", ""),
				ConnectTimeout:  b.Duration("connect_timeout", DefaultConnectTimeout),
			}
			if s.Validate() == nil { // a list with errors gets those only
				if distinctCount(s.Servers) == 2 {
					b.Warnf("servers", "Two servers: no fault tolerance", twoServers)
				}
				if distinctCount(s.Servers) >= 2 && s.Replicas == 1 && (!b.Has("replicas") || b.Known("replicas")) {
					b.Warnf("replicas", "One replica on a cluster", oneReplica)
				}
			}
			return s
		},
		URL: urlForm(),
	}
}

// Limits bound keys and holders.
func (s *Settings) Limits() providers.Limits { return limits }

// Secrets are the password and the token, and a password written inside a
// server URL (which Validate refuses, but a value that is refused must not
// be shown either).
func (s *Settings) Secrets() []string {
	out := []string{s.Password, s.Token}
	for _, srv := range s.Servers {
		if strings.Contains(srv, "@") {
			out = append(out, providers.URLSecrets(srv)...)
		}
	}
	return out
}

// Open returns the store; see New.
func (s *Settings) Open(ctx context.Context, log hclog.Logger) (providers.Provider, error) {
	return New(ctx, *s, log)
}

// Validate checks the servers, the bucket name and that the ways to
// authenticate are not mixed. The files are read by New.
func (s *Settings) Validate() error {
	var errs []*providers.FieldError
	if len(s.Servers) == 0 {
		errs = append(errs, providers.Fieldf("servers", "Empty servers",
			"Give at least one NATS server URL, such as \"nats://127.0.0.1:4222\"."))
	}
	// One diagnostic for the list, naming each bad server by its place: a
	// value read with env() may be a secret pasted into the wrong attribute.
	var bad, dup []string
	seen := map[string]bool{}
	for i, srv := range s.Servers {
		if msg := checkServer(srv); msg != "" {
			bad = append(bad, fmt.Sprintf("Server %d of the list %s.", i+1, msg))
		} else if seen[srv] {
			dup = append(dup, fmt.Sprintf("Server %d of the list is given twice.", i+1))
		}
		seen[srv] = true
	}
	switch {
	case len(bad) > 0:
		errs = append(errs, providers.Fieldf("servers", "Invalid server", "%s", strings.Join(append(bad, dup...), " ")))
	case len(dup) > 0:
		errs = append(errs, providers.Fieldf("servers", "Duplicate server", "%s", strings.Join(dup, " ")))
	}
	switch {
	case s.Bucket == "":
		errs = append(errs, providers.Fieldf("bucket", "Invalid bucket", "The bucket name is empty: leave bucket out for %q, or name one.", DefaultBucket))
	case !bucketRe.MatchString(s.Bucket):
		errs = append(errs, providers.Fieldf("bucket", "Invalid bucket",
			"A JetStream key-value bucket name holds only letters, digits, \"-\" and \"_\" (no dots or spaces), such as \"electd\"."))
	case len(s.Bucket) > maxBucket:
		errs = append(errs, providers.Fieldf("bucket", "Invalid bucket", "The bucket name is %d bytes, more than %d.", len(s.Bucket), maxBucket))
	}
	if s.Replicas < 0 || s.Replicas > 5 {
		errs = append(errs, providers.Fieldf("replicas", "Invalid replicas", "The replicas must be a whole number from 1 to 5 (JetStream's limit)."))
	}
	var ways []string
	if s.CredentialsFile != "" {
		ways = append(ways, "credentials_file")
	}
	if s.User != "" || s.Password != "" {
		ways = append(ways, "user and password")
	}
	if s.Token != "" {
		ways = append(ways, "token")
	}
	if len(ways) > 1 {
		attr := "token"
		if s.CredentialsFile != "" {
			attr = "credentials_file"
		}
		errs = append(errs, providers.Fieldf(attr, "Conflicting credentials",
			"Give one way to authenticate, not %s.", strings.Join(ways, " and ")))
	}
	if s.User != "" && s.Password == "" {
		errs = append(errs, providers.Fieldf("user", "Missing password", "A user is sent with its password; set password too."))
	}
	if s.User == "" && s.Password != "" {
		errs = append(errs, providers.Fieldf("password", "Password without user", "A password is sent with a user; set user too."))
	}
	if (s.TLSCertFile == "") != (s.TLSKeyFile == "") {
		attr := "tls_cert_file" // the one written
		if s.TLSCertFile == "" {
			attr = "tls_key_file"
		}
		errs = append(errs, providers.Fieldf(attr, "Incomplete client certificate",
			"A client certificate needs both tls_cert_file and tls_key_file."))
	}
	if s.ConnectTimeout < 0 {
		errs = append(errs, providers.Fieldf("connect_timeout", "Invalid duration", "The connect_timeout must be positive."))
	}
	return providers.Invalid(errs...)
}

// checkServer says what is wrong with a server URL, or "".
func checkServer(srv string) string {
	hostport := srv
	if strings.Contains(srv, "://") {
		u, err := url.Parse(srv)
		if err != nil {
			return "is not a URL: write nats://host:port, such as \"nats://10.0.0.1:4222\""
		}
		if u.Scheme != "nats" && u.Scheme != "tls" {
			return "has a scheme other than nats:// or tls://"
		}
		if u.User != nil {
			return "holds credentials: give them as user and password, token or credentials_file, which are kept secret"
		}
		if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
			return "has a path or query: write nats://host:port"
		}
		hostport = u.Host
	} else if strings.Contains(srv, "@") {
		return "holds credentials: give them as user and password, token or credentials_file, which are kept secret"
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil || host == "" {
		return "is not host:port: write nats://host:port, such as \"nats://10.0.0.1:4222\""
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "has no valid port (1 to 65535)"
	}
	return ""
}

// useTLS reports whether the connection is made over TLS.
func (s *Settings) useTLS() bool {
	if s.TLS || s.TLSCAFile != "" || s.TLSCertFile != "" {
		return true
	}
	for _, srv := range s.Servers {
		if strings.HasPrefix(srv, "tls://") {
			return true
		}
	}
	return false
}
