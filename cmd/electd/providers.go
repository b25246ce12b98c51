package main

import (
	"context"
	"fmt"

	"github.com/hashicorp/go-hclog"

	"github.com/electd/electd/config"
	"github.com/electd/electd/providers"
	"github.com/electd/electd/providers/azureblob"
	"github.com/electd/electd/providers/datastore"
	"github.com/electd/electd/providers/etcd"
	"github.com/electd/electd/providers/mongodb"
	"github.com/electd/electd/providers/redis"
	sqlprovider "github.com/electd/electd/providers/sql"
)

// providerTypes is the plain table of lease stores this build can open, by
// the type label of a provider block.
var providerTypes = map[string]func(context.Context, config.Provider, hclog.Logger) (providers.Provider, error){
	config.ProviderSQL:       sqlprovider.Open,
	config.ProviderRedis:     redis.Open,
	config.ProviderDatastore: datastore.Open,
	config.ProviderMongoDB:   mongodb.Open,
	config.ProviderEtcd:      etcd.Open,
	config.ProviderAzureBlob: azureblob.Open,
}

func openProvider(ctx context.Context, p config.Provider, log hclog.Logger) (providers.Provider, error) {
	open, ok := providerTypes[p.Type]
	if !ok {
		return nil, fmt.Errorf("provider %s: type %q is not available in this build of electd yet", p.Ref(), p.Type)
	}
	return open(ctx, p, log)
}
