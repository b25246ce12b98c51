// Package sql is the lease store on a SQL database: SQLite (modernc.org/sqlite,
// no cgo), PostgreSQL (pgx) and MySQL/MariaDB (go-sql-driver/mysql).
//
// Each lease is one row of one table (default electd_leases), created if
// missing and never deleted, so fencing tokens survive releases and restarts.
// Every operation is one atomic statement (or one short transaction on MySQL)
// and every expiry is judged by the database's clock, never the agent's.
//
// PostgreSQL also implements providers.Watcher with LISTEN/NOTIFY on channel
// electd_<table>: Release and Acquire notify, so a waiting candidate takes over
// in milliseconds. MySQL and SQLite have no notification mechanism; they do not
// implement Watcher and candidates poll every retry_every.
//
// SQLite: several processes on one host may share one file; the provider sets
// WAL journal mode, a 5 s busy_timeout and BEGIN IMMEDIATE transactions. Its
// "store clock" is the host clock, which is shared by every process on it.
//
// Open does no I/O beyond parsing settings: the table is created by the first
// operation, so an agent started while its database is down keeps running and
// reports errors per operation instead of exiting.
package sql
