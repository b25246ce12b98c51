package sql

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/jackc/pgx/v5"

	"github.com/electd/electd/providers"
)

// Settings are the attributes of a `provider "sql"` block.
type Settings struct {
	Driver string // postgres | mysql | sqlite
	DSN    string // secret: a postgres URL or key=value string, a mysql DSN, a sqlite path or file: URI
	Table  string // a plain identifier; default DefaultTable

	readOnly bool // OpenReadOnly: observe only, create nothing
}

var (
	_ providers.Settings       = (*Settings)(nil)
	_ providers.ReadOnlyOpener = (*Settings)(nil)
)

// maxField bounds keys and holders: they are varchar(255) columns.
const maxField = 255

var limits = providers.Limits{MaxKey: maxField, MaxHolder: maxField, MinTTL: time.Millisecond}

// Type is the sql provider type of the configuration language.
func Type() providers.Type {
	str := providers.StringAttr
	return providers.Type{
		Spec: hcldec.ObjectSpec{
			"driver": str("driver", true),
			"dsn":    str("dsn", true),
			"table":  str("table", false),
		},
		Decode: func(b *providers.Block) providers.Settings {
			s := &Settings{
				Driver: b.Enum("driver", "sqlite", "postgres", "mysql", "sqlite"),
				DSN:    b.String("dsn", ""),
				Table:  b.String("table", DefaultTable),
			}
			if w := clusterWarning(s.Driver, s.DSN); w != "" {
				b.Warnf("dsn", "Several hosts without target_session_attrs", "%s", w)
			}
			return s
		},
		URL: urlForm(),
	}
}

// Limits are the bounds of the lease table's columns.
func (s *Settings) Limits() providers.Limits { return limits }

// Secrets are the DSN and the password inside it, as the driver parses it:
// a DSN quoted by anything else (re-encoded, or cut to its parts) would
// still carry the password.
func (s *Settings) Secrets() []string {
	out := []string{s.DSN}
	switch s.Driver {
	case "postgres":
		if c, err := pgx.ParseConfig(s.DSN); err == nil {
			out = append(out, c.Password)
		}
	case "mysql":
		if c, err := mysql.ParseDSN(s.DSN); err == nil {
			out = append(out, c.Passwd)
		}
	}
	return out
}

// Open returns the store; see New.
func (s *Settings) Open(ctx context.Context, log hclog.Logger) (providers.Provider, error) {
	return New(ctx, *s, log)
}

// OpenReadOnly returns a client that only observes: it never creates the
// table, and a SQLite database is opened read-only (mode=ro), so a path
// with no file is an error rather than a new empty database.
func (s *Settings) OpenReadOnly(ctx context.Context, log hclog.Logger) (providers.Provider, error) {
	ro := *s
	ro.readOnly = true
	if s.Driver == "sqlite" {
		if path := sqlitePath(s.DSN); path != "" {
			if _, err := os.Stat(path); err != nil {
				return nil, fmt.Errorf("sql: no SQLite database at %s (no agent has used this provider there): %w", path, err)
			}
			ro.DSN = (&url.URL{Scheme: "file", Path: path, RawQuery: "mode=ro"}).String()
		}
	}
	return New(ctx, ro, log)
}

// Validate parses the DSN for its driver and checks the table name. It
// never repeats the DSN: it may hold a password.
func (s *Settings) Validate() error {
	var errs []*providers.FieldError
	table := s.Table
	if table == "" {
		table = DefaultTable
	}
	if !identRE.MatchString(table) {
		errs = append(errs, providers.Fieldf("table", "Invalid table name",
			"The table must be a plain SQL identifier: a letter or underscore, then up to 62 letters, digits or underscores. It is written into SQL statements, so nothing else is accepted."))
	}
	switch s.Driver {
	case "sqlite":
		if s.DSN == "" {
			errs = append(errs, providers.Fieldf("dsn", "Empty dsn", "The dsn of a sqlite provider is the path of the database file, such as \"/var/lib/electd/leases.db\"."))
		}
	case "postgres":
		if len(table) > 63-len("electd_") {
			errs = append(errs, providers.Fieldf("table", "Table name too long for postgres",
				"On postgres the table name is at most %d bytes: electd notifies waiting candidates on the channel electd_<table>, and PostgreSQL identifiers hold 63 bytes.", 63-len("electd_")))
		}
		if _, err := pgx.ParseConfig(s.DSN); err != nil || s.DSN == "" {
			// pgx's message repeats the connection string; keep only the cause.
			cause := "it is empty"
			if err != nil {
				cause = "invalid connection string"
				if u := errors.Unwrap(err); u != nil {
					cause = u.Error()
				}
			}
			errs = append(errs, providers.Fieldf("dsn", "Invalid dsn",
				"The dsn cannot be parsed as a PostgreSQL connection string (%s). Write a URL such as \"postgres://electd@db.example.com:5432/electd?sslmode=verify-full\" or key=value pairs such as \"host=db.example.com user=electd dbname=electd\".", cause))
		}
	case "mysql":
		if _, err := mysql.ParseDSN(s.DSN); err != nil || s.DSN == "" {
			errs = append(errs, providers.Fieldf("dsn", "Invalid dsn",
				"The dsn cannot be parsed as a MySQL DSN. Write it as go-sql-driver/mysql does, such as \"electd:PASSWORD@tcp(db.example.com:3306)/electd\"."))
		}
	default:
		errs = append(errs, providers.Fieldf("driver", "Invalid driver", "The driver must be \"postgres\", \"mysql\" or \"sqlite\"."))
	}
	return providers.Invalid(errs...)
}
