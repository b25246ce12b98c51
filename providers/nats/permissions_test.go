package nats

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/internal/teststore"
	"github.com/electd/electd/providers"
)

// natsPermissions is the least a user needs for the bucket "electd", as
// docs/providers/nats.md gives it.
func natsPermissions(bucket string) (pub, sub []string) {
	stream := "KV_" + bucket
	pub = []string{
		"$JS.API.INFO",
		"$JS.API.STREAM.INFO." + stream,
		"$JS.API.STREAM.CREATE." + stream,
		"$JS.API.STREAM.MSG.GET." + stream,
		"$JS.API.CONSUMER.CREATE." + stream + ".>",
		"$JS.API.CONSUMER.DELETE." + stream + ".>",
		"$JS.FC." + stream + ".>",
		"$KV." + bucket + ".>",
	}
	return pub, []string{"_INBOX.>"}
}

func quoted(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = fmt.Sprintf("%q", x)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// TestPermissions: a user with exactly the documented permissions runs
// every operation and Notify, creating the bucket on first use; the same
// user on another bucket is refused with an error that says so.
func TestPermissions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pub, sub := natsPermissions("electd")
	conf := fmt.Sprintf(`authorization {
  users = [
    {user: electd, password: "perm-pass-1", permissions: {publish: {allow: %s}, subscribe: {allow: %s}}}
  ]
}
`, quoted(pub), quoted(sub))
	path := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, _ := teststore.StartNATS(t, "-c", path)
	s := Settings{Servers: []string{"nats://" + addr}, Bucket: "electd", User: "electd", Password: "perm-pass-1"}
	a, b := open(t, s), open(t, s)
	ctx := ctxT(t, 30*time.Second)
	keys := make(chan string, 10)
	if err := b.Notify(ctx, func(k string) { keys <- k }); err != nil {
		t.Fatalf("Notify: %v", err)
	}
	l := mustAcquire(t, a, "job", "a", time.Minute)
	if _, err := b.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "b", TTL: time.Minute}); err == nil || !strings.Contains(err.Error(), "held by") {
		t.Fatalf("Acquire of a held lease: %v", err)
	}
	if _, err := b.Observe(ctx, "job"); err != nil {
		t.Fatalf("Observe: %v", err)
	}
	if _, err := a.Renew(ctx, l); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if err := a.Release(ctx, l); err != nil {
		t.Fatalf("Release: %v", err)
	}
	waitKey(t, keys, "job", 5*time.Second)

	other := s
	other.Bucket = "other"
	o := open(t, other)
	_, err := o.Acquire(ctxT(t, 2*time.Second), providers.AcquireRequest{Key: "job", Holder: "a", TTL: time.Minute})
	if err == nil || strings.Contains(err.Error(), "held by") {
		t.Fatalf("Acquire on a bucket the user may not use: %v", err)
	}
	if !strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
		t.Errorf("Acquire on a bucket the user may not use: %v, want it to name the permissions violation", err)
	}
	t.Log(err)
}
