// Package registry is the one table of lease stores this build of electd
// knows, by the type label of a provider block. Adding a store is its own
// package and one line here.
package registry

import (
	"path/filepath"

	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"

	"github.com/electd/electd/providers"
	"github.com/electd/electd/providers/azureblob"
	"github.com/electd/electd/providers/datastore"
	"github.com/electd/electd/providers/etcd"
	"github.com/electd/electd/providers/mongodb"
	"github.com/electd/electd/providers/nats"
	"github.com/electd/electd/providers/redis"
	"github.com/electd/electd/providers/sql"
	"github.com/electd/electd/providers/zookeeper"
)

// Types returns the provider types by name.
func Types() map[string]providers.Type {
	return map[string]providers.Type{
		"azure_blob": azureblob.Type(),
		"datastore":  datastore.Type(),
		"etcd":       etcd.Type(),
		"mongodb":    mongodb.Type(),
		"nats":       nats.Type(),
		"redis":      redis.Type(),
		"sql":        sql.Type(),
		"zookeeper":  zookeeper.Type(),
	}
}

// Default is the provider jobs use when a configuration declares none: a
// SQLite file, so the quickstart runs several agents on one machine with
// no server to install. It is decoded like any block the operator writes.
// This form names the file relative to the working directory, for tests;
// the commands use DefaultIn, with an absolute path.
const Default = `provider "sql" "default" {
  driver = "sqlite"
  dsn    = "` + DefaultFile + `"
}
`

// DefaultFile is the embedded default's database file.
const DefaultFile = "electd.db"

// DefaultIn is Default with its file in dir, an absolute path: every
// command finds the same file wherever it is run from.
func DefaultIn(dir string) string {
	dsn := hclwrite.TokensForValue(cty.StringVal(filepath.Join(dir, DefaultFile))).Bytes()
	return "provider \"sql\" \"default\" {\n  driver = \"sqlite\"\n  dsn    = " + string(dsn) + "\n}\n"
}
