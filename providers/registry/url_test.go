package registry

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/providers"
	"github.com/electd/electd/providers/datastore"
	"github.com/electd/electd/providers/etcd"
	"github.com/electd/electd/providers/mongodb"
	"github.com/electd/electd/providers/redis"
	"github.com/electd/electd/providers/sql"
	"github.com/electd/electd/providers/zookeeper"
)

// TestFromURL: each store reads its own URLs into the settings a provider
// block with the same values would give.
func TestFromURL(t *testing.T) {
	cases := []struct {
		url  string
		typ  string
		want providers.Settings
	}{
		{"sqlite:///var/lib/electd/leases.db", "sql", &sql.Settings{Driver: "sqlite", DSN: "/var/lib/electd/leases.db", Table: sql.DefaultTable}},
		{"sqlite:leases.db?table=locks", "sql", &sql.Settings{Driver: "sqlite", DSN: "leases.db", Table: "locks"}},
		{"sqlite:///tmp/with%20space.db", "sql", &sql.Settings{Driver: "sqlite", DSN: "/tmp/with space.db", Table: sql.DefaultTable}},
		{"SQLite:///x.db", "sql", &sql.Settings{Driver: "sqlite", DSN: "/x.db", Table: sql.DefaultTable}},
		{"postgres://electd:pw@db:5432/electd?sslmode=verify-full", "sql",
			&sql.Settings{Driver: "postgres", DSN: "postgres://electd:pw@db:5432/electd?sslmode=verify-full", Table: sql.DefaultTable}},
		{"postgresql://db/electd?table=locks&sslmode=disable", "sql",
			&sql.Settings{Driver: "postgres", DSN: "postgresql://db/electd?sslmode=disable", Table: "locks"}},
		{"mysql://electd:p%40ss%2Fw:rd@db.example.com/electd?tls=true&table=locks", "sql",
			&sql.Settings{Driver: "mysql", DSN: "electd:p@ss/w:rd@tcp(db.example.com:3306)/electd?tls=true", Table: "locks"}},
		{"mysql://root@127.0.0.1:3307/test", "sql", &sql.Settings{Driver: "mysql", DSN: "root@tcp(127.0.0.1:3307)/test", Table: sql.DefaultTable}},
		{"redis://10.0.0.1:6379", "redis", &redis.Settings{Addresses: []string{"10.0.0.1:6379"}, Prefix: redis.DefaultPrefix}},
		{"redis://h1,h2:6380,h3:6381/2?prefix=x:", "redis", &redis.Settings{Addresses: []string{"h1:6379", "h2:6380", "h3:6381"}, DB: 2, Prefix: "x:"}},
		{"rediss://user:p@ss@cache:6380", "redis", &redis.Settings{Addresses: []string{"cache:6380"}, Username: "user", Password: "p@ss", TLS: true, Prefix: redis.DefaultPrefix}},
		{"redis://:secret@[::1]", "redis", &redis.Settings{Addresses: []string{"[::1]:6379"}, Password: "secret", Prefix: redis.DefaultPrefix}},
		{"etcd://127.0.0.1:2379,127.0.0.2:2379?prefix=/jobs/", "etcd",
			&etcd.Settings{Endpoints: []string{"127.0.0.1:2379", "127.0.0.2:2379"}, Prefix: "/jobs/", DialTimeout: etcd.DefaultDialTimeout}},
		{"etcd://root:pw@e1:2379?tls=true&dial_timeout=2s", "etcd",
			&etcd.Settings{Endpoints: []string{"https://e1:2379"}, Username: "root", Password: "pw", Prefix: etcd.DefaultPrefix, DialTimeout: 2 * time.Second}},
		{"mongodb://u:pw@m1:27017,m2:27017/ops?replicaSet=rs0&collection=locks", "mongodb",
			&mongodb.Settings{URI: "mongodb://u:pw@m1:27017,m2:27017/ops?replicaSet=rs0", Database: "ops", Collection: "locks", WriteConcern: "majority"}},
		{"mongodb://m1/?w=2", "mongodb", &mongodb.Settings{URI: "mongodb://m1/?w=2", Database: "electd", Collection: "leases", WriteConcern: "2"}},
		{"datastore://my-project/ns1?kind=Lock", "datastore", &datastore.Settings{ProjectID: "my-project", Namespace: "ns1", Kind: "Lock"}},
		{"zk://z1:2181,z2,z3:2182/jobs/electd?connect_timeout=3s", "zookeeper",
			&zookeeper.Settings{Servers: []string{"z1:2181", "z2:2181", "z3:2182"}, Root: "/jobs/electd", ConnectTimeout: 3 * time.Second}},
		{"zookeeper://ops:p%40ss@127.0.0.1:2181", "zookeeper",
			&zookeeper.Settings{Servers: []string{"127.0.0.1:2181"}, Root: zookeeper.DefaultRoot, Username: "ops", Password: "p@ss", ConnectTimeout: zookeeper.DefaultConnectTimeout}},
	}
	for _, tc := range cases {
		t.Run(tc.url, func(t *testing.T) {
			typ, s, err := FromURL(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			if typ != tc.typ || !reflect.DeepEqual(s, tc.want) {
				t.Errorf("got %s %#v\nwant %s %#v", typ, s, tc.typ, tc.want)
			}
		})
	}
}

// TestFromURLErrors: a URL that cannot be read is refused with a sentence
// that says why and never repeats the password.
func TestFromURLErrors(t *testing.T) {
	const pw = "Hunter2-secret"
	cases := []struct{ url, want string }{
		{"", "not a URL"},
		{"/var/lib/electd/leases.db", "not a URL"},
		{"root:" + pw + "@tcp(db:3306)/electd", "no lease store of this build has URLs root://"},
		{"zookeeper2://h:2181", "no lease store of this build has URLs zookeeper2://"},
		{"sqlite://db-host/leases.db", "names a file, not a host"},
		{"sqlite:///x.db?mode=memory", "one parameter, table"},
		{"sqlite:///x.db?table=drop%20table", "table must be a plain SQL identifier"},
		{"sqlite://", "no database file"},
		{"postgres://u:" + pw + "@h:port/db", "cannot be parsed as a URL"},
		{"postgres://u:" + pw + "@h/db?table=", "give table once, with a value"},
		{"mysql://u:" + pw + "@h:3306/", "names one database"},
		{"mysql:///db", "names a host"},
		{"redis://u:" + pw + "@h1:1,h2:2", "with 2 nodes the majority is both"},
		{"redis://u@h:6379", "sent with a password"},
		{"redis://h:6379/zero", "database number"},
		{"redis://h:6379?db=1", "one parameter, prefix"},
		{"redis://u:" + pw + "@h:99999", "no valid port"},
		{"etcd://", "names no endpoint"},
		{"etcd://h:2379/prefix/", "has no path"},
		{"etcd://u:" + pw + "@h:2379?tls=yes", "tls must be true or false"},
		{"etcd://h:2379?timeout=1s", "an etcd URL takes the parameters prefix, dial_timeout and tls"},
		{"nats://h:4222?stream=x", "a nats URL takes the parameters bucket, tls, credentials_file and connect_timeout"},
		{"redis://h:6379?prefix=a&prefix=b", "give each parameter once"},
		{"mongodb://u:" + pw + "@h:27017/a.b", "database name"},
		{"datastore://", "project_id must not be empty"},
		{"datastore://p?namespace=x", "parameters kind and credentials_file"},
		{"zk://", "names no server"},
		{"zk://u:" + pw + "@h:2181?session=4s", "the parameter connect_timeout"},
		{"zk://h:2181?connect_timeout=-1s", "positive Go duration"},
	}
	for _, tc := range cases {
		t.Run(tc.url, func(t *testing.T) {
			_, _, err := FromURL(tc.url)
			if err == nil {
				t.Fatalf("accepted, want an error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), pw) {
				t.Errorf("the error repeats the password: %q", err)
			}
		})
	}
}

// TestURLSecrets: the password of a URL, as written and decoded, and the
// URL that holds it are secrets; a URL without a password has none.
func TestURLSecrets(t *testing.T) {
	got := providers.URLSecrets("postgres://electd:p%40ss@db:5432/x?sslmode=disable")
	want := []string{"postgres://electd:p%40ss@db:5432/x?sslmode=disable", "p%40ss", "p@ss"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := providers.URLSecrets("redis://db:6379/0?prefix=a@b"); len(got) != 0 {
		t.Errorf("a URL without a password: got secrets %q", got)
	}
}

// TestSchemesAreOwnedOnce: a scheme names one provider type, or FromURL
// would depend on the order of a map.
func TestSchemesAreOwnedOnce(t *testing.T) {
	owner := map[string]string{}
	for name, typ := range Types() {
		if typ.URL == nil {
			continue
		}
		if typ.URL.Parse == nil || typ.URL.Example == "" || len(typ.URL.Schemes) == 0 {
			t.Errorf("%s: a URL form needs schemes, an example and a parser", name)
		}
		for _, s := range typ.URL.Schemes {
			if prev, ok := owner[s]; ok {
				t.Errorf("the scheme %q belongs to both %s and %s", s, prev, name)
			}
			if s != strings.ToLower(s) {
				t.Errorf("%s: the scheme %q must be lowercase", name, s)
			}
			owner[s] = name
		}
	}
}
