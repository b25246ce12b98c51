package redis_test

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/electd/electd/providers"
	"github.com/electd/electd/providers/providertest"
	"github.com/electd/electd/providers/redis"
)

// aclRules are the least privileges the provider needs, as the docs give
// them: its scripts and the commands they call, PSUBSCRIBE, and the
// connection handshake, on keys and channels under the prefix "electd:".
var aclRules = []any{
	"on", ">s3cret", "resetkeys", "~electd:*", "resetchannels", "&electd:notify:*", "-@all",
	"+evalsha", "+eval", "+time", "+hmget", "+hget", "+hset", "+hincrby", "+pttl", "+set", "+del",
	"+publish", "+psubscribe", "+ping", "+hello", "+auth", "+select",
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
	a, b := client(t, s), client(t, s)
	notified := make(chan string, 10)
	if err := b.Notify(ctx, func(key string) { notified <- key }); err != nil {
		t.Fatalf("Notify: %v", err)
	}
	l, err := a.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "a", TTL: time.Minute})
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if got, errs := a.AcquireMany(ctx, []providers.AcquireRequest{{Key: "batch", Holder: "a", TTL: time.Minute}}); errs[0] != nil {
		t.Fatalf("AcquireMany: %v", errs[0])
	} else if _, errs := a.RenewMany(ctx, got); errs[0] != nil {
		t.Fatalf("RenewMany: %v", errs[0])
	} else if errs := a.ReleaseMany(ctx, got); errs[0] != nil {
		t.Fatalf("ReleaseMany: %v", errs[0])
	}
	if l, err = a.Renew(ctx, l); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if _, err := b.Observe(ctx, "job"); err != nil {
		t.Fatalf("Observe: %v", err)
	}
	for len(notified) > 0 {
		<-notified
	}
	if err := a.Release(ctx, l); err != nil {
		t.Fatalf("Release: %v", err)
	}
	// The batch's own notifications may still be on their way.
	for heard := false; !heard; {
		select {
		case k := <-notified:
			if k != "job" && k != "batch" {
				t.Fatalf("changed(%q) for the Release, want changed(\"job\")", k)
			}
			heard = k == "job"
		case <-time.After(providertest.NotifyWithin):
			t.Fatal("no Notify callback")
		}
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
