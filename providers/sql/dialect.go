package sql

import (
	"context"
	dbsql "database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"modernc.org/sqlite"

	"github.com/electd/electd/internal/rlimit"
)

// DefaultTable is the table used when the settings leave Table empty.
const DefaultTable = "electd_leases"

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// queries holds the statements of one driver and table, built once by New.
// Placeholders are "?" everywhere and rebound to $n for postgres.
type queries struct {
	create string
	extra  []string // run after create: SQLite's release log
	probe  string
	// upsert acquires in one statement (INSERT ... ON CONFLICT DO UPDATE
	// WHERE free-or-expired-or-mine RETURNING token, expires_at, value);
	// args: key, holder, ttl. Empty for mysql, which uses update+insert.
	upsert string
	// mysql acquire path: conditional update (args holder, ttl, key, holder),
	// then insertFree (args key) when the row is missing.
	update     string
	insertFree string
	selectRow  string // args key → holder, token, expires_at, value, remaining (µs, ≤ 0 when expired)
	renew      string // args ttl, value, key, holder, token (+RETURNING expires_at unless mysql)
	selectExp  string // mysql: args key → expires_at
	release    string // args value, key, holder, token (postgres: + channel first)
}

type dialect struct {
	driver string
	table  string // quoted for the driver
	db     *dbsql.DB
	pg     *pgx.ConnConfig // postgres only, for the LISTEN connection
	q      queries
	// ttlArg converts a ttl into the argument the "now + ttl" expression takes.
	ttlArg func(time.Duration) any
	// retryable reports errors after which the whole operation may be retried
	// (MySQL deadlocks on concurrent first inserts).
	retryable func(error) bool
	// remaining is the database's "how long until expires_at" in
	// microseconds, by its own clock (never compared with the agent's).
	remaining string
}

func ms(d time.Duration) any { return d.Milliseconds() }

func newDialect(s Settings) (*dialect, error) {
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("sql: %w", err)
	}
	table := s.Table
	if table == "" {
		table = DefaultTable
	}
	d := &dialect{driver: s.Driver, ttlArg: ms, retryable: func(error) bool { return false }}
	switch s.Driver {
	case "sqlite":
		d.db = dbsql.OpenDB(sqliteConnector{dsn: sqliteDSN(s.DSN, s.readOnly)})
		d.table = `"` + table + `"`
		now := `CAST(unixepoch('subsec') * 1000 AS INTEGER)`
		d.remaining = `(expires_at - ` + now + `) * 1000`
		d.q = standardQueries(`"`+table+`"`, now, d.remaining, now+` + ?`, `
			"key"      TEXT    NOT NULL PRIMARY KEY,
			holder     TEXT    NOT NULL DEFAULT '',
			token      INTEGER NOT NULL DEFAULT 0,
			expires_at INTEGER NOT NULL, -- unix milliseconds, host clock
			value      TEXT    NOT NULL DEFAULT ''`, "")
		d.q.extra = sqliteReleaseLog(table)
		d.q.upsert = strings.Replace(d.q.upsert, "GREATEST(", "MAX(", 1) // SQLite's many-argument max
	case "postgres":
		cfg, err := pgx.ParseConfig(s.DSN)
		if err != nil {
			return nil, errors.New("sql: postgres dsn cannot be parsed") // Validate said why
		}
		cfg.DialFunc = live(cfg.DialFunc) // live.go
		d.pg = cfg
		d.table = pgx.Identifier{table}.Sanitize()
		if r := newHostRotation(cfg); r != nil { // hosts.go
			d.db = dbsql.OpenDB(r.connector(*cfg.Copy()))
		} else {
			d.db = stdlib.OpenDB(*cfg.Copy())
		}
		d.ttlArg = func(t time.Duration) any { return float64(t.Milliseconds()) }
		d.remaining = `(EXTRACT(EPOCH FROM (expires_at - now())) * 1000000)::bigint`
		d.retryable = func(err error) bool {
			var pe *pgconn.PgError
			return errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001") // deadlock, serialization
		}
		q := standardQueries(pgx.Identifier{table}.Sanitize(), `now()`, d.remaining, `(now() + ?::float8 * interval '1 millisecond')`, `
			"key"      varchar(255) NOT NULL PRIMARY KEY,
			holder     varchar(255) NOT NULL DEFAULT '',
			token      bigint       NOT NULL DEFAULT 0,
			expires_at timestamptz(6) NOT NULL,
			value      varchar(256) NOT NULL DEFAULT ''`, "")
		// Acquire and Release notify in the same statement; the notification
		// is delivered only if the statement commits.
		q.upsert = `WITH a AS (` + q.upsert + `, "key") SELECT token, expires_at, value, pg_notify(?, "key")::text FROM a`
		q.release = `WITH r AS (` + strings.TrimSuffix(q.release, ";") + ` RETURNING "key") SELECT pg_notify(?, "key")::text FROM r`
		rebindAll(&q)
		d.q = q
	case "mysql":
		cfg, err := mysql.ParseDSN(s.DSN)
		if err != nil {
			return nil, fmt.Errorf("sql: mysql dsn cannot be parsed: %w", err)
		}
		cfg.ParseTime = true
		cfg.Loc = time.UTC
		// Rows affected = rows matched, so a Renew that changes nothing
		// (same microsecond, same value) is not mistaken for a lost lease.
		cfg.ClientFoundRows = true
		if cfg.DialFunc == nil {
			nd := &net.Dialer{Timeout: cfg.Timeout}
			cfg.DialFunc = nd.DialContext
		}
		cfg.DialFunc = live(cfg.DialFunc) // live.go
		conn, err := mysql.NewConnector(cfg)
		if err != nil {
			return nil, fmt.Errorf("sql: mysql dsn: %w", err)
		}
		d.db = dbsql.OpenDB(conn)
		d.ttlArg = func(t time.Duration) any { return t.Milliseconds() * 1000 }
		d.retryable = func(err error) bool {
			var me *mysql.MySQLError
			return errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205) // deadlock, lock wait timeout
		}
		t := "`" + table + "`"
		d.table = t
		now := `UTC_TIMESTAMP(6)`
		plus := `DATE_ADD(UTC_TIMESTAMP(6), INTERVAL ? MICROSECOND)`
		d.remaining = `TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at)`
		// VARBINARY: byte-exact keys and holders (the default collations
		// ignore case and trailing spaces).
		d.q = standardQueries(t, now, d.remaining, plus, "\n\t\t\t`key`      VARBINARY(255) NOT NULL PRIMARY KEY,\n"+
			"\t\t\t`holder`     VARBINARY(255) NOT NULL DEFAULT '',\n"+
			"\t\t\t`token`      BIGINT         NOT NULL DEFAULT 0,\n"+
			"\t\t\t`expires_at` DATETIME(6)    NOT NULL, -- UTC\n"+
			"\t\t\t`value`      VARBINARY(256) NOT NULL DEFAULT ''", " ENGINE=InnoDB")
		d.q.upsert = ""
		d.q.renew = strings.TrimSuffix(d.q.renew, " RETURNING expires_at")
		d.q.update = `UPDATE ` + t + ` SET holder = ?, token = GREATEST(token + 1, ?), expires_at = ` + plus +
			" WHERE `key` = ? AND (holder = '' OR expires_at <= " + now + ` OR holder = ?)`
		d.q.insertFree = `INSERT INTO ` + t + " (`key`, holder, token, expires_at, value) VALUES (?, '', 0, " + now + ", '')" +
			" ON DUPLICATE KEY UPDATE `key` = `key`"
		d.q.selectExp = `SELECT expires_at FROM ` + t + " WHERE `key` = ?"
		d.q = backquote(d.q)
	default:
		return nil, fmt.Errorf("sql: unknown driver %q", s.Driver) // Validate refused it
	}
	if s.Driver != "sqlite" {
		// database/sql keeps 2 idle connections by default: the agent's
		// batches, renewals, releases and reads run side by side, and
		// every one beyond two opened a connection and closed it after
		// use. A server connection is a process on PostgreSQL, so five
		// agents of 100 jobs asked it for new backends faster than it
		// forked them, and batches failed with "failed to connect ...
		// timeout" (TestBalanceAcrossAgents, on a VM where a fork costs
		// 5 ms). The connections in use are kept, and let go after a
		// minute unused.
		d.db.SetMaxIdleConns(maxIdleConns)
		d.db.SetConnMaxIdleTime(time.Minute)
	}
	if s.Driver == "postgres" {
		// And no more than that at once on PostgreSQL: the requests of a
		// burst (an agent's first acquires, a hundred jobs moving) wait a
		// few milliseconds for a connection rather than each asking the
		// server for a process; five agents starting beside three others
		// did, and the server, forking, answered none within their
		// deadlines. (MySQL's connections are threads, and its named-lock
		// bells hold connections of this pool while they wait.)
		d.db.SetMaxOpenConns(maxIdleConns)
	}
	return d, nil
}

// maxIdleConns is how many open connections a server store's pool keeps
// between requests, and on PostgreSQL the most it opens.
const maxIdleConns = 16

// standardQueries builds the statements shared by postgres and sqlite (and
// the parts mysql keeps): t is the quoted table, now the database's clock,
// remaining the microseconds until expires_at by that clock and plus
// "now + ?" with the ttl as its one argument.
func standardQueries(t, now, remaining, plus, columns, suffix string) queries {
	return queries{
		create: `CREATE TABLE IF NOT EXISTS ` + t + ` (` + columns + "\n\t\t)" + suffix,
		probe:  `SELECT 1 FROM ` + t + ` WHERE 1 = 0`,
		// The inserted token is the floor + 1 (1 without a floor): the
		// new term's token is the larger of it and the counter + 1.
		upsert: `INSERT INTO ` + t + ` AS l ("key", holder, token, expires_at, value) VALUES (?, ?, ?, ` + plus + `, '')
			ON CONFLICT ("key") DO UPDATE SET holder = excluded.holder, token = GREATEST(l.token + 1, excluded.token), expires_at = excluded.expires_at
			WHERE l.holder = '' OR l.expires_at <= ` + now + ` OR l.holder = excluded.holder
			RETURNING token, expires_at, value`,
		selectRow: `SELECT holder, token, expires_at, value, ` + remaining + ` FROM ` + t + ` WHERE "key" = ?`,
		renew:     `UPDATE ` + t + ` SET expires_at = ` + plus + `, value = ? WHERE "key" = ? AND holder = ? AND token = ? RETURNING expires_at`,
		release:   `UPDATE ` + t + ` SET holder = '', expires_at = ` + now + `, value = ? WHERE "key" = ? AND holder = ? AND token = ?`,
	}
}

// backquote turns the "key" column quoting of the shared statements into
// MySQL's backquotes.
func backquote(q queries) queries {
	r := strings.NewReplacer(`"key"`, "`key`")
	q.selectRow = r.Replace(q.selectRow)
	q.renew = r.Replace(q.renew)
	q.release = r.Replace(q.release)
	return q
}

func rebindAll(q *queries) {
	for _, s := range []*string{&q.upsert, &q.selectRow, &q.renew, &q.release} {
		*s = rebind(*s)
	}
}

// rebind turns ? placeholders into $1, $2, ... (none of the statements has a
// literal question mark).
func rebind(s string) string {
	var b strings.Builder
	n := 0
	for _, r := range s {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// sqliteDSN turns a file path (or a file: URI) into a modernc DSN with the
// settings that let several processes share the file. A read-only client
// sets no journal mode: that is a write.
func sqliteDSN(dsn string, readOnly bool) string {
	params := "_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_txlock=immediate"
	if readOnly {
		params = "_pragma=busy_timeout(5000)"
	}
	if strings.Contains(dsn, "?") {
		return dsn + "&" + params
	}
	return dsn + "?" + params
}

// expiry scans the expires_at column of any driver: a time (postgres, mysql
// with parseTime) or unix milliseconds (sqlite).
type expiry struct{ t time.Time }

func (e *expiry) Scan(src any) error {
	switch v := src.(type) {
	case time.Time:
		e.t = v
	case int64:
		e.t = time.UnixMilli(v)
	case float64:
		e.t = time.UnixMilli(int64(v))
	case nil:
		e.t = time.Time{}
	default:
		return fmt.Errorf("sql: expires_at of type %T", src)
	}
	return nil
}

// noTable says whether err is the database's "the lease table does not
// exist", which a read-only client reads as "no lease was ever taken".
func noTable(err error) bool {
	var pe *pgconn.PgError
	var me *mysql.MySQLError
	switch {
	case errors.As(err, &pe):
		return pe.Code == "42P01" // undefined_table
	case errors.As(err, &me):
		return me.Number == 1146 // ER_NO_SUCH_TABLE
	}
	return strings.Contains(err.Error(), "no such table")
}

// sqliteConnector opens SQLite connections, and tells a file that cannot be
// opened because the agent has all the files its limit allows open (SQLite
// says only "unable to open database file") for the shortage it is.
type sqliteConnector struct{ dsn string }

var sqliteDriver = &sqlite.Driver{}

func (c sqliteConnector) Connect(context.Context) (driver.Conn, error) {
	conn, err := sqliteDriver.Open(c.dsn)
	if err != nil && rlimit.AtFileLimit() {
		open, limit, _ := rlimit.OpenFiles()
		return nil, fmt.Errorf("%w: %w (%d open, limit %d): %w", rlimit.ErrShortOfResources, syscall.EMFILE, open, limit, err)
	}
	return conn, err
}

func (c sqliteConnector) Driver() driver.Driver { return sqliteDriver }
