#!/usr/bin/env bash
# Ensures the stores the tests need are running on loopback, starting any that
# are down. Idempotent: safe to run again and again (make test calls it).
# PostgreSQL, MariaDB and Redis come with this machine image; the commands
# below are the ones that start them when they have stopped.
set -euo pipefail

log() { printf 'services: %s\n' "$*" >&2; }

wait_for() { # name, tries, command...
	local name=$1 tries=$2
	shift 2
	for _ in $(seq "$tries"); do
		if "$@" >/dev/null 2>&1; then return 0; fi
		sleep 0.5
	done
	log "$name did not become ready"
	return 1
}

postgres() {
	if pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; then return 0; fi
	log "starting PostgreSQL"
	pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start
	wait_for postgres 60 pg_isready -h 127.0.0.1 -p 5432 -q
	psql -h 127.0.0.1 -U postgres -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname='test'" | grep -q 1 ||
		psql -h 127.0.0.1 -U postgres -d postgres -c 'CREATE DATABASE test' >/dev/null
}

mariadb() {
	if mariadb-admin -h 127.0.0.1 -uroot ping >/dev/null 2>&1; then return 0; fi
	log "starting MariaDB"
	start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
	wait_for mariadb 60 mariadb-admin -h 127.0.0.1 -uroot ping
	mariadb -h 127.0.0.1 -uroot -e 'CREATE DATABASE IF NOT EXISTS test'
}

redis() {
	if redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; then return 0; fi
	log "starting Redis"
	mkdir -p /var/lib/redis /var/log/redis
	redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save '' --appendonly no \
		--dir /var/lib/redis --logfile /var/log/redis/ci.log
	wait_for redis 20 sh -c 'redis-cli -h 127.0.0.1 -p 6379 ping | grep -q PONG'
}

want=${*:-postgres mariadb redis}
for s in $want; do "$s"; done
log "ready: $want"
