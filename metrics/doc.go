// Package metrics holds electd's Prometheus metrics (SPEC §4) in one
// registry per agent, and a wrapper that times and counts every lease
// operation of a provider.
package metrics
