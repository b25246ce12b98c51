package redis

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/electd/electd/providers"
)

// Every script reads the server's clock (TIME) so that expiries are the
// server's view. KEYS[1] is the lease hash, which never expires; KEYS[2]
// the live key, which exists with a PX expiry while the term is live.
// Tokens travel as decimal strings: Lua numbers are doubles and would print
// large tokens in exponent form.
const scriptNow = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`

// acquireScript: ARGV holder, ttl ms, minimum token, channel, and "1" to
// publish the win (one server, whose answer is final; under Redlock a
// server's win is not yet the term's, and an attempt that does not win a
// quorum must wake nobody: the provider announces a won term itself). The
// new token is the counter + 1, or the minimum when that is larger (the
// caller's floor, or Redlock bringing a lagging server up to the highest
// counter seen). ARGV[6] is the attempt's time by the caller's clock, in
// microseconds. Replies
// {won, holder, token, expires ms, value, value token, value stamp,
// remaining ms, counter before}; remaining is the PTTL of the live key when
// another holder has it (the server's own measure of the term's rest), else
// 0.
//
// A request that reaches the server after a later one of the same holder
// (a partition delayed it, and the connection delivered it once it healed,
// after the holder had won a term and renewed it here) is refused with that
// holder's live term: started, it would end the term it came after on this
// server. The hash's hstamp is the time of the holder's latest acquire,
// renewal or join; the holder's own clock is compared only with itself.
var acquireScript = goredis.NewScript(scriptNow + `
local s = redis.call('HMGET', KEYS[1], 'holder', 'token', 'value', 'vtok', 'vstamp', 'hstamp')
local holder, token = s[1] or '', s[2] or '0'
local pttl = redis.call('PTTL', KEYS[2])
if pttl > 0 and holder ~= '' and (holder ~= ARGV[1] or tonumber(s[6] or '0') > tonumber(ARGV[6])) then
  return {0, holder, token, now + pttl, s[3] or '', s[4] or '0', s[5] or '0', pttl, token}
end
local prior = token
if tonumber(ARGV[3]) > tonumber(token) + 1 then
  redis.call('HSET', KEYS[1], 'token', ARGV[3])
else
  redis.call('HINCRBY', KEYS[1], 'token', 1)
end
token = redis.call('HGET', KEYS[1], 'token')
redis.call('HSET', KEYS[1], 'holder', ARGV[1], 'hstamp', ARGV[6])
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
if ARGV[5] == '1' then
  redis.call('PUBLISH', ARGV[4], 'acquired')
end
return {1, ARGV[1], token, now + tonumber(ARGV[2]), s[3] or '', s[4] or '0', s[5] or '0', 0, prior}
`)

// renewScript: ARGV holder, token, ttl ms, value, value stamp (the
// renewal's time by the caller's clock, in nanoseconds; its microseconds
// are the hstamp the acquire script reads). Holder and token are those of
// the latest term, whether or not it is live: an expired term nobody took
// may be renewed. Replies {ok, expires ms}.
var renewScript = goredis.NewScript(scriptNow + `
local s = redis.call('HMGET', KEYS[1], 'holder', 'token', 'hstamp')
if s[1] ~= ARGV[1] or s[2] ~= ARGV[2] then
  return {0, 0}
end
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[3])
redis.call('HSET', KEYS[1], 'value', ARGV[4], 'vtok', ARGV[2], 'vstamp', ARGV[5])
local us = string.sub(ARGV[5], 1, -4)
if tonumber(us) > tonumber(s[3] or '0') then
  redis.call('HSET', KEYS[1], 'hstamp', us)
end
return {1, now + tonumber(ARGV[3])}
`)

// releaseScript: ARGV holder, token, value, value stamp, channel. It
// stores the value and publishes the release. The hash stays: its counter is
// what keeps the next token growing.
var releaseScript = goredis.NewScript(`
local s = redis.call('HMGET', KEYS[1], 'holder', 'token')
if s[1] ~= ARGV[1] or s[2] ~= ARGV[2] then
  return 0
end
redis.call('HSET', KEYS[1], 'holder', '', 'value', ARGV[3], 'vtok', ARGV[2], 'vstamp', ARGV[4])
redis.call('DEL', KEYS[2])
redis.call('PUBLISH', ARGV[5], 'released')
return 1
`)

// undoScript: ARGV holder, token won, the counter before the attempt, and
// the token of the term the Acquire won ("0" when it won none). Under
// Redlock, a server that an attempt won with a token other than the term's
// is undone, when it still has that token:
//
//   - With a token below the term's, the server was behind (it missed terms,
//     or answered late after a reordering on its connections): it joins the
//     term, its counter raised to the term's token. Put back, it would hand
//     out the same low token at every attempt, be undone again, and stay
//     behind until the servers in step lost their data.
//   - Otherwise (the attempt failed, or the server handed out more than the
//     term's token) it is released and its counter put back: no term had
//     that token, and a candidate cut off with one server would otherwise
//     raise that server's counter at every attempt, past the token of the
//     term the others then win, which the server could no longer join
//     (joinScript).
//
// It leaves the value alone and tells nobody, since no term changed hands
// (publishing made every candidate try again, and fail again, in a loop).
var undoScript = goredis.NewScript(`
local s = redis.call('HMGET', KEYS[1], 'holder', 'token')
if s[1] ~= ARGV[1] or s[2] ~= ARGV[2] then
  return 0
end
if tonumber(ARGV[4]) > tonumber(ARGV[2]) then
  redis.call('HSET', KEYS[1], 'token', ARGV[4])
  return 1
end
redis.call('HSET', KEYS[1], 'holder', '', 'token', ARGV[3])
redis.call('DEL', KEYS[2])
return 1
`)

// observeScript replies {live, holder, token, expires ms, value, value
// token, value stamp, remaining ms}; holder is "" unless the term is live.
var observeScript = goredis.NewScript(scriptNow + `
local s = redis.call('HMGET', KEYS[1], 'holder', 'token', 'value', 'vtok', 'vstamp')
local holder = s[1] or ''
local pttl = redis.call('PTTL', KEYS[2])
if pttl > 0 and holder ~= '' then
  return {1, holder, s[2] or '0', now + pttl, s[3] or '', s[4] or '0', s[5] or '0', pttl}
end
return {0, '', s[2] or '0', 0, s[3] or '', s[4] or '0', s[5] or '0', 0}
`)

// record is one server's view of a lease.
type record struct {
	ok      bool // acquire: won; observe: live
	holder  string
	token   uint64
	expires time.Time
	// remaining is the live key's PTTL when the term is live and not the
	// caller's: how long it has left by the server's clock.
	remaining time.Duration
	value     stamped
	prior     uint64 // acquire: the server's counter before it
}

// stamped is a Value with the term that wrote it and the writer's clock at
// the write. Under Redlock the servers may disagree on the Value (a Renew
// that reached only some of them); the newest (vtok, vstamp) wins.
type stamped struct {
	value  string
	token  uint64
	stamp  int64
	exists bool
}

func (a stamped) newer(b stamped) bool {
	if a.token != b.token {
		return a.token > b.token
	}
	return a.stamp > b.stamp
}

// nodeAcquire runs the acquire script on n for an attempt made at stamp
// (microseconds, the caller's clock).
func (p *Provider) nodeAcquire(ctx context.Context, n *node, key, holder string, ttl time.Duration, minToken uint64, stamp int64) (record, error) {
	res, err := acquireScript.Run(ctx, n.c, []string{p.stateKey(key), p.liveKey(key)},
		holder, ttl.Milliseconds(), strconv.FormatUint(minToken, 10), p.channel(key), p.publishWins(), stamp).Slice()
	if err != nil {
		return record{}, err
	}
	return parseRecord(res)
}

func (p *Provider) nodeRenew(ctx context.Context, n *node, key, holder string, token uint64, ttl time.Duration, value string, stamp int64) (ok bool, expires time.Time, err error) {
	res, err := renewScript.Run(ctx, n.c, []string{p.stateKey(key), p.liveKey(key)},
		holder, strconv.FormatUint(token, 10), ttl.Milliseconds(), value, stamp).Int64Slice()
	if err != nil {
		return false, time.Time{}, err
	}
	if len(res) != 2 {
		return false, time.Time{}, fmt.Errorf("renew script replied %v", res)
	}
	return res[0] == 1, time.UnixMilli(res[1]), nil
}

func (p *Provider) nodeRelease(ctx context.Context, n *node, key, holder string, token uint64, value string, stamp int64) (bool, error) {
	res, err := releaseScript.Run(ctx, n.c, []string{p.stateKey(key), p.liveKey(key)},
		holder, strconv.FormatUint(token, 10), value, stamp, p.channel(key)).Int64()
	return res == 1, err
}

func (p *Provider) nodeObserve(ctx context.Context, n *node, key string) (record, error) {
	res, err := observeScript.Run(ctx, n.c, []string{p.stateKey(key), p.liveKey(key)}).Slice()
	if err != nil {
		return record{}, err
	}
	return parseRecord(res)
}

// parseRecord reads {flag, holder, token, expires ms, value, value token,
// value stamp, remaining ms}.
func parseRecord(res []any) (record, error) {
	bad := func(what string) (record, error) {
		return record{}, fmt.Errorf("script replied %v: bad %s", res, what)
	}
	if len(res) != 8 && len(res) != 9 {
		return bad("length")
	}
	flag, ok1 := res[0].(int64)
	holder, ok2 := res[1].(string)
	token, err1 := strconv.ParseUint(fmt.Sprint(res[2]), 10, 64)
	exp, ok3 := res[3].(int64)
	value, ok4 := res[4].(string)
	vtok, err2 := strconv.ParseUint(fmt.Sprint(res[5]), 10, 64)
	vstamp, err3 := strconv.ParseInt(fmt.Sprint(res[6]), 10, 64)
	pttl, ok5 := res[7].(int64)
	switch {
	case !ok1 || !ok2 || !ok4 || !ok5:
		return bad("field types")
	case !ok3:
		return bad("expiry")
	case err1 != nil || err2 != nil || err3 != nil:
		return bad("token")
	}
	r := record{ok: flag == 1, holder: holder, token: token, value: stamped{value: value, token: vtok, stamp: vstamp, exists: vtok > 0}}
	if len(res) == 9 {
		if r.prior, err1 = strconv.ParseUint(fmt.Sprint(res[8]), 10, 64); err1 != nil {
			return bad("counter")
		}
	}
	if pttl > 0 {
		r.remaining = time.Duration(pttl) * time.Millisecond
	}
	if exp > 0 {
		r.expires = time.UnixMilli(exp)
	}
	return r, nil
}

// publishWins is the acquire script's publish flag: only a single server's
// win is final when the script runs.
func (p *Provider) publishWins() string {
	if len(p.nodes) == 1 {
		return "1"
	}
	return "0"
}

// announce publishes a term won under Redlock on every server (a quorum of
// subscribers hears it, as for a release), off the caller's path.
func (p *Provider) announce(key string) {
	if len(p.nodes) == 1 {
		return
	}
	for _, n := range p.nodes {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
			defer cancel()
			_ = n.c.Publish(ctx, p.channel(key), "acquired").Err() // a hint: a server down misses it
		}()
	}
}

// joinScript: ARGV holder, token, ttl ms, and the time by the holder's
// clock in microseconds (hstamp, as for a renewal). Under Redlock, a server that
// does not have a term that a quorum has just renewed joins it, when no term
// is live there and its counter is below the term's token (so it never saw
// that token): it missed the Acquire (cut off, or a rival's attempt held it
// then) or restarted empty. A term held by just a quorum would otherwise end
// with the first of its servers lost. A server that has the term already
// (the Acquire's write reached it after the renewal it refused: they went
// on two connections) is renewed, as the renewal would have. Replies 1
// when it joined or had the term, -1 when another term is live there, -2
// when its counter has reached the token.
var joinScript = goredis.NewScript(`
local s = redis.call('HMGET', KEYS[1], 'holder', 'token', 'hstamp')
if s[1] == ARGV[1] and s[2] == ARGV[2] then
  redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[3])
  if tonumber(ARGV[4]) > tonumber(s[3] or '0') then
    redis.call('HSET', KEYS[1], 'hstamp', ARGV[4])
  end
  return 1
end
if redis.call('EXISTS', KEYS[2]) == 1 then
  return -1
end
if tonumber(s[2] or '0') >= tonumber(ARGV[2]) then
  return -2
end
redis.call('HSET', KEYS[1], 'holder', ARGV[1], 'token', ARGV[2], 'hstamp', ARGV[4])
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[3])
return 1
`)

// join has the servers of p.nodes at idx, which refused a renewal of l,
// join its term (joinScript), each call bounded by ctx and nodeTimeout, and
// says how many did.
func (p *Provider) join(ctx context.Context, l providers.Lease, idx []int) int {
	joined := 0
	for _, r := range each(ctx, p, nodeTimeout(l.TTL), func(ctx context.Context, n *node) (bool, error) {
		if !slices.Contains(idx, slices.Index(p.nodes, n)) {
			return false, nil
		}
		res, err := joinScript.Run(ctx, n.c, []string{p.stateKey(l.Key), p.liveKey(l.Key)},
			l.Holder, strconv.FormatUint(l.Token, 10), l.TTL.Milliseconds(), time.Now().UnixMicro()).Int64()
		if res < 0 {
			p.log.Debug("a server that does not have the term cannot join it", "key", l.Key, "server", n.addr,
				"token", l.Token, "why", map[int64]string{-1: "another term is live there", -2: "its counter has reached the token"}[res])
		}
		return res == 1, err
	}, nil, nil) {
		if r.err == nil && r.v {
			joined++
		}
	}
	if joined > 0 {
		p.log.Debug("servers that missed the term joined it", "key", l.Key, "token", l.Token, "joined", joined)
	}
	return joined
}

// joinLater is join in the background, for a renewal that succeeded
// without the servers at idx: it does not wait for them.
func (p *Provider) joinLater(l providers.Lease, idx []int) {
	if len(idx) == 0 {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(p.closed, nodeTimeout(l.TTL))
		defer cancel()
		p.join(ctx, l, idx)
	}()
}
