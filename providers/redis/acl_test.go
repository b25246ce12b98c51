package redis_test

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/electd/electd/providers/redis"
)

// aclRules are the least privileges the provider needs, as the docs give
// them: its scripts and the commands they call, SUBSCRIBE, and the
// connection handshake, on keys and channels under the prefix "electd:".
var aclRules = []any{
	"on", ">s3cret", "resetkeys", "~electd:*", "resetchannels", "&electd:notify:*", "-@all",
	"+evalsha", "+eval", "+time", "+hmget", "+hget", "+hset", "+hincrby", "+pttl", "+set", "+del",
	"+publish", "+subscribe", "+ping", "+hello", "+auth", "+select",
}

// TestACL runs every operation as a user with only the documented
// permissions, on database 2.
func TestACL(t *testing.T) {
	t.Parallel()
	addrs, _ := servers(t, 1)
	admin := goredis.NewClient(&goredis.Options{Addr: addrs[0]})
	t.Cleanup(func() { admin.Close() })
	ctx := ctxT(t, 30*time.Second)
	if err := admin.Do(ctx, append([]any{"ACL", "SETUSER", "electd"}, aclRules...)...).Err(); err != nil {
		t.Fatal(err)
	}
	s := redis.Settings{Addresses: addrs, Username: "electd", Password: "s3cret", DB: 2, Prefix: "electd:"}
	a, b := open(t, s), open(t, s)
	t.Cleanup(func() { a.Close(); b.Close() })
	ch, err := b.Watch(ctx, "job")
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	l, err := a.Acquire(ctx, "job", "a", time.Minute)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if l, err = a.Renew(ctx, l); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if _, err := b.Observe(ctx, "job"); err != nil {
		t.Fatalf("Observe: %v", err)
	}
	for len(ch) > 0 {
		<-ch
	}
	if err := a.Release(ctx, l); err != nil {
		t.Fatalf("Release: %v", err)
	}
	select {
	case <-ch:
	case <-time.After(time.Second):
		t.Fatal("no notification")
	}
	// The keys went to database 2, not 0.
	admin2 := goredis.NewClient(&goredis.Options{Addr: addrs[0], DB: 2})
	t.Cleanup(func() { admin2.Close() })
	for db, c := range map[int]*goredis.Client{0: admin, 2: admin2} {
		n, err := c.Exists(ctx, "electd:lease:job").Result()
		if err != nil || (n == 1) != (db == 2) {
			t.Fatalf("EXISTS electd:lease:job on database %d = %d, %v", db, n, err)
		}
	}
	wrong := s
	wrong.Password = "nope"
	c := open(t, wrong)
	t.Cleanup(func() { c.Close() })
	_, err = c.Observe(context.Background(), "job")
	wantStoreError(t, "Observe with a wrong password", err)
}
