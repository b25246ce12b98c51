# electd — the two commands a newcomer needs are `make run` and `make test`.
GO       ?= go
VERSION  ?= $(shell scripts/version.sh 2>/dev/null || echo 0.0.0-dev+unknown)
COMMIT   ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS  := -X main.version=$(VERSION) -X main.commit=$(COMMIT)
BIN      := bin/electd
# The supervisor every command runs under, built beside $(BIN).
SHIM      = $(dir $(BIN))electd-shim
CONFIG   ?= examples/quickstart.hcl
# Three test packages at once on any machine: most of the suite waits on
# stores and on agents' timers, and two at a time left the 2-core machine
# it was measured on half idle (load average 1.3 to 2.7).
TESTFLAGS ?= -count=1 -timeout 20m -p 3

.PHONY: all build run check test test-short test-long vet services install uninstall deb rpm packages clean

all: build

# BUILDFLAGS: more `go build` flags (`make deb` adds -trimpath).
BUILDFLAGS ?=
build:
	$(GO) build $(BUILDFLAGS) -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/electd
	$(GO) build $(BUILDFLAGS) -ldflags "$(LDFLAGS)" -o $(SHIM) ./cmd/electd-shim

# The quickstart agent on the embedded SQLite default: no server to install.
# Start more in other terminals with `make run` and watch failover.
run: build
	$(BIN) run -config $(CONFIG)

# Each example is a complete configuration of its own, checked as CI sees it:
# without the production environment (env() values are unknown).
check: build
	@for f in examples/*.hcl; do echo "== $$f"; $(BIN) check -no-env -config $$f || exit 1; done

# Everything, from a fresh clone: starts the stores the tests use, then vets and tests.
# The fault suites run in their short forms (test-faults and test-clusters run the long ones).
# The longest packages come first: go test starts packages in the order given
# (-p of them at once), and one started last would run on alone at the end.
LONGTESTS = ./systest/ ./faults/ ./providers/etcd/ ./agent/
test: services vet
	$(GO) test $(TESTFLAGS) $(LONGTESTS) ./...
	@$(MAKE) --no-print-directory fuzz FUZZTIME=$(TESTFUZZTIME)

# make test's fuzzing: a smoke run over the corpus and a little more; `make
# fuzz` alone fuzzes for FUZZTIME. A count, not a duration: Go 1.26's fuzz
# coordinator can fail a run with a bare "context deadline exceeded" at the
# end of a -fuzztime duration when a worker is mid-input (golang/go#75804,
# fixed in 1.27); a count has no deadline. 3000 inputs take 10-30 s here.
TESTFUZZTIME ?= 3000x

# The fast suite for a contributor's edit-test loop (under a minute): every
# test that needs no store server and no electd agent. -short skips the rest
# (the store-starting helpers in internal/teststore and internal/cluster say
# so), and the packages whose every test needs them (systest, faults' suite,
# the Azurite and Datastore ones) run nothing.
test-short:
	$(GO) test -short -count=1 ./...

# Everything in full: make test, then the fault suite's and the cluster
# suite's long forms (hours; test-clusters needs root).
test-long: test test-faults test-clusters

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

# Install the binary and the supervisor of its commands (electd-shim, in
# SHIMDIR), the systemd unit, the man page electd(1), the bash and zsh
# completions, the documentation with one example configuration per store,
# /etc/default/electd, and an /etc/electd whose one file declares no job (so
# the service starts and runs nothing until you write a job). An existing
# /etc/default/electd or /etc/electd is left alone. DESTDIR works as usual;
# the unit and the files that name a path get PREFIX's paths.
PREFIX      ?= /usr/local
BINDIR      ?= $(PREFIX)/bin
DOCDIR      ?= $(PREFIX)/share/doc/electd
MANDIR      ?= $(PREFIX)/share/man
# electd-shim: electd looks for it beside itself, then in ../lib/electd/.
SHIMDIR     ?= $(PREFIX)/lib/electd
# Where systemd looks for a vendor's units (/etc/systemd/system is the admin's).
UNITDIR     ?= $(if $(filter /usr,$(PREFIX)),/lib/systemd/system,$(PREFIX)/lib/systemd/system)
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR  ?= $(if $(filter /usr,$(PREFIX)),/usr/share/zsh/vendor-completions,$(PREFIX)/share/zsh/site-functions)
# The man page's date: the last commit's, so that two builds give one page.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null)
# dist/ names the paths of the default PREFIX, /usr/local.
SUBST = sed -e 's|/usr/local/bin/electd|$(BINDIR)/electd|g' -e 's|/usr/local/share/doc/electd|$(DOCDIR)|g'
install: build
	install -D -m 0755 $(BIN) $(DESTDIR)$(BINDIR)/electd
	install -D -m 0755 $(SHIM) $(DESTDIR)$(SHIMDIR)/electd-shim
	install -d $(DESTDIR)$(UNITDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR) \
		$(DESTDIR)$(DOCDIR)/docs/providers $(DESTDIR)$(DOCDIR)/examples
	$(SUBST) dist/systemd/electd.service > $(DESTDIR)$(UNITDIR)/electd.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/electd.service
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(BIN) man -docdir $(DOCDIR) > $(BIN).1
	gzip -9n < $(BIN).1 > $(DESTDIR)$(MANDIR)/man1/electd.1.gz
	$(BIN) completion bash > $(DESTDIR)$(BASHCOMPDIR)/electd
	$(BIN) completion zsh > $(DESTDIR)$(ZSHCOMPDIR)/_electd
	chmod 0644 $(DESTDIR)$(MANDIR)/man1/electd.1.gz $(DESTDIR)$(BASHCOMPDIR)/electd $(DESTDIR)$(ZSHCOMPDIR)/_electd
	install -m 0644 README.md CHANGELOG.md $(DESTDIR)$(DOCDIR)/
	install -m 0644 docs/*.md $(DESTDIR)$(DOCDIR)/docs/
	install -m 0644 docs/providers/*.md $(DESTDIR)$(DOCDIR)/docs/providers/
	install -m 0644 examples/*.hcl $(DESTDIR)$(DOCDIR)/examples/
	install -D -m 0644 dist/prometheus/electd-alerts.yml $(DESTDIR)$(DOCDIR)/prometheus/electd-alerts.yml
	install -D -m 0644 dist/grafana/electd.json $(DESTDIR)$(DOCDIR)/grafana/electd.json
	@if [ ! -e $(DESTDIR)/etc/default/electd ]; then \
		install -D -m 0600 dist/default/electd $(DESTDIR)/etc/default/electd && \
		echo "installed $(DESTDIR)/etc/default/electd (the service's environment, mode 0600)"; \
	fi
	@if [ ! -e $(DESTDIR)/etc/electd ]; then \
		install -d -m 0755 $(DESTDIR)/etc/electd && \
		$(SUBST) dist/electd/electd.hcl > $(DESTDIR)/etc/electd/electd.hcl && \
		chmod 0644 $(DESTDIR)/etc/electd/electd.hcl && \
		echo "installed $(DESTDIR)/etc/electd/electd.hcl: it declares no job; write yours next to it"; \
	fi
	@getent passwd electd >/dev/null 2>&1 || [ -n "$(DESTDIR)" ] || \
		useradd --system --user-group --home-dir /var/lib/electd --no-create-home --shell /usr/sbin/nologin electd
	@echo "next: write a job in /etc/electd, electd check, systemctl daemon-reload && systemctl enable --now electd"

# Removes what install installed, except /etc/electd, /etc/default/electd,
# the user and /var/lib/electd.
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/electd $(DESTDIR)$(SHIMDIR)/electd-shim $(DESTDIR)$(UNITDIR)/electd.service $(DESTDIR)$(MANDIR)/man1/electd.1.gz \
		$(DESTDIR)$(BASHCOMPDIR)/electd $(DESTDIR)$(ZSHCOMPDIR)/_electd
	rm -rf $(DESTDIR)$(DOCDIR)

# The packages $(DEBDIR)/electd_<version>-1_<arch>.deb and
# $(DEBDIR)/electd-<version>-1.<arch>.rpm, from the one description
# dist/nfpm.yaml (scripts/package.sh, with goreleaser's nfpm built from
# tools/nfpm): needs Go and a C compiler only. VERSION overrides
# scripts/version.sh's. `scripts/services.sh lintian rpm` installs what
# the package tests use.
DEBDIR ?= bin
deb:
	scripts/package.sh -o $(DEBDIR) deb
rpm:
	scripts/package.sh -o $(DEBDIR) rpm
# Both from one build.
packages:
	scripts/package.sh -o $(DEBDIR) deb rpm

# The container image electd:<version> (dist/container/Dockerfile, built by
# scripts/image.sh with docker, podman or buildah): static binaries on an
# empty base, user 65532, /etc/electd a volume, the API on 8790.
.PHONY: image
image:
	scripts/image.sh

clean:
	rm -rf bin/ *.db *.db-wal *.db-shm

# The fault-injection suite's long form (docs/reliability.md): 3 agents per
# store, FAULTS_N faults per store (SQLite, PostgreSQL, MySQL, Redis, etcd;
# empty FAULTS_STORES is all five, pick some with FAULTS_STORES=redis,etcd), a
# summary table appended to bin/faults-summary.md, one store at a time
# (-parallel 1). `make test` runs the short form, four stores at a time.
FAULTS_N ?= 200
FAULTS_STORES ?=
.PHONY: test-faults
test-faults: services
	@mkdir -p bin
	$(GO) test -count=1 -timeout 4h -v -parallel 1 -run TestFaults ./faults/ -faults.long -faults.n $(FAULTS_N) \
		-faults.stores "$(FAULTS_STORES)" -faults.summary $(CURDIR)/bin/faults-summary.md

# The cluster fault suite's long form (clusterfaults/, docs/reliability.md):
# each store as a cluster of 3 members on 3 network namespaces with an agent
# each, CLUSTERS_ROUNDS rounds of partitions and store-leader kills per store
# (CLUSTERS_STORES=etcd,zookeeper,nats,redlock,postgres,redis picks some). Needs root. `make test`
# runs the short form (one round on etcd).
CLUSTERS_ROUNDS ?= 5
CLUSTERS_STORES ?=
.PHONY: test-clusters
test-clusters: services
	$(GO) test -count=1 -timeout 2h -v -run TestClusters ./clusterfaults/ -clusters.long \
		-clusters.rounds $(CLUSTERS_ROUNDS) -clusters.stores "$(CLUSTERS_STORES)"

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
