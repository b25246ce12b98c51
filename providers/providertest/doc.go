// Package providertest is the conformance suite every lease provider passes
// against its real store: providertest.Run(t, factory, opts).
//
// A Factory prepares a fresh, isolated namespace (a new table, file, prefix)
// and returns an Open function; every call of Open is a new, independent
// client (its own connections) on that same namespace, so the suite can
// restart a holder and race many clients. The suite closes what it opens.
//
// Behaviours a store cannot give are declared in Options and tested as
// declared, never skipped:
//
//   - Options.Notifier: whether the provider implements providers.Notifier
//     (found with providers.As). When false the suite checks that it does
//     not (candidates then poll every retry_every); SQL on MySQL and SQLite
//     has no notification mechanism.
//   - Options.Unreachable: a client of the same kind pointed at a store that
//     is down; every operation must fail within a bounded time. It is
//     required: a provider that cannot say how it behaves when its store is
//     down does not conform.
//
// A store that implements providers.Batcher gets the batch cases
// (RenewMany, AcquireMany, ReleaseMany, ConcurrentAcquireMany, Batch,
// BatchStoreDown): every edge case of a batch judged as the single
// operation judges it, over Options.BatchSize leases, so a new store needs
// no batch tests of its own beyond what is truly its own (request counts,
// chunk sizes).
//
// Renew after expiry when nobody took the lease over succeeds: holder and
// token still match, which is the rule of providers.Provider. The suite checks exactly
// that, so a provider that refuses such a renew does not conform either.
//
// The expiry cases use a ttl of Options.ShortTTL (default 1s) and assert
// only with generous margins, so a slow machine makes them inconclusive
// (logged) rather than flaky.
package providertest
