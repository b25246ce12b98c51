package mongodb

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2/hcldec"
	"go.mongodb.org/mongo-driver/x/mongo/driver/connstring"

	"github.com/electd/electd/providers"
)

// Settings are the attributes of a `provider "mongodb"` block.
type Settings struct {
	URI          string // secret: mongodb:// or mongodb+srv://
	Database     string // default "electd"
	Collection   string // default "leases"
	WriteConcern string // default "majority"
}

var _ providers.Settings = (*Settings)(nil)

// maxField bounds keys and holders, well under MongoDB's index key limit.
const maxField = 1024

var limits = providers.Limits{MaxKey: maxField, MaxHolder: maxField, MinTTL: time.Millisecond}

// Type is the mongodb provider type of the configuration language.
func Type() providers.Type {
	str := providers.StringAttr
	return providers.Type{
		Spec: hcldec.ObjectSpec{
			"uri":           str("uri", true),
			"database":      str("database", false),
			"collection":    str("collection", false),
			"write_concern": str("write_concern", false),
		},
		Decode: func(b *providers.Block) providers.Settings {
			s := &Settings{
				URI:          b.String("uri", ""),
				Database:     b.String("database", "electd"),
				Collection:   b.String("collection", "leases"),
				WriteConcern: b.String("write_concern", "majority"),
			}
			return s
		},
		URL: urlForm(),
	}
}

// Limits bound keys and holders.
func (s *Settings) Limits() providers.Limits { return limits }

// Secrets are the URI, the password inside it (as written, percent-encoded,
// and decoded) and the password of a client key file given in its options.
// The URI is cut by hand: parsing a mongodb+srv URI looks its name up in
// DNS, and net/url refuses the host lists of replica sets.
func (s *Settings) Secrets() []string {
	out := []string{s.URI}
	rest := s.URI
	if _, after, ok := strings.Cut(rest, "://"); ok {
		rest = after
	}
	auth, query := rest, ""
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		auth = rest[:i]
		_, query, _ = strings.Cut(rest[i:], "?")
	}
	if i := strings.LastIndex(auth, "@"); i >= 0 {
		if _, pw, ok := strings.Cut(auth[:i], ":"); ok {
			out = append(out, pw)
			if dec, err := url.PathUnescape(pw); err == nil {
				out = append(out, dec)
			}
		}
	}
	if q, err := url.ParseQuery(query); err == nil {
		for k, vs := range q {
			if strings.EqualFold(k, "tlsCertificateKeyFilePassword") || strings.EqualFold(k, "sslClientCertificateKeyPassword") {
				out = append(out, vs...)
			}
		}
	}
	return out
}

// Open returns the store; see New.
func (s *Settings) Open(ctx context.Context, log hclog.Logger) (providers.Provider, error) {
	return New(ctx, *s, log)
}

// Validate parses the URI (without resolving a mongodb+srv name), the names
// and the write concern.
func (s *Settings) Validate() error {
	var errs []*providers.FieldError
	if err := checkURI(s.URI); err != "" {
		errs = append(errs, providers.Fieldf("uri", "Invalid uri",
			"The uri %s. Write a MongoDB connection string such as \"mongodb://electd:PASSWORD@db1.example.com:27017,db2.example.com:27017/?replicaSet=rs0\".", err))
	}
	// MongoDB's naming rules: database names hold no /\. "$*<>:|? and are
	// under 64 bytes; collection names hold no $ and do not start with system.
	if s.Database != "" && (len(s.Database) >= 64 || strings.ContainsAny(s.Database, "/\\. \"$*<>:|?\x00")) {
		errs = append(errs, providers.Fieldf("database", "Invalid database",
			"A MongoDB database name is 1 to 63 bytes without spaces or any of / \\ . \" $ * < > : | ?."))
	}
	if s.Collection != "" && (strings.ContainsAny(s.Collection, "$\x00") || strings.HasPrefix(s.Collection, "system.") || len(s.Collection) > 120) {
		errs = append(errs, providers.Fieldf("collection", "Invalid collection",
			"A MongoDB collection name is 1 to 120 bytes without $, and does not start with \"system.\"."))
	}
	for _, f := range []struct{ attr, v string }{{"database", s.Database}, {"collection", s.Collection}} {
		if f.v == "" {
			errs = append(errs, providers.Fieldf(f.attr, "Empty "+f.attr, "The %s must not be empty: leases are kept in it.", f.attr))
		}
	}
	if n, err := strconv.Atoi(s.WriteConcern); err == nil && n < 1 || s.WriteConcern == "" {
		errs = append(errs, providers.Fieldf("write_concern", "Invalid write_concern",
			"The write_concern must be \"majority\", a number of members of at least 1, or the name of a custom write concern: unacknowledged writes cannot decide who leads."))
	}
	return providers.Invalid(errs...)
}

// checkURI says what is wrong with a connection string, or "". It never
// quotes the URI: it holds the password.
func checkURI(uri string) string {
	if uri == "" {
		return "is empty"
	}
	if strings.HasPrefix(uri, connstring.SchemeMongoDBSRV+"://") {
		// Parsing a +srv URI looks its name up in DNS; check its shape only.
		u, err := url.Parse(uri)
		if err != nil || u.Host == "" || strings.Contains(u.Host, ",") || strings.Contains(u.Host, ":") {
			return "is not a valid mongodb+srv URI (one host name, no port)"
		}
		return ""
	}
	if _, err := connstring.ParseAndValidate(uri); err != nil {
		return "cannot be parsed: " + redact(err, uri)
	}
	return ""
}
