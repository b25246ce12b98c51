package cluster

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/electd/electd/internal/teststore"
)

// PostgresDSN is the machine's PostgreSQL test database
// ($ELECTD_TEST_POSTGRES_DSN; scripts/services.sh starts the server).
func PostgresDSN() string {
	if dsn := os.Getenv("ELECTD_TEST_POSTGRES_DSN"); dsn != "" {
		return dsn
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// MySQLDSN is the machine's MySQL (MariaDB) test database
// ($ELECTD_TEST_MYSQL_DSN).
func MySQLDSN() string {
	if dsn := os.Getenv("ELECTD_TEST_MYSQL_DSN"); dsn != "" {
		return dsn
	}
	return "root@tcp(127.0.0.1:3306)/test"
}

// RandomSuffix is 8 hex digits, to name a table or key prefix of one's own
// on a shared store.
func RandomSuffix() string {
	b := make([]byte, 4)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// ProviderNames are the stores Provider knows, in the order the benchmark
// runs them (Azure, whose leases last 15 s at least, last). mongodb runs on
// FerretDB, which is not atomic under concurrent updates.
var ProviderNames = []string{"sqlite", "postgres", "mysql", "redis", "redlock", "etcd", "zookeeper", "nats", "datastore", "mongodb", "azure_blob"}

// Notifies reports whether the provider wakes waiting candidates when a
// lease is released (PostgreSQL LISTEN/NOTIFY, MySQL named locks, Redis
// pub/sub, etcd and ZooKeeper watches, a NATS key-value watch, SQLite's
// file watch for the agents of one machine); the others find a released
// lease on their next retry.
func Notifies(name string) bool {
	switch name {
	case "sqlite", "postgres", "mysql", "redis", "redlock", "etcd", "zookeeper", "nats":
		return true
	}
	return false
}

// Provider is a provider block and what agents need besides it.
type Provider struct {
	Name  string   // one of ProviderNames
	Block string   // provider "TYPE" "s" { ... }
	Env   []string // for the agents' environment (DATASTORE_EMULATOR_HOST)
}

// SQLBlock is an sql provider block.
func SQLBlock(driver, dsn, table string) string {
	attrs := []string{Str("driver", driver), Str("dsn", dsn)}
	if table != "" {
		attrs = append(attrs, Str("table", table))
	}
	return Block("sql", attrs...)
}

// RedisBlock is a redis provider block (three addresses or more: Redlock).
func RedisBlock(prefix string, addrs ...string) string {
	return Block("redis", List("addresses", addrs...), Str("prefix", prefix))
}

// EtcdBlock is an etcd provider block; more attribute lines may follow.
func EtcdBlock(prefix string, endpoints []string, attrs ...string) string {
	a := []string{List("endpoints", endpoints...)}
	if prefix != "" {
		a = append(a, Str("prefix", prefix))
	}
	return Block("etcd", append(a, attrs...)...)
}

// ZooKeeperBlock is a zookeeper provider block; more attribute lines may
// follow.
func ZooKeeperBlock(root string, servers []string, attrs ...string) string {
	a := []string{List("servers", servers...)}
	if root != "" {
		a = append(a, Str("root", root))
	}
	return Block("zookeeper", append(a, attrs...)...)
}

// NATSBlock is a nats provider block on the servers at addrs (host:port);
// more attribute lines may follow.
func NATSBlock(bucket string, addrs []string, attrs ...string) string {
	servers := make([]string, len(addrs))
	for i, a := range addrs {
		servers[i] = "nats://" + a
	}
	return Block("nats", append([]string{List("servers", servers...), Str("bucket", bucket)}, attrs...)...)
}

// Stores starts the stores that providers need, each once on first use,
// under dir, and stops them all on Close. The machine's PostgreSQL and
// MariaDB are used as they are, with a table of one's own.
type Stores struct {
	dir string

	mu      sync.Mutex
	started map[string]any
	procs   []*teststore.Proc
}

// NewStores keeps the stores' data and logs under dir.
func NewStores(dir string) *Stores { return &Stores{dir: dir, started: map[string]any{}} }

// Close stops every store started, newest first.
func (s *Stores) Close() {
	s.mu.Lock()
	ps := s.procs
	s.procs = nil
	s.mu.Unlock()
	for i := len(ps) - 1; i >= 0; i-- {
		ps[i].Stop()
	}
}

func (s *Stores) keep(p *teststore.Proc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.procs = append(s.procs, p)
}

func (s *Stores) tempDir(name string) (string, error) {
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return "", err
	}
	return os.MkdirTemp(s.dir, name+"-")
}

// once returns the value kept under name, or starts it.
func once[T any](s *Stores, name string, start func(dir string) (T, *teststore.Proc, error)) (T, error) {
	s.mu.Lock()
	defer s.mu.Unlock() // stores start one at a time
	if v, ok := s.started[name]; ok {
		return v.(T), nil
	}
	var zero T
	dir, err := s.tempDir(name)
	if err != nil {
		return zero, err
	}
	v, p, err := start(dir)
	if err != nil {
		return zero, fmt.Errorf("start %s: %w", name, err)
	}
	s.procs = append(s.procs, p)
	s.started[name] = v
	return v, nil
}

// Etcd is the shared etcd server's client endpoint.
func (s *Stores) Etcd() (string, error) {
	return once(s, "etcd", func(dir string) (string, *teststore.Proc, error) { return teststore.StartEtcdProc(dir, 0, 0) })
}

// NewEtcd starts an etcd server of the caller's own (whose counters count
// nobody else); Close stops it, or the caller before.
func (s *Stores) NewEtcd() (string, *teststore.Proc, error) {
	dir, err := s.tempDir("etcd")
	if err != nil {
		return "", nil, err
	}
	ep, p, err := teststore.StartEtcdProc(dir, 0, 0)
	if err != nil {
		return "", nil, err
	}
	s.keep(p)
	return ep, p, nil
}

// ZooKeeper is the shared ZooKeeper server's host:port (tickTime 100 ms:
// sessions of 200 ms to 60 s).
func (s *Stores) ZooKeeper() (string, error) {
	return once(s, "zookeeper", func(dir string) (string, *teststore.Proc, error) { return teststore.StartZooKeeperProc(dir, 0) })
}

// NATS is the shared nats-server's (JetStream on) host:port: a server of
// its own rather than the machine's, so that nothing is left behind there.
func (s *Stores) NATS() (string, error) {
	return once(s, "nats", func(dir string) (string, *teststore.Proc, error) { return teststore.StartNATSProc(dir, 0) })
}

// Redis is n redis-servers of their own, shared by every caller asking for
// n (1 for a single server, 3 for Redlock).
func (s *Stores) Redis(n int) ([]string, error) {
	return once(s, fmt.Sprintf("redis-%d", n), func(dir string) ([]string, *teststore.Proc, error) {
		var addrs []string
		var last *teststore.Proc
		for i := range n {
			if last != nil {
				s.procs = append(s.procs, last) // once holds s.mu
			}
			d := filepath.Join(dir, fmt.Sprint(i))
			if err := os.MkdirAll(d, 0o755); err != nil {
				return nil, nil, err
			}
			a, p, err := teststore.StartRedisProc(d, 0)
			if err != nil {
				return nil, nil, err
			}
			addrs, last = append(addrs, a), p
		}
		return addrs, last, nil
	})
}

// Azurite is the shared Azurite's connection string.
func (s *Stores) Azurite() (string, error) {
	return once(s, "azurite", func(dir string) (string, *teststore.Proc, error) {
		return teststore.StartAzuriteProc(dir, 0, false)
	})
}

// Datastore is the shared Datastore emulator's host:port.
func (s *Stores) Datastore() (string, error) {
	return once(s, "datastore", teststore.StartDatastoreProc)
}

// FerretDB is the shared FerretDB's URI.
func (s *Stores) FerretDB() (string, error) {
	return once(s, "ferretdb", func(dir string) (string, *teststore.Proc, error) { return teststore.StartFerretDBProc(dir, 0) })
}

// Provider starts what the named provider needs and returns its block,
// with a table, key prefix, namespace, database or container of its own
// named after suffix (a fresh SQLite file).
func (s *Stores) Provider(name, suffix string) (Provider, error) {
	p := Provider{Name: name}
	var err error
	switch name {
	case "sqlite":
		var dir string
		if dir, err = s.tempDir("sqlite"); err == nil {
			p.Block = SQLBlock("sqlite", filepath.Join(dir, "leases-"+suffix+".db"), "")
		}
	case "postgres":
		p.Block = SQLBlock("postgres", PostgresDSN(), "electd_t_"+suffix)
	case "mysql":
		p.Block = SQLBlock("mysql", MySQLDSN(), "electd_t_"+suffix)
	case "redis", "redlock":
		n := 1
		if name == "redlock" {
			n = 3
		}
		var addrs []string
		if addrs, err = s.Redis(n); err == nil {
			p.Block = RedisBlock("electd-"+suffix+":", addrs...)
		}
	case "etcd":
		var ep string
		if ep, err = s.Etcd(); err == nil {
			p.Block = EtcdBlock("/electd-"+suffix+"/", []string{ep})
		}
	case "zookeeper":
		var addr string
		if addr, err = s.ZooKeeper(); err == nil {
			p.Block = ZooKeeperBlock("/electd-"+suffix, []string{addr})
		}
	case "nats":
		var addr string
		if addr, err = s.NATS(); err == nil {
			p.Block = NATSBlock("electd_"+suffix, []string{addr})
		}
	case "datastore":
		var host string
		if host, err = s.Datastore(); err == nil {
			p.Block = Block("datastore", Str("project_id", "electd-test"), Str("namespace", "electd-"+suffix))
			p.Env = []string{"DATASTORE_EMULATOR_HOST=" + host}
		}
	case "mongodb":
		var uri string
		if uri, err = s.FerretDB(); err == nil {
			p.Block = Block("mongodb", Str("uri", uri), Str("database", "electd_"+suffix))
		}
	case "azure_blob":
		var cs string
		if cs, err = s.Azurite(); err == nil {
			p.Block = Block("azure_blob", Str("connection_string", cs), Str("container", "electd-"+suffix))
		}
	default:
		err = fmt.Errorf("unknown provider %q", name)
	}
	return p, err
}
