package sql

import (
	"testing"

	"github.com/jackc/pgx/v5"
)

// The hosts of a DSN are tried from the start, circularly, and a failed
// connection moves the start past the host it was dialling, or to the
// next host when that is not one of the DSN's addresses.
func TestHostRotation(t *testing.T) {
	cfg, err := pgx.ParseConfig("host=10.0.0.1,10.0.0.2,db3 port=5432,5433,5434 sslmode=prefer target_session_attrs=read-write")
	if err != nil {
		t.Fatal(err)
	}
	r := newHostRotation(cfg)
	if r == nil || len(r.groups) != 3 {
		t.Fatalf("groups: %v, want 3 hosts", r)
	}
	for _, g := range r.groups {
		if len(g) != 2 { // sslmode=prefer: TLS, then plain
			t.Errorf("host %s: %d variants, want 2", g[0].Host, len(g))
		}
	}
	if got := r.order(2); got[0].Host != "db3" || got[2].Host != "10.0.0.1" || got[4].Host != "10.0.0.2" || len(got) != 6 {
		t.Errorf("order from db3: %v", got)
	}
	for _, c := range []struct {
		start int64
		addr  string
		want  int64
	}{
		{0, "10.0.0.2:5433", 2}, // dialling the second host when it gave up
		{0, "10.0.0.1:5432", 1},
		{1, "10.0.0.1:5432", 1},  // wrapped round to the first
		{0, "", 1},               // dialled nothing
		{2, "192.0.2.7:5434", 0}, // db3 resolved: not known, the next host
	} {
		if got := r.after(c.start, c.addr); got != c.want {
			t.Errorf("after(%d, %q) = %d, want %d", c.start, c.addr, got, c.want)
		}
	}
	one, _ := pgx.ParseConfig("host=10.0.0.1 port=5432 sslmode=prefer")
	if newHostRotation(one) != nil {
		t.Error("a DSN of one host (TLS and plain) rotates")
	}
}
