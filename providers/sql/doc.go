// Package sql is the lease store on a SQL database: SQLite (modernc.org/sqlite,
// no cgo), PostgreSQL (pgx) and MySQL/MariaDB (go-sql-driver/mysql).
//
// Each lease is one row of one table (default electd_leases), created if
// missing and never deleted, so fencing tokens survive releases and restarts.
// Every operation is one atomic statement (or one short transaction on MySQL)
// and every expiry is judged by the database's clock, never the agent's.
//
// Batches: AcquireMany, RenewMany and ReleaseMany take up to 1000 leases per
// statement (PostgreSQL arrays with unnest, SQLite a VALUES list, MySQL a
// derived table joined in one UPDATE inside one short transaction). A
// refused Acquire says how long the holder's term has left by the
// database's clock (HeldError.Remaining), so a candidate tries again the
// moment it ends.
//
// Notifications (providers.Notifier): PostgreSQL uses LISTEN/NOTIFY on channel
// electd_<table> (Acquire and Release notify), so a waiting candidate takes
// over in milliseconds. SQLite logs every release in <table>_released (a
// trigger) and watches the database file (inotify): a release by one process
// wakes the candidates of the others on the same host. MySQL has no
// notifications: a holder keeps a named lock per job it leads, and a
// refused candidate waits on it with GET_LOCK, which returns when the
// holder's release gives it up (lockwake.go); the table still decides.
//
// SQLite: several processes on one host may share one file; the provider sets
// WAL journal mode, a 5 s busy_timeout and BEGIN IMMEDIATE transactions. Its
// "store clock" is the host clock, which is shared by every process on it.
//
// Open does no I/O beyond parsing settings: the table is created by the first
// operation, so an agent started while its database is down keeps running and
// reports errors per operation instead of exiting.
//
// # Verified here
//
//   - The conformance suite (`providers/providertest`, including 50 races of 20 clients and the batched
//     renewal case) against PostgreSQL 15 and MariaDB 10.11 on this machine and a SQLite file:
//     `go test -count=1 ./providers/sql/`.
//   - Several OS processes racing on one SQLite file (`TestSQLiteMultiProcess`).
//   - Handover on PostgreSQL, 20 rounds, release → the waiting candidate holds the lease: median
//     0.71 ms, max 2.2 ms (release → notification: median 0.33 ms):
//     `go test -count=1 -v -run 'TestPostgresHandover$' ./providers/sql/`.
//   - Three `electd run` processes on each driver, kill -9 and SIGTERM of the leader
//     (`go test -run TestThreeAgents ./systest/`).
//
// MySQL's named-lock wake-up, measured with go test -count=1 -v -run
// 'TestMySQLHandover$|TestPostgresHandover$' ./providers/sql/ (MariaDB 10.11,
// load average 21-25 on 2 cores): release → the waiting candidate holds the
// lease, median 27-40 ms (PostgreSQL 3.5-7 ms in the same runs); the bell
// rings within 1 ms of the release's commit, the rest is MariaDB's Release and
// AcquireMany transactions on the loaded machine (3-30 ms and 7-160 ms each).
//
// The agent's TestFailoverPostgres (a primary and an asynchronous standby,
// the terms won 1 2 3 4 with the agent's mark) and systest's
// TestBalanceAcrossAgents/postgres (the connection pool) back the claims of
// docs/providers/sql.md on replication and connections.
package sql
