# sandgate — see README.md. `make help` lists the targets.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

export GOTOOLCHAIN := local

BIN := $(CURDIR)/bin
CONTROLLER_TOOLS_VERSION ?= v0.23.0
GOLANGCI_LINT_VERSION ?= v2.6.2
CONTROLLER_GEN := $(BIN)/controller-gen-$(CONTROLLER_TOOLS_VERSION)
GOLANGCI_LINT := $(BIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)

# Control-plane binaries (kube-apiserver, etcd, kubectl, kube-scheduler,
# kube-controller-manager, kwok), built from the Go module proxy and cached by version.
K8S_VERSION ?= v1.37.1
KUBEBUILDER_ASSETS := $(BIN)/k8s/$(K8S_VERSION)
export KUBEBUILDER_ASSETS

TEST_TIMEOUT ?= 40m
UNIT_TEST_TIMEOUT ?= 5m
GO_TEST_FLAGS ?=
# Integration suites never come from Go's test cache: they read config/ and build or start the
# operator, kubectl and the control plane as processes of their own, often from TestMain, and
# the cache sees none of that, so an edit to a manifest or to the operator left them "(cached)".
INTEGRATION_TEST_FLAGS ?= -count=1
# Test files that need the local control plane (or another binary `make tools` builds) start
# with `//go:build integration`: `make test-unit` leaves them out, `make test-integration` runs
# the packages that have them.
INTEGRATION_TAG := integration
# The harness is a module of its own (test/go.mod, with a replace of this one), so that the
# operator's go.mod lists only what the operator and its unit tests need. test/sdk and test/helm
# are modules of their own again, inside it: the public SDK and Helm's library are theirs alone.
TEST_MODULE := test
NESTED_MODULES := $(TEST_MODULE) test/sdk test/helm
# The fault soak runs alone, after the others: it checks the lease fence against the audit log,
# and beside the other packages' clusters on two cores its API server fell a minute behind, so
# that writes the fence had let through landed after the lease (the residual window of
# docs/soak.md). Alone it passes.
SOAK_PKG := ./soak
# The packages of the test module with integration tests, the soak's aside: relative to test/,
# where the recipes that use it run.
INTEGRATION_PKGS = $$(grep -rl --include='*_test.go' '^//go:build $(INTEGRATION_TAG)$$' . | xargs -r -n1 dirname | sort -u | grep -v -E '^\./(sdk|helm)(/|$$)' | grep -v -x '$(SOAK_PKG)')
ARGS ?=

# Files `make manifests generate` writes; `make test` fails when they are stale.
GENERATED = $$(find api -name zz_generated.deepcopy.go; find config/crd/bases config/rbac/role.yaml config/webhook -name '*.yaml' 2>/dev/null | grep -v kustomization | sort)

##@ General

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-16s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs, RBAC and webhook configurations under config/.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd:maxDescLen=0 webhook paths="./..." \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac \
		output:webhook:artifacts:config=config/webhook

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy functions of the API types.
	$(CONTROLLER_GEN) object paths="./api/..."

.PHONY: verify-generated
verify-generated: ## Fail when committed generated files differ from what the generators write.
	@before="$$(cat $(GENERATED) | sha256sum)"; \
	$(MAKE) --no-print-directory manifests generate >/dev/null; \
	after="$$(cat $(GENERATED) | sha256sum)"; \
	if [ "$$before" != "$$after" ]; then \
		echo "generated files were stale and have been regenerated; review and commit them:"; \
		git status --short -- api config 2>/dev/null || true; exit 1; \
	fi; echo "generated files are up to date"

.PHONY: fmt
fmt: ## Run gofmt.
	gofmt -w $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './bin/*')

.PHONY: verify-fmt
verify-fmt: ## Fail when a Go file is not gofmt-formatted.
	@files="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './bin/*'))"; \
	if [ -n "$$files" ]; then echo "not gofmt-formatted (run make fmt):"; echo "$$files"; exit 1; fi

.PHONY: verify-mod
verify-mod: ## Fail when go.mod or go.sum is not tidy (the nested modules' too).
	@go mod tidy -diff >/dev/null || { echo "go.mod/go.sum are not tidy: run go mod tidy"; go mod tidy -diff; exit 1; }
	@for m in $(NESTED_MODULES); do (cd $$m && GOWORK=off go mod tidy -diff >/dev/null) || { echo "$$m/go.mod/go.sum are not tidy: run go mod tidy in $$m"; exit 1; }; done

# Import boundaries are linter rules (depguard in .golangci.yml) and module boundaries (the
# operator's module cannot import test/). What a linter cannot say is checked here.
MODULE := github.com/sandgate-dev/sandgate

.PHONY: verify-deps
verify-deps: ## Fail when cmd/ holds a library or the Dockerfile does not copy a directory cmd/sandgate links.
	@failed=0; \
	libs="$$(go list -f '{{.Name}} {{.ImportPath}}' ./cmd/... | grep -v '^main ' || true)"; \
	if [ -n "$$libs" ]; then echo "cmd/ holds commands only (package main); move these libraries out of cmd/:"; echo "$$libs"; failed=1; fi; \
	deps="$$(go list -deps -f '{{.ImportPath}}' ./cmd/sandgate)"; \
	for dir in $$(sed -n 's|^$(MODULE)/\([^/]*\).*|\1|p' <<<"$$deps" | sort -u); do \
		grep -qE "^COPY $$dir/ " Dockerfile || { echo "Dockerfile: cmd/sandgate links $(MODULE)/$$dir/... but the image build does not COPY $$dir/"; failed=1; }; \
	done; \
	[ "$$failed" = 0 ] && echo "cmd/ holds commands only; the Dockerfile copies what cmd/sandgate needs"

.PHONY: vet
vet: ## Run go vet, on integration test files too (the nested modules' too).
	go vet -tags $(INTEGRATION_TAG) ./...
	@for m in $(NESTED_MODULES); do echo "(cd $$m && go vet -tags $(INTEGRATION_TAG) ./...)"; (cd $$m && GOWORK=off go vet -tags $(INTEGRATION_TAG) ./...); done

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint (on the nested modules too).
	$(GOLANGCI_LINT) run ./...
	@for m in $(NESTED_MODULES); do echo "(cd $$m && golangci-lint run ./...)"; (cd $$m && GOWORK=off $(GOLANGCI_LINT) run --config $(CURDIR)/.golangci.yml ./...); done

.PHONY: tools
tools: ## Build the local control plane binaries into bin/k8s/<version>, cert-manager's controllers into bin/cert-manager/<version> and the public sandbox-router into bin/agent-sandbox/<version> (cached); print the control plane's dir.
	@hack/install-cert-manager.sh $(BIN)/cert-manager >/dev/null
	@hack/install-sandbox-router.sh $(BIN)/agent-sandbox >/dev/null
	@K8S_VERSION=$(K8S_VERSION) hack/install-control-plane.sh $(BIN)/k8s

.PHONY: test
test: verify-generated verify-fmt verify-mod verify-deps vet lint test-unit test-integration test-sdk test-helm ## What CI runs: every check, lint, unit and integration tests.

.PHONY: test-unit
test-unit: ## Unit tests: no control plane, no `make tools`: the operator's module, then the harness's.
	env -u KUBEBUILDER_ASSETS go test ./... -timeout $(UNIT_TEST_TIMEOUT) $(GO_TEST_FLAGS)
	cd $(TEST_MODULE) && env -u KUBEBUILDER_ASSETS GOWORK=off go test ./... -timeout $(UNIT_TEST_TIMEOUT) $(GO_TEST_FLAGS)

.PHONY: test-integration
test-integration: tools ## Integration tests (build tag integration) against local control planes.
	@echo "KUBEBUILDER_ASSETS=$(KUBEBUILDER_ASSETS)"
	cd $(TEST_MODULE) && GOWORK=off go test -tags $(INTEGRATION_TAG) -timeout $(TEST_TIMEOUT) $(INTEGRATION_TEST_FLAGS) $(GO_TEST_FLAGS) $(INTEGRATION_PKGS)
	cd $(TEST_MODULE) && GOWORK=off go test -tags $(INTEGRATION_TAG) -timeout $(TEST_TIMEOUT) $(INTEGRATION_TEST_FLAGS) $(GO_TEST_FLAGS) $(SOAK_PKG)

.PHONY: test-sdk
test-sdk: tools ## The public SDK and sandbox-router against sandgate (test/sdk, own module, own network namespace; needs root).
	cd test/sdk && GOWORK=off go test -tags $(INTEGRATION_TAG) -timeout $(TEST_TIMEOUT) $(INTEGRATION_TEST_FLAGS) $(GO_TEST_FLAGS) ./...

.PHONY: test-helm
test-helm: tools ## The Helm chart (config/helm/sandgate): rendered with Helm's library and compared with config/default, then installed on a local control plane (test/helm, own module).
	cd test/helm && GOWORK=off go test -tags $(INTEGRATION_TAG) -timeout $(TEST_TIMEOUT) $(INTEGRATION_TEST_FLAGS) $(GO_TEST_FLAGS) ./...

##@ Build and run

.PHONY: build
build: ## Build the operator (cmd/) and the development commands (test/cmd/) into bin/.
	go build -o $(BIN)/ ./cmd/...
	cd $(TEST_MODULE) && GOWORK=off go build -o $(BIN)/ ./cmd/...

.PHONY: dev-cluster
dev-cluster: tools ## Run a local control plane with simulated nodes until Ctrl-C (ARGS=... for flags).
	cd $(TEST_MODULE) && GOWORK=off go build -o $(BIN)/sandgate-dev ./cmd/sandgate-dev
	$(BIN)/sandgate-dev $(ARGS)

.PHONY: demo
demo: tools ## The operator's main job on a local control plane, until Ctrl-C (ARGS=--once exits after the table).
	cd $(TEST_MODULE) && GOWORK=off go build -o $(BIN)/sandgate-demo ./cmd/sandgate-demo
	$(BIN)/sandgate-demo $(ARGS)

.PHONY: bench
SCENARIOS ?= all
bench: tools ## Run the load scenarios, each against its floor, and write docs/performance.md (SCENARIOS=burst-100 runs one; ARGS=--rounds 3 and other sandgate-bench flags).
	cd $(TEST_MODULE) && GOWORK=off go build -o $(BIN)/sandgate-bench ./cmd/sandgate-bench
	$(BIN)/sandgate-bench --scenarios $(SCENARIOS) --out docs/performance.md --results-dir $(BIN)/bench $(ARGS)

.PHONY: soak
soak: tools ## Fault soak: two replicas, 8 claims/s for 10 minutes, every fault 3 times, then the checker (ARGS=--short, --seed N, --faults ..., see --help).
	cd $(TEST_MODULE) && GOWORK=off go build -o $(BIN)/sandgate-soak ./cmd/sandgate-soak
	$(BIN)/sandgate-soak $(ARGS)

##@ Tool binaries

$(CONTROLLER_GEN):
	@mkdir -p $(BIN)
	GOBIN=$(BIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)
	mv $(BIN)/controller-gen $@

$(GOLANGCI_LINT):
	@mkdir -p $(BIN)
	GOBIN=$(BIN) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(BIN)/golangci-lint $@
