// Package systest runs the real electd binary as separate agent processes
// against real stores and checks what an operator would see: exactly one
// child at a time, failover after kill -9, fast handover after SIGTERM,
// fencing tokens that only grow. It holds tests only.
package systest
