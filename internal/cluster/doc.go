// Package cluster starts clusters of real `electd run` agents for the
// system tests (systest), the fault-injection suite (faults) and the
// benchmark (bench), and watches what their children do.
//
// It builds the electd binary once per process (Electd), writes provider
// blocks for every store (Stores, Provider) and agent configurations
// (AgentBlock, RunJob, LeaseJob), starts, stops and kills agents with their
// API address and a log kept for failure reports (Agent, Cluster), reads the
// records that the test child script writes (who ran, when, under which
// ELECTD_TOKEN: ChildLog) and waits for conditions (Until).
//
// Every function returns an error; the few that take a testing.TB (in
// testing.go) are thin wrappers that fail the test instead and stop what
// they started when the test ends.
package cluster
