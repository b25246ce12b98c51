package sql

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/electd/electd/providers"
)

// urlForm is how an sql provider is written as one URL (`electd lock
// -provider URL`): the scheme is the driver, and the one parameter of
// electd's own, table, is taken out of the query.
//
//	sqlite:///var/lib/electd/leases.db       an absolute path
//	sqlite:leases.db                         a path relative to the working directory
//	postgres://user:PASSWORD@host:5432/db?sslmode=verify-full    as pgx reads it
//	mysql://user:PASSWORD@host:3306/db?tls=true                  turned into a go-sql-driver DSN
func urlForm() *providers.URLForm {
	return &providers.URLForm{
		Schemes: []string{"sqlite", "postgres", "postgresql", "mysql"},
		Example: "sqlite:///var/lib/electd/leases.db, postgres://user:PASSWORD@host:5432/db or mysql://user:PASSWORD@host:3306/db",
		Parse:   fromURL,
	}
}

// errURL is the error of a URL that net/url cannot parse. Its own error
// quotes the URL, password included.
var errURL = errors.New("it cannot be parsed as a URL")

func fromURL(raw string) (providers.Settings, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errURL
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, errors.New("its query cannot be parsed")
	}
	s := &Settings{Table: DefaultTable}
	if t, ok := q["table"]; ok {
		if len(t) != 1 || t[0] == "" {
			return nil, errors.New("give table once, with a value")
		}
		s.Table = t[0]
		q.Del("table")
	}
	switch strings.ToLower(u.Scheme) {
	case "sqlite":
		s.Driver = "sqlite"
		s.DSN, err = sqlitePathOf(u, q)
	case "postgres", "postgresql":
		s.Driver = "postgres"
		s.DSN = raw
		if u.RawQuery != "" {
			// pgx would send an unknown parameter to the server as a
			// setting, so electd's own is taken out.
			u.RawQuery = q.Encode()
			s.DSN = u.String()
		}
	case "mysql":
		s.Driver = "mysql"
		s.DSN, err = mysqlDSN(u, q)
	default:
		err = fmt.Errorf("the scheme %q is not an sql driver", u.Scheme)
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// sqlitePathOf is the database file of a sqlite URL: the path of
// sqlite:///abs/path.db, or the opaque part of sqlite:rel/path.db.
func sqlitePathOf(u *url.URL, q url.Values) (string, error) {
	if len(q) > 0 {
		return "", errors.New("a sqlite URL takes one parameter, table")
	}
	if u.Opaque != "" {
		p, err := url.PathUnescape(u.Opaque)
		if err != nil {
			return "", errURL
		}
		return p, nil
	}
	if u.Host != "" || u.User != nil {
		return "", errors.New("a sqlite URL names a file, not a host: write sqlite:///ABSOLUTE/PATH.db (three slashes) or sqlite:RELATIVE/PATH.db")
	}
	if u.Path == "" || u.Path == "/" {
		return "", errors.New("it names no database file")
	}
	return u.Path, nil
}

// mysqlDSN turns mysql://user:password@host:port/db?params into the
// go-sql-driver DSN user:password@tcp(host:port)/db?params. Parameters
// other than table are the driver's own (tls, timeout, ...).
func mysqlDSN(u *url.URL, q url.Values) (string, error) {
	if u.Host == "" {
		return "", errors.New("a mysql URL names a host: write mysql://user:PASSWORD@host:3306/db")
	}
	c := mysql.NewConfig()
	if u.User != nil {
		c.User = u.User.Username()
		c.Passwd, _ = u.User.Password()
	}
	c.Net = "tcp"
	c.Addr = u.Host
	if u.Port() == "" {
		c.Addr = net.JoinHostPort(u.Hostname(), "3306")
	}
	c.DBName = strings.TrimPrefix(u.Path, "/")
	if c.DBName == "" || strings.Contains(c.DBName, "/") {
		return "", errors.New("a mysql URL names one database in its path: mysql://user:PASSWORD@host:3306/db")
	}
	dsn := c.FormatDSN()
	if len(q) > 0 {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		dsn += sep + q.Encode()
	}
	return dsn, nil
}
