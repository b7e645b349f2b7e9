# Tollgate. `make run` starts an embedded Temporal server plus the worker;
# `make test` is what CI runs.

GO       ?= go
DATA     ?= .tollgate
WORKSPACE ?= workspace
# AGENTS names an agents file for the worker (--agents); SCRIPTS a
# directory its scripted: models may read (TOLLGATE_SCRIPTS_DIR). The
# offline triage team: make run AGENTS=examples/triage/dev/agents.yaml SCRIPTS=examples/triage/dev
AGENTS   ?=
SCRIPTS  ?=
# POLICY: an approval rules file for the worker (make run POLICY=examples/policy.yaml);
# MCP an MCP servers file (TOLLGATE_MCP_CONFIG); DEV_KEYS more dev gateway
# keys of people with groups (--dev-keys lena:leads,lars:leads,eve)
POLICY   ?=
MCP      ?=
DEV_KEYS ?=

.PHONY: run test lint bench histories compose-up compose-down clean test-cluster test-mcp

## run: embedded Temporal server (SQLite in $(DATA)) and the worker;
## AGENTS=FILE and SCRIPTS=DIR add named agents and their scripts,
## POLICY=FILE approval rules, MCP=FILE MCP servers, DEV_KEYS=LIST keys
run: $(WORKSPACE)/notes.txt
	$(GO) build -o bin/worker ./worker
	exec env $(if $(SCRIPTS),TOLLGATE_SCRIPTS_DIR=$(SCRIPTS)) $(if $(MCP),TOLLGATE_MCP_CONFIG=$(MCP)) bin/worker --dev --die-with-parent --data $(DATA) --workspace $(WORKSPACE) $(if $(AGENTS),--agents $(AGENTS)) $(if $(POLICY),--policy $(POLICY)) $(if $(DEV_KEYS),--dev-keys $(DEV_KEYS))

# The demo turn summarises notes.txt; give a new workspace one to read.
$(WORKSPACE)/notes.txt:
	mkdir -p $(WORKSPACE)
	cp examples/notes.txt $@

## test: formatting, vet, workflowcheck, then every test; then the
## examples/refunds and examples/triage modules, which prove the public
## API from outside
test: lint
	$(GO) test -timeout 30m ./...
	cd examples/refunds && $(GO) vet ./... && $(GO) test ./...
	cd examples/triage && $(GO) vet ./... && $(GO) test ./...

## lint: gofmt, go vet and workflowcheck on the workflows
lint:
	@unformatted="$$(gofmt -l .)"; if [ -n "$$unformatted" ]; then echo "gofmt wants to change:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) tool workflowcheck -config workflows/workflowcheck.config.yaml ./workflows/...

## bench: Tollgate against bare Temporal on one in-process server; the
## table goes to stdout and docs/bench-results.md (BENCHFLAGS=-long parks 10,000)
bench:
	$(GO) run ./cmd/bench -out docs/bench-results.md $(BENCHFLAGS)

## histories: re-record the replay corpus in workflows/testdata/histories
histories:
	$(GO) test -count=1 ./internal/tests/e2e/ -record

## test-cluster: the production-shaped test: PostgreSQL, the Temporal
## server binary, SeaweedFS (S3), two worker processes, killed and
## restarted, and live events through NATS to two gateways; the first
## run builds the server, its CLI, SeaweedFS and nats-server
test-cluster:
	GO="$(GO)" ./internal/tests/cluster/bins.sh
	TOLLGATE_CLUSTER=1 $(GO) test -count=1 -timeout 20m -v -run '^TestCluster$$' ./internal/tests/cluster/

## test-mcp: the MCP conformance suite's client scenarios against
## Tollgate's MCP client (Node 22 and the suite come from npm, into the
## user's cache); cmd/mcp-conformance/expected-failures.yml lists the
## scenarios known to fail
test-mcp:
	GO="$(GO)" ./cmd/mcp-conformance/run.sh

## compose-up / compose-down: Postgres, Temporal, its UI and the worker
compose-up:
	docker compose up -d --build

compose-down:
	docker compose down

clean:
	rm -rf bin
