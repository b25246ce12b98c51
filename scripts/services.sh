#!/usr/bin/env bash
# Makes sure everything the tests need is on this machine, starting or
# installing whatever is missing. Idempotent: `make test` calls it every time.
#
#   postgres mariadb redis  servers that come with this machine image; started when down
#   nats                    nats-server (v2.15.2, built into .cache/bin) with JetStream on 127.0.0.1:4222; started when down
#   etcd                    Debian's etcd-server and etcd-client (etcd, etcdctl)
#   azurite                 the Azure Storage emulator from npm, into .cache/azurite
#   datastore               checks the Google Datastore emulator of the image and Java
#   ferretdb                FerretDB (MongoDB wire protocol) built into .cache/bin
#   zookeeper               Debian's zookeeper (3.8): the server jars under /usr/share/java
#   lintian                 Debian's lintian and zsh, for the package test (systest/deb_test.go)
#   chromium                Debian's chromium, for the status page's browser test (systest/ui_test.go)
#   netns                   iproute2 and iptables, for the cluster fault suite's hosts and partitions (clusterfaults/)
#   rpm                     Debian's rpm, rpm2cpio and cpio, for the RPM's test (systest/rpm_test.go)
#   promtool                Debian's prometheus (promtool), for the alert rules' tests (dist/prometheus)
#   buildah                 Debian's buildah, to build and run the container image (systest/image_test.go)
#
# The servers that tests need several of, or on ports of their own (extra
# redis-servers, etcd, Azurite, the Datastore emulator, FerretDB, ZooKeeper),
# are started by the tests themselves (package internal/teststore) and stopped with them.
set -euo pipefail

cd "$(dirname "$0")/.."
root=$PWD
cache=$root/.cache
mkdir -p "$cache/bin"

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

apt_install() {
	export DEBIAN_FRONTEND=noninteractive
	if ! apt-get install -y -q --no-install-recommends "$@" >/dev/null 2>&1; then
		apt-get update -q >/dev/null
		apt-get install -y -q --no-install-recommends "$@" >/dev/null
	fi
}

postgres() {
	local version
	version=$(ls /etc/postgresql | head -1)
	if ! pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; then
		log "starting PostgreSQL"
		pg_ctlcluster --skip-systemctl-redirect "$version" main start
		wait_for postgres 60 pg_isready -h 127.0.0.1 -p 5432 -q
	fi
	# make test runs three packages at once, each with agents and clients on
	# this server: the default 100 connections ran out ("too many clients").
	if [ "$(psql -h 127.0.0.1 -U postgres -d postgres -tAc 'SHOW max_connections')" -lt 400 ]; then
		log "raising PostgreSQL's max_connections to 400 (a restart)"
		psql -h 127.0.0.1 -U postgres -d postgres -qc 'ALTER SYSTEM SET max_connections = 400'
		pg_ctlcluster --skip-systemctl-redirect "$version" main restart
		wait_for postgres 60 pg_isready -h 127.0.0.1 -p 5432 -q
	fi
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

etcd() {
	if type -P etcd >/dev/null && type -P etcdctl >/dev/null; then return 0; fi
	log "installing etcd-server and etcd-client (Debian)"
	apt_install etcd-server etcd-client
	# Debian's package starts a system etcd on :2379; the tests run their own.
	if pgrep -x etcd >/dev/null && [ -e /etc/default/etcd ]; then
		pkill -x etcd || true
	fi
}

azurite() {
	if [ -x "$cache/azurite/node_modules/.bin/azurite-blob" ]; then return 0; fi
	log "installing azurite@3.35.0 (npm) into .cache/azurite"
	mkdir -p "$cache/azurite"
	npm install --silent --no-audit --no-fund --prefix "$cache/azurite" azurite@3.35.0 >/dev/null 2>&1 ||
		npm install --no-audit --no-fund --prefix "$cache/azurite" azurite@3.35.0
}

datastore() {
	local jar=/usr/lib/google-cloud-sdk/platform/cloud-datastore-emulator/CloudDatastore.jar
	if [ -f "$jar" ] && command -v java >/dev/null; then return 0; fi
	log "the Google Datastore emulator is missing ($jar, java): it comes with this machine image"
	return 1
}

# build_module MODULE@VERSION PACKAGE OUT [VERSIONFILE]: builds PACKAGE of a
# module from the Go module proxy into OUT.tmp, in a writable copy of the
# module with its own go.mod and go.sum, so that electd's go.mod stays out
# of it. VERSIONFILE, when given, is written with the version first.
build_module() {
	local modver=$1 pkg=$2 out=$3 vfile=${4:-} tmp mod
	tmp=$(mktemp -d)
	mod=$(cd "$tmp" && GOFLAGS= go mod download -json "$modver" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
	if [ -z "$mod" ] || [ ! -d "$mod" ]; then
		log "could not download $modver"
		rm -rf "$tmp"
		return 1
	fi
	cp -R "$mod/." "$tmp/src"
	chmod -R u+w "$tmp/src"
	if [ -n "$vfile" ]; then echo "${modver#*@}" >"$tmp/src/$vfile"; fi
	if ! (cd "$tmp/src" && GOTOOLCHAIN=local GOFLAGS=-buildvcs=false go build -trimpath -o "$out.tmp" "$pkg"); then
		log "building $modver failed"
		rm -rf "$tmp" "$out.tmp"
		return 1
	fi
	rm -rf "$tmp"
}

ferretdb() {
	if [ -x "$cache/bin/ferretdb" ]; then return 0; fi
	# Not `go install github.com/FerretDB/FerretDB/cmd/ferretdb@v1.24.0`: that asks
	# the proxy for the module's version list (a deprecation check), which the proxy
	# refuses ("This module version is not available"), and a binary built that way
	# panics without build/version/version.txt. Instead: the module's own copy,
	# with the version file written. ~1 min the first time.
	log "building FerretDB v1.24.0 into .cache/bin (Go module proxy)"
	local bin=$cache/bin/ferretdb
	build_module github.com/FerretDB/FerretDB@v1.24.0 ./cmd/ferretdb "$bin" build/version/version.txt || return 1
	if ! "$bin.tmp" --version >/dev/null; then
		log "the FerretDB built does not run"
		rm -f "$bin.tmp"
		return 1
	fi
	mv "$bin.tmp" "$bin"
}

zookeeper() {
	if [ -f /usr/share/java/zookeeper.jar ] && [ -f /usr/share/java/slf4j-simple.jar ] && command -v java >/dev/null; then
		return 0
	fi
	# Not zookeeperd: it would start a system server on :2181. The tests
	# start their own standalone servers (internal/teststore/zookeeper.go).
	log "installing zookeeper and libslf4j-java (Debian)"
	apt_install zookeeper libslf4j-java
}

# nats-server, built from the Go module proxy like FerretDB: Debian's 2.9.10
# granted one term twice across a stream-leader change in the cluster suite
# (docs/providers/nats.md); the conditional-update fixes are in 2.10 and 2.11.
nats_version=v2.15.2

nats_js_up() { # the server on 4222 greets with JetStream on (and, given one, that version)
	local greeting
	greeting=$(timeout 2 bash -c 'exec 3<>/dev/tcp/127.0.0.1/4222 && head -n 1 <&3' 2>/dev/null) || return 1
	grep -q '"jetstream":true' <<<"$greeting" || return 1
	[ -z "${1:-}" ] || grep -q "\"version\":\"${1#v}\"" <<<"$greeting"
}

nats_build() { # nats-server $nats_version into .cache/bin; ~2 min the first time
	local bin=$cache/bin/nats-server
	if [ -x "$bin" ] && [ "$("$bin" --version 2>/dev/null)" = "nats-server: $nats_version" ]; then return 0; fi
	log "building nats-server $nats_version into .cache/bin (Go module proxy)"
	build_module "github.com/nats-io/nats-server/v2@$nats_version" . "$bin" || return 1
	if [ "$("$bin.tmp" --version 2>/dev/null)" != "nats-server: $nats_version" ]; then
		log "the nats-server built does not say it is $nats_version"
		rm -f "$bin.tmp"
		return 1
	fi
	mv "$bin.tmp" "$bin"
}

nats() {
	# The tests' provider package uses this server (a bucket per test); the
	# tests that stop or restart NATS, and the cluster suite, start their own
	# from the same binary (internal/teststore/nats.go).
	local bin want=$nats_version
	bin=$(readlink -f "$cache/bin/nats-server")
	if ! nats_build; then
		log "falling back to Debian's nats-server 2.9, which the cluster suite found unsafe (docs/providers/nats.md)"
		if ! [ -x /usr/sbin/nats-server ]; then
			log "installing nats-server (Debian)"
			apt_install nats-server
		fi
		bin=/usr/sbin/nats-server want=
	fi
	if nats_js_up "$want"; then return 0; fi
	if nats_js_up; then
		# Another server on 4222: Debian's 2.9, which this script started
		# before, or an older build. Same store directory: the buckets stay.
		log "replacing the nats-server on 127.0.0.1:4222 with $("$bin" --version)"
		start-stop-daemon --stop --oknodo --quiet --retry TERM/10/KILL/5 --exec /usr/sbin/nats-server || true
		start-stop-daemon --stop --oknodo --quiet --retry TERM/10/KILL/5 --pidfile /run/electd-nats-server.pid || true
		if nats_js_up; then
			log "a nats-server this script did not start holds 127.0.0.1:4222: stop it, then run scripts/services.sh nats"
			return 1
		fi
	fi
	log "starting $("$bin" --version) with JetStream on 127.0.0.1:4222"
	mkdir -p /var/lib/nats-server
	start-stop-daemon --start --oknodo --background --make-pidfile --pidfile /run/electd-nats-server.pid \
		--exec "$bin" -- -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log
	wait_for nats 40 nats_js_up "$want"
}

lintian() {
	# `make deb` needs only dpkg-deb; the test of the package also runs
	# lintian on it and `zsh -n` on its zsh completion.
	# type -P: `command -v lintian` would find this very function.
	if type -P lintian >/dev/null && type -P zsh >/dev/null; then return 0; fi
	log "installing lintian and zsh (Debian)"
	apt_install lintian zsh
}

chromium() {
	# The status page is tested in a real browser: headless, from the command
	# line (--dump-dom, --screenshot); no driver or CDP client is needed.
	if type -P chromium >/dev/null; then return 0; fi
	log "installing chromium (Debian)"
	apt_install chromium
}

netns() {
	# The cluster fault suite's hosts are network namespaces (ip netns) and
	# its partitions iptables DROP rules inside them.
	if type -P ip >/dev/null && type -P iptables >/dev/null; then return 0; fi
	log "installing iproute2 and iptables (Debian)"
	apt_install iproute2 iptables
}

rpm() {
	# `make rpm` needs only Go; its test reads and installs the package
	# with rpm. type -P: `command -v rpm` would find this very function.
	if type -P rpm >/dev/null && type -P rpm2cpio >/dev/null && type -P cpio >/dev/null; then return 0; fi
	log "installing rpm, rpm2cpio and cpio (Debian)"
	apt_install rpm rpm2cpio cpio
}

promtool() {
	# Only promtool is used (check rules, test rules); the package's
	# service is not started where there is no systemd, and stopped here
	# where it was.
	if type -P promtool >/dev/null; then return 0; fi
	log "installing prometheus for promtool (Debian)"
	apt_install prometheus
	if [ -d /run/systemd/system ]; then
		systemctl disable --now prometheus >/dev/null 2>&1 || true
	fi
}

buildah() {
	# The image test builds FROM scratch (no registry is reached) with vfs
	# storage and chroot isolation, which need no daemon.
	if type -P buildah >/dev/null; then return 0; fi
	log "installing buildah (Debian)"
	apt_install buildah
}

want=${*:-postgres mariadb redis etcd azurite datastore zookeeper lintian chromium netns rpm promtool buildah nats ferretdb}

# The two servers built from source (nats-server, FerretDB) take a minute or
# two each on a new machine: they build in the background while the rest is
# installed and started, and each is waited for at its turn.
building=()
for s in $want; do
	case $s in
	nats)
		nats_build &
		building+=("nats=$!")
		;;
	ferretdb)
		ferretdb &
		building+=("ferretdb=$!")
		;;
	esac
done
built() { # the background build of $1 ended well (or there was none)
	local b
	for b in "${building[@]}"; do
		if [ "${b%%=*}" = "$1" ]; then wait "${b#*=}"; return; fi
	done
}
for s in $want; do
	case $s in
	ferretdb) built ferretdb ;;        # the build was all there was to it
	nats) built nats || true; nats ;;  # nats() builds again, or falls back, if that failed
	*) "$s" ;;
	esac
done
log "ready: $want"
