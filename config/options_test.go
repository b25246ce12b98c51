package config

import "github.com/electd/electd/providers/registry"

// testOpts load as `electd check` and `electd run` do.
var testOpts = Options{Types: registry.Types(), Default: registry.Default}
