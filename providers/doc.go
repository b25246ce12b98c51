// Package providers defines the lease contract every store implements
// (Acquire, Renew, Release, Observe with fencing tokens and typed errors),
// the optional Watcher capability, and the table of provider types the agent
// opens by name. Each store lives in its own sub-package; providertest is the
// conformance suite they all pass against their real store.
package providers
