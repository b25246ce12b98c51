package nats

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/config"
	"github.com/electd/electd/internal/configtest"
)

// load loads one configuration file holding src, with this package's type
// as the only provider type.
func load(t *testing.T, src string) (*config.Config, *config.Diagnostics) {
	t.Helper()
	return configtest.Load(t, "nats", Type(), src)
}

// TestSettingsDiagnostics: every bad value is reported on its own line,
// with the attribute's summary, in one run; secrets never show.
func TestSettingsDiagnostics(t *testing.T) {
	for _, c := range []struct {
		name   string
		src    string
		want   []string // "line: summary"
		detail []string // what the first diagnostic's detail says
	}{
		{"bad servers", `provider "nats" "n" {
  servers = ["http://10.0.0.1:4222", "10.0.0.2", "nats://10.0.0.3:99999", "nats://10.0.0.4:4222/x"]
}
`, []string{"2: Invalid server"}, []string{"Server 1 of the list has a scheme", "Server 2 of the list is not host:port", "Server 3 of the list has no valid port", "Server 4 of the list has a path"}},
		{"credentials in a server URL", `provider "nats" "n" {
  servers = ["nats://electd:s3cret-nats-pw@10.0.0.1:4222"]
}
`, []string{"2: Invalid server"}, []string{"holds credentials"}},
		{"duplicate server", `provider "nats" "n" {
  servers = ["nats://10.0.0.1:4222", "nats://10.0.0.1:4222"]
}
`, []string{"2: Duplicate server"}, nil},
		{"empty servers", `provider "nats" "n" {
  servers = []
}
`, []string{"2: Empty servers"}, nil},
		{"missing servers", `provider "nats" "n" {
  bucket = "electd"
}
`, []string{"1: Missing required argument"}, nil},
		{"bucket with a dot", `provider "nats" "n" {
  servers = ["nats://127.0.0.1:4222"]
  bucket  = "electd.leases"
}
`, []string{"3: Invalid bucket"}, []string{"no dots or spaces"}},
		{"empty bucket", `provider "nats" "n" {
  servers = ["nats://127.0.0.1:4222"]
  bucket  = ""
}
`, []string{"3: Invalid bucket"}, nil},
		{"long bucket", `provider "nats" "n" {
  servers = ["nats://127.0.0.1:4222"]
  bucket  = "` + strings.Repeat("b", maxBucket+1) + `"
}
`, []string{"3: Invalid bucket"}, nil},
		{"replicas", `provider "nats" "n" {
  servers  = ["nats://127.0.0.1:4222"]
  replicas = 7
}
`, []string{"3: Invalid replicas"}, nil},
		{"two ways to authenticate", `provider "nats" "n" {
  servers = ["nats://127.0.0.1:4222"]
  user     = "electd"
  password = "s3cret-nats-pw"
  token    = "s3cret-nats-token"
}
`, []string{"5: Conflicting credentials"}, nil},
		{"password without user", `provider "nats" "n" {
  servers  = ["nats://127.0.0.1:4222"]
  password = "s3cret-nats-pw"
}
`, []string{"3: Password without user"}, nil},
		{"user without password", `provider "nats" "n" {
  servers = ["nats://127.0.0.1:4222"]
  user    = "electd"
}
`, []string{"3: Missing password"}, nil},
		{"certificate without key", `provider "nats" "n" {
  servers       = ["tls://127.0.0.1:4222"]
  tls_cert_file = "/etc/electd/nats.pem"
}
`, []string{"3: Incomplete client certificate"}, nil},
		{"bad connect_timeout and bucket together", `provider "nats" "n" {
  servers         = ["nats://127.0.0.1:4222"]
  bucket          = "a b"
  connect_timeout = "soon"
}
`, []string{"3: Invalid bucket", "4: Invalid duration"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, diags := load(t, c.src)
			configtest.WantDiagnostics(t, cfg, diags, c.want, c.detail, "s3cret")
		})
	}
}

// TestSettingsDecode: a block with every attribute decodes to the settings
// the provider opens with; the defaults fill the rest.
func TestSettingsDecode(t *testing.T) {
	t.Setenv("ELECTD_TEST_NATS_PASSWORD", "nats-pass-1")
	cfg, diags := load(t, `provider "nats" "n" {
  servers         = ["nats://10.0.0.1:4222", "tls://nats-2.example.com:4222", "10.0.0.3:4222"]
  bucket          = "electd_prod"
  replicas        = 3
  user            = "electd"
  password        = env("ELECTD_TEST_NATS_PASSWORD")
  tls_ca_file     = "/etc/electd/nats-ca.pem"
  connect_timeout = "3s"
}
provider "nats" "d" {
  servers = ["nats://127.0.0.1:4222"]
}
job "a" {
  provider = nats.n
}
`)
	if diags.HasErrors() {
		t.Fatal(diags.Err())
	}
	pc, ok := cfg.Provider("nats.n")
	if !ok {
		t.Fatal("no nats.n")
	}
	want := &Settings{Servers: []string{"nats://10.0.0.1:4222", "tls://nats-2.example.com:4222", "10.0.0.3:4222"}, Bucket: "electd_prod", Replicas: 3,
		User: "electd", Password: "nats-pass-1", TLSCAFile: "/etc/electd/nats-ca.pem", ConnectTimeout: 3 * time.Second}
	if got := pc.Settings.(*Settings); fmt.Sprint(*got) != fmt.Sprint(*want) {
		t.Errorf("settings %+v, want %+v", *got, *want)
	}
	if !pc.Settings.(*Settings).useTLS() {
		t.Error("a tls:// server and tls_ca_file do not turn TLS on")
	}
	pd, _ := cfg.Provider("nats.d")
	if got := pd.Settings.(*Settings); got.Bucket != DefaultBucket || got.Replicas != 1 || got.ConnectTimeout != DefaultConnectTimeout || got.useTLS() {
		t.Errorf("defaults: %+v", *got)
	}
}

// TestURL: `electd lock -provider nats://...` reads the same settings as a
// block; its errors never quote the URL.
func TestURL(t *testing.T) {
	for _, c := range []struct {
		url  string
		want Settings
	}{
		{"nats://127.0.0.1:4222", Settings{Servers: []string{"nats://127.0.0.1:4222"}}},
		{"nats://electd:p%40ss@n1:4222,n2,[::1]?bucket=jobs&connect_timeout=2s",
			Settings{Servers: []string{"nats://n1:4222", "nats://n2:4222", "nats://[::1]:4222"}, Bucket: "jobs", User: "electd", Password: "p@ss", ConnectTimeout: 2 * time.Second}},
		{"nats://s3cret-token@n1:4222", Settings{Servers: []string{"nats://n1:4222"}, Token: "s3cret-token"}},
		{"nats://n1:4222?tls=true&credentials_file=/etc/electd/nats.creds", Settings{Servers: []string{"nats://n1:4222"}, TLS: true, CredentialsFile: "/etc/electd/nats.creds"}},
	} {
		t.Run(c.url, func(t *testing.T) {
			s, err := fromURL(c.url)
			if err != nil {
				t.Fatal(err)
			}
			if c.want.Bucket == "" {
				c.want.Bucket = DefaultBucket
			}
			if c.want.ConnectTimeout == 0 {
				c.want.ConnectTimeout = DefaultConnectTimeout
			}
			c.want.Replicas = 1
			if got := s.(*Settings); fmt.Sprint(*got) != fmt.Sprint(c.want) {
				t.Errorf("settings %+v, want %+v", *got, c.want)
			}
			if err := s.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
	for _, bad := range []string{"nats://", "nats://n1:4222/electd", "nats://n1?bucket=a&bucket=b", "nats://n1?prefix=x", "nats://n1?connect_timeout=soon", "nats://n1?tls=yes", "tls://n1:4222"} {
		if _, err := fromURL(bad); err == nil {
			t.Errorf("fromURL(%q) succeeded", bad)
		}
	}
	if _, err := fromURL("nats://u:s3cret@n1?nope=1"); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("fromURL error %v: want an error without the password", err)
	}
}

// TestExampleConfig keeps examples/nats-workers.hcl valid and its provider
// block one that New accepts.
func TestExampleConfig(t *testing.T) {
	t.Setenv("ELECTD_NATS_PASSWORD", "not-a-real-password")
	pc := configtest.LoadExample(t, "nats-workers.hcl", "nats", Type(), "nats.main")
	s := *pc.Settings.(*Settings)
	if s.CredentialsFile == "" || !s.useTLS() || s.Replicas != 3 {
		t.Errorf("the example's settings are %+v: want a credentials file, TLS and 3 replicas", s)
	}
	// Paths and hosts of the operator's site, not of this machine.
	s.CredentialsFile, s.Servers = "", []string{closedServer(t)}
	p, err := s.Open(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
}
