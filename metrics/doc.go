// Package metrics holds electd's Prometheus metrics (docs/api.md) in one
// registry per agent, and a wrapper that times and counts every lease
// operation of a provider.
package metrics
