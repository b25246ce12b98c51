package sql

import (
	"context"
	dbsql "database/sql"
	"sync"
	"time"
)

// SQLite's batched renewals: prepared once, sent one at a time.
//
// A batch is one statement whose text depends only on how many leases it
// carries, and an agent renews the same numbers every renew_every (1000 a
// statement, then the remainder). Parsing and planning that statement again
// each time was the largest single part of an agent's CPU on SQLite (about
// a fifth of it with 10,000 jobs), so the statements of the last few sizes
// are kept prepared.
//
// SQLite runs one write at a time whatever the number of connections. The
// renewals of one process therefore wait for each other here, on a channel
// that honours ctx, rather than in SQLite's busy handler (which sleeps and
// polls) on connections opened for the purpose, each with a page cache of
// its own. It also means that one statement is in use at a time, so the
// cache can close the one it evicts.

// maxRenewStmts bounds the prepared renewal statements kept.
const maxRenewStmts = 4

type renewStmts struct {
	gate chan struct{} // held while a renewal statement runs

	mu     sync.Mutex
	stmts  map[int]*keptStmt // by number of rows
	uses   uint64
	closed bool
}

type keptStmt struct {
	stmt *dbsql.Stmt
	used uint64 // renewStmts.uses when it was last used
}

func newRenewStmts() *renewStmts {
	return &renewStmts{gate: make(chan struct{}, 1), stmts: map[int]*keptStmt{}}
}

// run runs the renewal statement of n rows with args, holding the gate, and
// records the expiry of every row it returns.
func (c *renewStmts) run(ctx context.Context, db *dbsql.DB, table string, n int, args []any, expires map[string]time.Time) error {
	select {
	case c.gate <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-c.gate }()
	stmt, err := c.stmt(ctx, db, table, n)
	if err != nil {
		return err
	}
	rows, err := stmt.QueryContext(ctx, args...)
	if err != nil {
		return err
	}
	return scanExpires(rows, expires)
}

// stmt is the prepared statement of n rows, prepared now if it is not kept.
// The caller holds the gate.
func (c *renewStmts) stmt(ctx context.Context, db *dbsql.DB, table string, n int) (*dbsql.Stmt, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.uses++
	if k, ok := c.stmts[n]; ok {
		k.used = c.uses
		return k.stmt, nil
	}
	stmt, err := db.PrepareContext(ctx, sqliteRenewQuery(table, n))
	if err != nil {
		return nil, err
	}
	if c.closed {
		stmt.Close()
		return nil, dbsql.ErrConnDone
	}
	if len(c.stmts) >= maxRenewStmts {
		oldest := -1
		for size, k := range c.stmts {
			if oldest < 0 || k.used < c.stmts[oldest].used {
				oldest = size
			}
		}
		c.stmts[oldest].stmt.Close()
		delete(c.stmts, oldest)
	}
	c.stmts[n] = &keptStmt{stmt: stmt, used: c.uses}
	return stmt, nil
}

func (c *renewStmts) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for size, k := range c.stmts {
		k.stmt.Close()
		delete(c.stmts, size)
	}
}

// sqliteRenewQuery renews n leases given as 5 variables each (key, holder,
// token, ttl in milliseconds, value) and returns the key and new expiry of
// every row whose holder and token matched.
func sqliteRenewQuery(t string, n int) string {
	return `WITH v(k, holder, token, ttl, value) AS (VALUES ` + placeholders(n, 5) + `)
			UPDATE ` + t + ` SET expires_at = CAST(unixepoch('subsec') * 1000 AS INTEGER) + v.ttl, value = v.value
			FROM v WHERE ` + t + `."key" = v.k AND ` + t + `.holder = v.holder AND ` + t + `.token = v.token
			RETURNING "key", expires_at`
}

// scanExpires reads the (key, expires_at) rows of a renewal into expires
// and closes rows.
func scanExpires(rows *dbsql.Rows, expires map[string]time.Time) error {
	defer rows.Close()
	for rows.Next() {
		var key string
		var exp expiry
		if err := rows.Scan(&key, &exp); err != nil {
			return err
		}
		expires[key] = exp.t
	}
	return rows.Err()
}
