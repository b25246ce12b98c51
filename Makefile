# electd — the two commands a newcomer needs are `make run` and `make test`.
GO       ?= go
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT   ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS  := -X main.version=$(VERSION) -X main.commit=$(COMMIT)
BIN      := bin/electd
CONFIG   ?= examples/quickstart.hcl
TESTFLAGS ?= -count=1 -timeout 20m

.PHONY: all build run check test vet services install clean

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/electd

# The quickstart agent on the embedded SQLite default: no server to install.
# Start more in other terminals with `make run` and watch failover.
run: build
	$(BIN) run -config $(CONFIG)

# Each example is a complete configuration of its own, checked as CI sees it:
# without the production environment (env() values are unknown).
check: build
	@for f in examples/*.hcl; do echo "== $$f"; $(BIN) check -no-env -config $$f || exit 1; done

# Everything, from a fresh clone: starts the stores the tests use, then vets and tests.
test: services vet
	$(GO) test $(TESTFLAGS) ./...
	@$(MAKE) --no-print-directory fuzz

# Fuzz config.Load (FUZZTIME, default 30s). A crasher is written to
# config/testdata/fuzz/FuzzLoad: fix it and keep the file as a regression seed.
FUZZTIME ?= 30s
.PHONY: fuzz
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzLoad$$' -fuzztime $(FUZZTIME) ./config/

vet:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

services:
	scripts/services.sh

# Install the binary, the systemd unit and an example configuration
# (an existing /etc/electd is left alone). DESTDIR works as usual.
PREFIX ?= /usr/local
install: build
	install -D -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/electd
	install -D -m 0644 dist/systemd/electd.service $(DESTDIR)/etc/systemd/system/electd.service
	install -D -m 0644 docs/operations.md $(DESTDIR)$(PREFIX)/share/doc/electd/operations.md
	@if [ ! -e $(DESTDIR)/etc/electd ]; then \
		install -d -m 0755 $(DESTDIR)/etc/electd && \
		install -m 0644 examples/quickstart.hcl $(DESTDIR)/etc/electd/electd.hcl && \
		echo "installed an example configuration in $(DESTDIR)/etc/electd/electd.hcl"; \
	fi
	@getent passwd electd >/dev/null 2>&1 || [ -n "$(DESTDIR)" ] || \
		useradd --system --home-dir /var/lib/electd --shell /usr/sbin/nologin electd
	@echo "next: systemctl daemon-reload && systemctl enable --now electd"

clean:
	rm -rf bin/ *.db *.db-wal *.db-shm

# The fault-injection suite's long form (docs/reliability.md): 3 agents per
# store, FAULTS_N faults per store (SQLite, PostgreSQL, MySQL, Redis, etcd;
# empty FAULTS_STORES is all five, pick some with FAULTS_STORES=redis,etcd), a
# summary table appended to bin/faults-summary.md. `make test` runs the short form.
FAULTS_N ?= 200
FAULTS_STORES ?=
.PHONY: test-faults
test-faults: services
	@mkdir -p bin
	$(GO) test -count=1 -timeout 4h -v -run TestFaults ./faults/ -faults.long -faults.n $(FAULTS_N) \
		-faults.stores "$(FAULTS_STORES)" -faults.summary $(CURDIR)/bin/faults-summary.md

# Benchmarks (docs/benchmarks.md; the program is bench/, outside cmd/ so that
# its anchor libraries stay out of the product binary): failover and handover
# on every provider, crash failover at retry_every 1s too, the anchors
# (etcdctl lock, etcd Election, client-go, redsync) and one agent with 10,000
# jobs. Pick with e.g. BENCHFLAGS="-suites failover -providers postgres,etcd -runs 30"
# or BENCHFLAGS="-suites scale -scale-stores sqlite -scale-jobs 1000".
BENCHFLAGS ?=
BENCHOUT   ?= bin/bench-results.md
.PHONY: bench
bench: services build
	$(GO) build -o bin/electd-bench ./bench
	bin/electd-bench -electd $(BIN) -out $(BENCHOUT) $(BENCHFLAGS)
