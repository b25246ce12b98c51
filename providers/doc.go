// Package providers defines the lease contract every store implements
// (Acquire, Renew, Release, Observe with fencing tokens and typed errors;
// Acquire honours a floor, so that an agent's token mark survives a store
// that lost writes), the optional capabilities (Notifier, Batcher, found
// beneath wrappers with As), and what a store's package
// declares to the configuration language: its Type (schema and decoding),
// its Settings (validation, limits, opening). Each store lives in its own
// sub-package, registry maps type names to them, and providertest is the
// conformance suite they all pass against their real store.
package providers
