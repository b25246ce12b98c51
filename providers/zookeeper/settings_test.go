package zookeeper

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/electd/electd/config"
	"github.com/electd/electd/internal/configtest"
	"github.com/electd/electd/internal/teststore"
	"github.com/electd/electd/providers"
)

func TestSecrets(t *testing.T) {
	s := Settings{Servers: []string{"127.0.0.1:2181"}, Username: "electd", Password: "zk-pass-1"}
	if got := s.Secrets(); !slices.Contains(got, "zk-pass-1") || slices.Contains(got, "electd") {
		t.Errorf("Secrets() = %q, want the password and not the username", got)
	}
}

// load loads one configuration file holding src, with this package's type
// as the only provider type.
func load(t *testing.T, src string) (*config.Config, *config.Diagnostics) {
	t.Helper()
	return configtest.Load(t, "zookeeper", Type(), src)
}

// TestSettingsDiagnostics: every bad value is reported on its own line,
// with the attribute's summary, in one run; the password never shows.
func TestSettingsDiagnostics(t *testing.T) {
	for _, c := range []struct {
		name string
		src  string
		want []string // "line: summary"
		// detail: what the first diagnostic's detail must say
		detail []string
	}{
		{"bad servers", `provider "zookeeper" "z" {
  servers = ["zk://10.0.0.1:2181", "10.0.0.2", "10.0.0.3:2181/chroot", "10.0.0.4:99999"]
}
`, []string{"2: Invalid server"}, []string{"server 1 has a scheme", "server 2 is not host:port", "server 3 has a path", "server 4 has no valid port"}},
		{"empty servers", `provider "zookeeper" "z" {
  servers = []
}
`, []string{"2: Empty servers"}, nil},
		{"missing servers", `provider "zookeeper" "z" {
  root = "/electd"
}
`, []string{"1: Missing required argument"}, nil},
		{"relative root", `provider "zookeeper" "z" {
  servers = ["127.0.0.1:2181"]
  root    = "electd"
}
`, []string{"3: Invalid root"}, nil},
		{"root with a trailing slash", `provider "zookeeper" "z" {
  servers = ["127.0.0.1:2181"]
  root    = "/electd/"
}
`, []string{"3: Invalid root"}, nil},
		{"root under /zookeeper", `provider "zookeeper" "z" {
  servers = ["127.0.0.1:2181"]
  root    = "/zookeeper/electd"
}
`, []string{"3: Invalid root"}, nil},
		{"root with dot dot", `provider "zookeeper" "z" {
  servers = ["127.0.0.1:2181"]
  root    = "/a/../b"
}
`, []string{"3: Invalid root"}, nil},
		{"root slash", `provider "zookeeper" "z" {
  servers = ["127.0.0.1:2181"]
  root    = "/"
}
`, []string{"3: Invalid root"}, nil},
		{"empty name", `provider "zookeeper" "z" {
  servers = ["127.0.0.1:2181"]
  root    = "/a//b"
}
`, []string{"3: Invalid root"}, nil},
		{"password without username", `provider "zookeeper" "z" {
  servers  = ["127.0.0.1:2181"]
  password = "s3cret-zk-pw"
}
`, []string{"3: Password without username"}, nil},
		{"username without password", `provider "zookeeper" "z" {
  servers  = ["127.0.0.1:2181"]
  username = "electd"
}
`, []string{"1: Username without password"}, nil},
		{"colon in username", `provider "zookeeper" "z" {
  servers  = ["127.0.0.1:2181"]
  username = "a:b"
  password = "s3cret-zk-pw"
}
`, []string{"3: Invalid username"}, nil},
		{"bad connect_timeout and root together", `provider "zookeeper" "z" {
  servers         = ["127.0.0.1:2181"]
  root            = "nope"
  connect_timeout = "soon"
}
`, []string{"3: Invalid root", "4: Invalid duration"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, diags := load(t, c.src)
			configtest.WantDiagnostics(t, cfg, diags, c.want, c.detail, "s3cret-zk-pw")
		})
	}
}

// TestSettingsDecode: a block with every attribute decodes to the settings
// the provider opens with; the defaults fill the rest.
func TestSettingsDecode(t *testing.T) {
	t.Setenv("ELECTD_TEST_ZK_PASSWORD", "zk-pass-1")
	cfg, diags := load(t, `provider "zookeeper" "z" {
  servers         = ["10.0.0.1:2181", "zk-2.example.com:2181"]
  root            = "/services/electd"
  username        = "electd"
  password        = env("ELECTD_TEST_ZK_PASSWORD")
  connect_timeout = "3s"
}
provider "zookeeper" "d" {
  servers = ["127.0.0.1:2181"]
}
job "a" {
  provider = zookeeper.z
}
`)
	if diags.HasErrors() {
		t.Fatal(diags.Err())
	}
	pc, ok := cfg.Provider("zookeeper.z")
	if !ok {
		t.Fatal("no zookeeper.z")
	}
	want := &Settings{Servers: []string{"10.0.0.1:2181", "zk-2.example.com:2181"}, Root: "/services/electd",
		Username: "electd", Password: "zk-pass-1", ConnectTimeout: 3 * time.Second}
	if got := pc.Settings.(*Settings); fmt.Sprint(*got) != fmt.Sprint(*want) {
		t.Errorf("settings %+v, want %+v", *got, *want)
	}
	pd, _ := cfg.Provider("zookeeper.d")
	if got := pd.Settings.(*Settings); got.Root != DefaultRoot || got.ConnectTimeout != DefaultConnectTimeout {
		t.Errorf("defaults: %+v", *got)
	}
	p, err := pc.Settings.Open(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if got := string(p.(*Provider).auth); got != "electd:zk-pass-1" {
		t.Errorf("credentials from env() not passed to the client")
	}
}

// TestExampleConfig keeps examples/zookeeper-queue.hcl valid and its
// provider block one that Open accepts.
func TestExampleConfig(t *testing.T) {
	root, err := teststore.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	example := filepath.Join(root, "examples", "zookeeper-queue.hcl")
	// `electd check -no-env` (make check): the password from env() is
	// unknown, which is no error.
	if _, diags := config.Load([]string{example}, config.Options{Types: map[string]providers.Type{"zookeeper": Type()}, NoEnv: true}); diags.HasErrors() {
		t.Fatalf("examples/zookeeper-queue.hcl with NoEnv: %v", diags.Err())
	}
	t.Setenv("ELECTD_ZK_PASSWORD", "not-a-real-password")
	pc := configtest.LoadExample(t, "zookeeper-queue.hcl", "zookeeper", Type(), "zookeeper.main")
	p, err := pc.Settings.Open(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
}
