package sql

import (
	"context"
	dbsql "database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/electd/electd/providers"
)

// batchRows bounds the leases of one statement: at most 5 variables a row,
// under SQLite's limit of 32766 and MySQL's of 65535.
const batchRows = 1000

var _ providers.Batcher = (*Provider)(nil)

// AcquireMany judges many Acquires in one statement per 1000 leases
// (PostgreSQL and SQLite: one INSERT ... ON CONFLICT DO UPDATE ... RETURNING
// over all of them; MySQL: one short transaction of an insert of the missing
// rows, a conditional UPDATE ... JOIN and a read), then reads the holders of
// the leases it did not win in one more statement. Keys are taken in sorted
// order, so racing batches lock rows in the same order.
func (p *Provider) AcquireMany(ctx context.Context, reqs []providers.AcquireRequest) ([]providers.Lease, []error) {
	out := make([]providers.Lease, len(reqs))
	// alone: a key asked for twice is judged on its own, after
	errs, fail, batch, alone := providers.SplitBatch("sql", "acquire", len(reqs), func(i int) string { return reqs[i].Key }, func(i int) error {
		return limits.Check(reqs[i].Key, reqs[i].Holder, reqs[i].TTL)
	})
	if err := p.ensure(ctx); err != nil {
		providers.FailAll(append(batch, alone...), err, fail)
		return out, errs
	}
	slices.SortFunc(batch, func(a, b int) int { return strings.Compare(reqs[a].Key, reqs[b].Key) })
	providers.Chunks(batch, batchRows, func(chunk []int) {
		if err := p.acquireChunk(ctx, reqs, chunk, out, errs); err != nil {
			providers.FailAll(chunk, err, fail)
		}
	})
	for _, i := range alone {
		out[i], errs[i] = p.Acquire(ctx, reqs[i])
	}
	if p.wake != nil {
		keys := make([]string, len(batch))
		verdicts := make([]error, len(batch))
		for n, i := range batch {
			keys[n], verdicts[n] = reqs[i].Key, errs[i]
		}
		p.wakeAfter(keys, verdicts)
	}
	return out, errs
}

// acquireChunk acquires what it can of reqs[chunk] and fills out and errs
// for each; an error is the chunk's as a whole.
func (p *Provider) acquireChunk(ctx context.Context, reqs []providers.AcquireRequest, chunk []int, out []providers.Lease, errs []error) error {
	var won map[string]providers.Lease
	var err error
	for range acquireAttempts {
		if won, err = p.acquireRows(ctx, reqs, chunk); err == nil || !p.d.retryable(err) || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return err
	}
	var missed []string
	for _, i := range chunk {
		r := reqs[i]
		if l, ok := won[r.Key]; ok {
			l.Key, l.Holder, l.TTL = r.Key, r.Holder, r.TTL
			out[i] = l
		} else {
			missed = append(missed, r.Key)
		}
	}
	if len(missed) == 0 {
		return nil
	}
	cur, err := p.observeMany(ctx, missed)
	if err != nil {
		return err
	}
	for _, i := range chunk {
		r := reqs[i]
		if _, ok := won[r.Key]; ok {
			continue
		}
		if c, ok := cur[r.Key]; ok && c.Holder != "" && c.remaining > 0 {
			errs[i] = held(c.Lease, c.remaining)
			continue
		}
		// Freed between the two statements: judged again, on its own.
		out[i], errs[i] = p.Acquire(ctx, r)
	}
	return nil
}

// acquireRows runs the conditional write of one chunk and returns the
// leases won, by key.
func (p *Provider) acquireRows(ctx context.Context, reqs []providers.AcquireRequest, chunk []int) (map[string]providers.Lease, error) {
	t := p.d.table
	won := make(map[string]providers.Lease, len(chunk))
	scan := func(rows *dbsql.Rows) error {
		defer rows.Close()
		for rows.Next() {
			var l providers.Lease
			var token int64
			var exp expiry
			dest := []any{&l.Key, &token, &exp, &l.Value}
			if p.d.pg != nil {
				dest = append(dest, new(dbsql.NullString))
			}
			if err := rows.Scan(dest...); err != nil {
				return err
			}
			l.Token, l.Expires = uint64(token), exp.t
			won[l.Key] = l
		}
		return rows.Err()
	}
	switch p.d.driver {
	case "postgres":
		keys, holders, ttls := make([]string, len(chunk)), make([]string, len(chunk)), make([]float64, len(chunk))
		floors := make([]int64, len(chunk))
		for n, i := range chunk {
			keys[n], holders[n], ttls[n] = reqs[i].Key, reqs[i].Holder, float64(reqs[i].TTL.Milliseconds())
			floors[n] = int64(reqs[i].Floor + 1)
		}
		// The notification is delivered only if the statement commits.
		rows, err := p.d.db.QueryContext(ctx, `WITH a AS (
			INSERT INTO `+t+` AS l ("key", holder, token, expires_at, value)
			SELECT v.k, v.holder, v.floor, now() + v.ttl * interval '1 millisecond', ''
			FROM unnest($1::text[], $2::text[], $3::float8[], $4::bigint[]) AS v(k, holder, ttl, floor)
			ORDER BY v.k
			ON CONFLICT ("key") DO UPDATE SET holder = excluded.holder, token = GREATEST(l.token + 1, excluded.token), expires_at = excluded.expires_at
			WHERE l.holder = '' OR l.expires_at <= now() OR l.holder = excluded.holder
			RETURNING "key", token, expires_at, value)
			SELECT "key", token, expires_at, value, pg_notify($5, "key")::text FROM a`,
			keys, holders, ttls, floors, p.channel)
		if err != nil {
			return nil, err
		}
		return won, scan(rows)
	case "sqlite":
		now := `CAST(unixepoch('subsec') * 1000 AS INTEGER)`
		args := make([]any, 0, 4*len(chunk))
		for _, i := range chunk {
			args = append(args, reqs[i].Key, reqs[i].Holder, reqs[i].TTL.Milliseconds(), int64(reqs[i].Floor+1))
		}
		// "WHERE true" tells the parser that ON CONFLICT belongs to the INSERT.
		rows, err := p.d.db.QueryContext(ctx, `WITH v(k, holder, ttl, floor) AS (VALUES `+placeholders(len(chunk), 4)+`)
			INSERT INTO `+t+` AS l ("key", holder, token, expires_at, value)
			SELECT k, holder, floor, `+now+` + ttl, '' FROM v WHERE true
			ON CONFLICT ("key") DO UPDATE SET holder = excluded.holder, token = MAX(l.token + 1, excluded.token), expires_at = excluded.expires_at
			WHERE l.holder = '' OR l.expires_at <= `+now+` OR l.holder = excluded.holder
			RETURNING "key", token, expires_at, value`, args...)
		if err != nil {
			return nil, err
		}
		return won, scan(rows)
	}

	// MySQL: no RETURNING. Create the missing rows free, take the free,
	// expired and own ones, and read back in the same transaction the rows
	// now held by their requester: exactly those the UPDATE changed, as
	// holders are per process and the UPDATE's row locks are held.
	keys := make([]any, len(chunk))
	v := make([]any, 0, 4*len(chunk))
	for n, i := range chunk {
		keys[n] = reqs[i].Key
		v = append(v, reqs[i].Key, reqs[i].Holder, p.d.ttlArg(reqs[i].TTL), int64(reqs[i].Floor+1))
	}
	tx, err := p.d.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit this is a no-op
	if _, err := tx.ExecContext(ctx, "INSERT INTO "+t+" (`key`, holder, token, expires_at, value) VALUES "+
		strings.TrimSuffix(strings.Repeat("(?, '', 0, UTC_TIMESTAMP(6), ''), ", len(chunk)), ", ")+
		" ON DUPLICATE KEY UPDATE `key` = `key`", keys...); err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, "UPDATE "+t+" AS l JOIN ("+unionRows(len(chunk), "k", "holder", "ttl", "floor")+") AS v ON l.`key` = v.k"+
		" SET l.holder = v.holder, l.token = GREATEST(l.token + 1, v.floor), l.expires_at = DATE_ADD(UTC_TIMESTAMP(6), INTERVAL v.ttl MICROSECOND)"+
		" WHERE l.holder = '' OR l.expires_at <= UTC_TIMESTAMP(6) OR l.holder = v.holder", v...); err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, "SELECT `key`, holder, token, expires_at, value FROM "+t+" WHERE `key` IN ("+placeholders(len(chunk), 1)+")", keys...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	want := make(map[string]string, len(chunk))
	for _, i := range chunk {
		want[reqs[i].Key] = reqs[i].Holder
	}
	for rows.Next() {
		var l providers.Lease
		var token int64
		var exp expiry
		if err := rows.Scan(&l.Key, &l.Holder, &token, &exp, &l.Value); err != nil {
			return nil, err
		}
		if l.Holder == want[l.Key] {
			l.Token, l.Expires = uint64(token), exp.t
			won[l.Key] = l
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return won, tx.Commit()
}

// record is a row as observeMany reads it.
type record struct {
	providers.Lease
	remaining time.Duration // by the database's clock; ≤ 0 when expired
}

// observeMany reads the records of keys in one statement.
func (p *Provider) observeMany(ctx context.Context, keys []string) (map[string]record, error) {
	cols := `SELECT "key", holder, token, expires_at, value, ` + p.d.remaining + ` FROM ` + p.d.table
	var rows *dbsql.Rows
	var err error
	if p.d.pg != nil {
		rows, err = p.d.db.QueryContext(ctx, cols+` WHERE "key" = ANY($1::text[])`, keys)
	} else {
		args := make([]any, len(keys))
		for i, k := range keys {
			args[i] = k
		}
		q := cols + ` WHERE "key" IN (` + placeholders(len(keys), 1) + `)`
		if p.d.driver == "mysql" {
			q = strings.ReplaceAll(q, `"key"`, "`key`")
		}
		rows, err = p.d.db.QueryContext(ctx, q, args...)
	}
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[string]record, len(keys))
	for rows.Next() {
		var r record
		var token, us int64
		var exp expiry
		if err := rows.Scan(&r.Key, &r.Holder, &token, &exp, &r.Value, &us); err != nil {
			return nil, err
		}
		r.Token, r.Expires, r.remaining = uint64(token), exp.t, time.Duration(us)*time.Microsecond
		out[r.Key] = r
	}
	return out, rows.Err()
}

// RenewMany renews many leases in one statement per 1000: PostgreSQL takes
// them as arrays (unnest), SQLite as a VALUES list (a statement kept
// prepared, see stmts.go), MySQL as a derived table joined in one UPDATE,
// read back in the same transaction.
func (p *Provider) RenewMany(ctx context.Context, leases []providers.Lease) ([]providers.Lease, []error) {
	out := make([]providers.Lease, len(leases))
	errs := make([]error, len(leases))
	if err := p.checkMany(ctx, leases, true); err != nil {
		return out, fill(errs, leases, "renew", err)
	}
	expires := make(map[string]time.Time, len(leases))
	for start := 0; start < len(leases); start += batchRows {
		chunk := leases[start:min(start+batchRows, len(leases))]
		if err := p.renewChunk(ctx, chunk, expires); err != nil {
			return out, fill(errs, leases, "renew", err)
		}
	}
	var gone []string
	defer func() { p.wakeEnded(gone...) }()
	for i, l := range leases {
		exp, ok := expires[l.Key]
		if !ok {
			errs[i] = lost(l)
			gone = append(gone, l.Key)
			continue
		}
		l.Expires = exp
		out[i] = l
	}
	return out, errs
}

// checkMany validates a batch of leases (their ttls too when withTTL) and
// creates the table if need be.
func (p *Provider) checkMany(ctx context.Context, leases []providers.Lease, withTTL bool) error {
	check := limits.CheckHeld
	if withTTL {
		check = limits.CheckRenew
	}
	for _, l := range leases {
		if err := check(l); err != nil {
			return err
		}
	}
	return p.ensure(ctx)
}

// fill sets every error of a batch to err, a failure of the whole request.
func fill(errs []error, leases []providers.Lease, op string, err error) []error {
	for i := range errs {
		errs[i] = fmt.Errorf("sql: %s %q: %w", op, leases[i].Key, err)
	}
	return errs
}

// renewChunk runs one statement and records the expiry of every row it
// renewed (a lease whose holder or token no longer match is not returned).
func (p *Provider) renewChunk(ctx context.Context, leases []providers.Lease, expires map[string]time.Time) error {
	t := p.d.table
	var query string
	var args []any
	switch p.d.driver {
	case "postgres":
		keys, holders, values := make([]string, len(leases)), make([]string, len(leases)), make([]string, len(leases))
		tokens, ttls := make([]int64, len(leases)), make([]float64, len(leases))
		for i, l := range leases {
			keys[i], holders[i], values[i] = l.Key, l.Holder, l.Value
			tokens[i], ttls[i] = int64(l.Token), float64(l.TTL.Milliseconds())
		}
		query = `WITH v AS (SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::float8[], $5::text[]) AS v(k, holder, token, ttl, value)),
			` + pgLockInKeyOrder(t) + `
			UPDATE ` + t + ` AS l SET expires_at = now() + v.ttl * interval '1 millisecond', value = v.value
			FROM v WHERE l."key" = v.k AND l.holder = v.holder AND l.token = v.token AND l."key" IN (SELECT "key" FROM locked)
			RETURNING l."key", l.expires_at`
		args = []any{keys, holders, tokens, ttls, values}
	case "sqlite":
		args = make([]any, 0, 5*len(leases))
		for _, l := range leases {
			args = append(args, l.Key, l.Holder, int64(l.Token), l.TTL.Milliseconds(), l.Value)
		}
		return p.renews.run(ctx, p.d.db, t, len(leases), args, expires)
	case "mysql":
		return p.renewMySQL(ctx, leases, expires)
	}
	rows, err := p.d.db.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	return scanExpires(rows, expires)
}

// renewMySQL renews with one UPDATE ... JOIN and reads back, in the same
// transaction, the rows whose holder and token match: exactly those renewed,
// as a (holder, token) pair that did not match cannot come to match (tokens
// only grow) and those that did are locked by the UPDATE.
func (p *Provider) renewMySQL(ctx context.Context, leases []providers.Lease, expires map[string]time.Time) error {
	t := p.d.table
	keys := make([]any, len(leases))
	v := make([]any, 0, 5*len(leases))
	for i, l := range leases {
		keys[i] = l.Key
		v = append(v, l.Key, l.Holder, int64(l.Token), p.d.ttlArg(l.TTL), l.Value)
	}
	tx, err := p.d.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit this is a no-op
	if _, err := tx.ExecContext(ctx, "UPDATE "+t+" AS l JOIN ("+unionRows(len(leases), "k", "holder", "token", "ttl", "value")+") AS v"+
		" ON l.`key` = v.k AND l.holder = v.holder AND l.token = v.token"+
		" SET l.expires_at = DATE_ADD(UTC_TIMESTAMP(6), INTERVAL v.ttl MICROSECOND), l.value = v.value", v...); err != nil {
		return err
	}
	rows, err := tx.QueryContext(ctx, "SELECT `key`, holder, token, expires_at FROM "+t+" WHERE `key` IN ("+placeholders(len(leases), 1)+")", keys...)
	if err != nil {
		return err
	}
	defer rows.Close()
	type term struct {
		holder string
		token  uint64
	}
	asked := make(map[string]term, len(leases))
	for _, l := range leases {
		asked[l.Key] = term{l.Holder, l.Token}
	}
	for rows.Next() {
		var key, holder string
		var token int64
		var exp expiry
		if err := rows.Scan(&key, &holder, &token, &exp); err != nil {
			return err
		}
		if asked[key] == (term{holder, uint64(token)}) {
			expires[key] = exp.t
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return tx.Commit()
}

// ReleaseMany releases many leases in one statement per 1000 (MySQL: a
// locking read and one UPDATE ... JOIN in one transaction); PostgreSQL
// notifies each released key.
func (p *Provider) ReleaseMany(ctx context.Context, leases []providers.Lease) []error {
	errs := make([]error, len(leases))
	if err := p.checkMany(ctx, leases, false); err != nil {
		return fill(errs, leases, "release", err)
	}
	released := map[string]bool{}
	for start := 0; start < len(leases); start += batchRows {
		chunk := leases[start:min(start+batchRows, len(leases))]
		if err := p.releaseChunk(ctx, chunk, released); err != nil {
			return fill(errs, leases, "release", err)
		}
	}
	keys := make([]string, len(leases))
	for i, l := range leases {
		if !released[l.Key] {
			errs[i] = lost(l)
		}
		keys[i] = l.Key
	}
	p.wakeEnded(keys...)
	return errs
}

func (p *Provider) releaseChunk(ctx context.Context, leases []providers.Lease, released map[string]bool) error {
	t := p.d.table
	var query string
	var args []any
	switch p.d.driver {
	case "postgres":
		keys, holders, values := make([]string, len(leases)), make([]string, len(leases)), make([]string, len(leases))
		tokens := make([]int64, len(leases))
		for i, l := range leases {
			keys[i], holders[i], values[i], tokens[i] = l.Key, l.Holder, l.Value, int64(l.Token)
		}
		query = `WITH v AS (SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[]) AS v(k, holder, token, value)),
			` + pgLockInKeyOrder(t) + `,
			r AS (UPDATE ` + t + ` AS l SET holder = '', expires_at = now(), value = v.value
			FROM v WHERE l."key" = v.k AND l.holder = v.holder AND l.token = v.token AND l."key" IN (SELECT "key" FROM locked)
			RETURNING l."key")
			SELECT "key", pg_notify($5, "key")::text FROM r`
		args = []any{keys, holders, tokens, values, p.channel}
	case "sqlite":
		query = `WITH v(k, holder, token, value) AS (VALUES ` + placeholders(len(leases), 4) + `)
			UPDATE ` + t + ` SET holder = '', expires_at = CAST(unixepoch('subsec') * 1000 AS INTEGER), value = v.value
			FROM v WHERE ` + t + `."key" = v.k AND ` + t + `.holder = v.holder AND ` + t + `.token = v.token
			RETURNING "key", NULL`
		for _, l := range leases {
			args = append(args, l.Key, l.Holder, int64(l.Token), l.Value)
		}
	case "mysql":
		return p.releaseMySQL(ctx, leases, released)
	}
	rows, err := p.d.db.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var key string
		if err := rows.Scan(&key, new(dbsql.NullString)); err != nil {
			return err
		}
		released[key] = true
	}
	return rows.Err()
}

// releaseMySQL locks the rows, keeps those whose holder and token match and
// releases them with one UPDATE ... JOIN, in one transaction.
func (p *Provider) releaseMySQL(ctx context.Context, leases []providers.Lease, released map[string]bool) error {
	t := p.d.table
	keys := make([]any, len(leases))
	for i, l := range leases {
		keys[i] = l.Key
	}
	tx, err := p.d.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit this is a no-op
	rows, err := tx.QueryContext(ctx, "SELECT `key`, holder, token FROM "+t+" WHERE `key` IN ("+placeholders(len(leases), 1)+") FOR UPDATE", keys...)
	if err != nil {
		return err
	}
	type term struct {
		holder string
		token  uint64
	}
	cur := map[string]term{}
	for rows.Next() {
		var key, holder string
		var token int64
		if err := rows.Scan(&key, &holder, &token); err != nil {
			rows.Close()
			return err
		}
		cur[key] = term{holder, uint64(token)}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	var v []any
	var mine []string
	for _, l := range leases {
		if c, ok := cur[l.Key]; ok && c == (term{l.Holder, l.Token}) && l.Holder != "" {
			v = append(v, l.Key, l.Value)
			mine = append(mine, l.Key)
		}
	}
	if len(mine) == 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, "UPDATE "+t+" AS l JOIN ("+unionRows(len(mine), "k", "value")+") AS v ON l.`key` = v.k"+
		" SET l.holder = '', l.expires_at = UTC_TIMESTAMP(6), l.value = v.value", v...); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	for _, k := range mine {
		released[k] = true
	}
	return nil
}

// placeholders is n rows of cols "?" each: "(?, ?), (?, ?)" (one column:
// "?, ?", for IN lists).
func placeholders(n, cols int) string {
	if cols == 1 {
		return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
	}
	row := "(" + strings.TrimSuffix(strings.Repeat("?, ", cols), ", ") + ")"
	return strings.TrimSuffix(strings.Repeat(row+", ", n), ", ")
}

// unionRows is a MySQL derived table of n rows of the named columns, all
// placeholders: "SELECT ? AS k, ? AS v UNION ALL SELECT ?, ?".
func unionRows(n int, names ...string) string {
	first := make([]string, len(names))
	for i, name := range names {
		first[i] = "? AS " + name
	}
	rest := " UNION ALL SELECT " + strings.TrimSuffix(strings.Repeat("?, ", len(names)), ", ")
	return "SELECT " + strings.Join(first, ", ") + strings.Repeat(rest, n-1)
}

// pgLockInKeyOrder is a WITH item, "locked", that locks the rows of table t
// named in v, in key order, before a batch updates them. PostgreSQL locks
// the rows of an UPDATE ... FROM in the order of its join, which differs
// from one statement to the next, and an AcquireMany (which inserts in key
// order) and a RenewMany or ReleaseMany of other agents that lock rows in
// different orders deadlock: each waits deadlock_timeout (1 s) before one
// is aborted, and a chain of them held five agents' batches of 100 jobs for
// seconds (TestBalanceAcrossAgents). In one order there is no cycle.
func pgLockInKeyOrder(t string) string {
	return `locked AS MATERIALIZED (SELECT l."key" FROM ` + t + ` AS l JOIN v ON l."key" = v.k ORDER BY l."key" FOR UPDATE OF l)`
}
