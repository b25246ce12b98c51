package sql

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/electd/electd/providers"
)

// sqliteBatch bounds the rows of one SQLite statement (5 variables each,
// under SQLite's limit of 32766).
const sqliteBatch = 1000

// RenewMany renews many leases in one statement: PostgreSQL takes them as
// arrays (unnest), SQLite as a VALUES list of up to 1000 rows. MySQL has
// neither UPDATE ... RETURNING nor arrays, so there each lease is renewed
// on its own (no batching; documented).
func (p *Provider) RenewMany(ctx context.Context, leases []providers.Lease) ([]providers.Lease, []error) {
	out := make([]providers.Lease, len(leases))
	errs := make([]error, len(leases))
	all := func(err error) ([]providers.Lease, []error) {
		for i := range errs {
			errs[i] = fmt.Errorf("sql: renew %q: %w", leases[i].Key, err)
		}
		return out, errs
	}
	for _, l := range leases {
		if err := checkLease(l.Key, l.Holder, l.TTL); err != nil {
			return all(err)
		}
		if err := providers.CheckValue(l.Value); err != nil {
			return all(err)
		}
	}
	if p.d.driver == "mysql" {
		for i, l := range leases {
			out[i], errs[i] = p.Renew(ctx, l)
		}
		return out, errs
	}
	if err := p.ensure(ctx); err != nil {
		return all(err)
	}
	expires := map[string]time.Time{}
	size := len(leases)
	if p.d.driver == "sqlite" {
		size = sqliteBatch
	}
	for start := 0; start < len(leases); start += size {
		chunk := leases[start:min(start+size, len(leases))]
		if err := p.renewChunk(ctx, chunk, expires); err != nil {
			return all(err)
		}
	}
	for i, l := range leases {
		exp, ok := expires[l.Key]
		if !ok {
			errs[i] = lost(l)
			continue
		}
		l.Expires = exp
		out[i] = l
	}
	return out, errs
}

// renewChunk runs one statement and records the expiry of every row it
// renewed (a lease whose holder or token no longer match is not returned).
func (p *Provider) renewChunk(ctx context.Context, leases []providers.Lease, expires map[string]time.Time) error {
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
		query = `UPDATE ` + p.d.table + ` AS l SET expires_at = now() + v.ttl * interval '1 millisecond', value = v.value
			FROM unnest($1::text[], $2::text[], $3::bigint[], $4::float8[], $5::text[]) AS v(k, holder, token, ttl, value)
			WHERE l."key" = v.k AND l.holder = v.holder AND l.token = v.token
			RETURNING l."key", l.expires_at`
		args = []any{keys, holders, tokens, ttls, values}
	case "sqlite":
		rows := strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?), ", len(leases)), ", ")
		query = `WITH v(k, holder, token, ttl, value) AS (VALUES ` + rows + `)
			UPDATE ` + p.d.table + ` SET expires_at = CAST(unixepoch('subsec') * 1000 AS INTEGER) + v.ttl, value = v.value
			FROM v WHERE ` + p.d.table + `."key" = v.k AND ` + p.d.table + `.holder = v.holder AND ` + p.d.table + `.token = v.token
			RETURNING "key", expires_at`
		for _, l := range leases {
			args = append(args, l.Key, l.Holder, int64(l.Token), l.TTL.Milliseconds(), l.Value)
		}
	}
	rows, err := p.d.db.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
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

var _ providers.BatchRenewer = (*Provider)(nil)
