package main

import (
	"github.com/electd/electd/config"
	"github.com/electd/electd/providers/registry"
)

// loadOptions are how every command reads a configuration: the provider
// types of this build and its embedded default provider.
func loadOptions() config.Options {
	return config.Options{Types: registry.Types(), Default: registry.Default}
}
