package etcd

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/electd/electd/internal/teststore"
	"github.com/electd/electd/providers"
	"github.com/electd/electd/providers/providertest"
)

// TestAuth runs the provider as an etcd user whose only permission is
// readwrite on the prefix, as docs/providers/etcd.md tells operators to set
// up: every operation works, and a wrong password or a prefix outside the
// grant is a store error, never a lease verdict.
func TestAuth(t *testing.T) {
	t.Parallel()
	endpoint, _ := teststore.StartEtcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	for _, step := range []func() error{
		func() error { _, err := admin.UserAdd(ctx, "root", "root-pw"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := admin.RoleAdd(ctx, "electd"); return err },
		func() error {
			_, err := admin.RoleGrantPermission(ctx, "electd", "/electd/", clientv3.GetPrefixRangeEnd("/electd/"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := admin.UserAdd(ctx, "electd", "electd-pw"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "electd", "electd"); return err },
		func() error { _, err := admin.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatalf("set up auth: %v", err)
		}
	}

	s := Settings{Endpoints: []string{endpoint}, Prefix: "/electd/", Username: "electd", Password: "electd-pw"}
	a, b := open(t, s), open(t, s)
	hints := make(chan string, 100)
	if err := b.Notify(ctx, func(key string) { hints <- key }); err != nil {
		t.Fatalf("Notify as electd: %v", err)
	}
	l, err := a.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "a", TTL: 10 * time.Second})
	if err != nil {
		t.Fatalf("Acquire as electd: %v", err)
	}
	if _, err := b.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "b", TTL: 10 * time.Second}); !errors.Is(err, providers.ErrHeld) {
		t.Fatalf("second Acquire as electd: %v, want ErrHeld", err)
	}
	if _, err := b.Observe(ctx, "job"); err != nil {
		t.Fatalf("Observe as electd: %v", err)
	}
	l.Value = "v"
	if l, err = a.Renew(ctx, l); err != nil {
		t.Fatalf("Renew as electd: %v", err)
	}
	for len(hints) > 0 {
		<-hints
	}
	if err := a.Release(ctx, l); err != nil {
		t.Fatalf("Release as electd: %v", err)
	}
	select {
	case k := <-hints:
		if k != "job" {
			t.Fatalf("changed(%q) for the Release as electd, want changed(\"job\")", k)
		}
	case <-time.After(providertest.NotifyWithin):
		t.Fatal("no notification of the Release as electd")
	}
	if _, err := b.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "b", TTL: 10 * time.Second}); err != nil {
		t.Fatalf("Acquire after Release as electd: %v", err)
	}

	for name, bad := range map[string]Settings{
		"wrong password": {Endpoints: s.Endpoints, Prefix: s.Prefix, Username: "electd", Password: "nope"},
		"outside grant":  {Endpoints: s.Endpoints, Prefix: "/other/", Username: "electd", Password: "electd-pw"},
	} {
		p := open(t, bad)
		_, err := p.Acquire(ctx, providers.AcquireRequest{Key: "job", Holder: "x", TTL: 10 * time.Second})
		if err == nil || errors.Is(err, providers.ErrHeld) {
			t.Fatalf("%s: Acquire: %v, want a store error", name, err)
		}
		t.Logf("%s: %v", name, err)
	}
}
