// Package api is the agent's HTTP API (docs/api.md): job status, step-down,
// health, readiness and Prometheus metrics. It sees the agent only through
// the small Agent interface, so it can be tested and reused without it.
package api
