# sftpgate: an HTTP-to-SFTP gateway run as a Kubernetes operator.
# Layout and targets follow the kubebuilder v4 scaffold.

# Tool and control-plane versions, pinned: newer releases need a newer Go.
CONTROLLER_TOOLS_VERSION ?= v0.23.0
GOLANGCI_LINT_VERSION ?= v2.15.0
# rclone, the peer make bench compares transfers with.
RCLONE_VERSION ?= v1.76.0
# versitygw, the S3 server the tests start (its POSIX backend, on loopback).
VERSITYGW_VERSION ?= v1.8.0
# promtool, which tests the alerting rules (Prometheus 3.16's module).
PROMTOOL_VERSION ?= v0.316.0
K8S_VERSION ?= 1.37.0
ETCD_VERSION ?= 3.6.16

LOCALBIN ?= $(CURDIR)/bin
CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen-$(CONTROLLER_TOOLS_VERSION)
GOLANGCI_LINT ?= $(LOCALBIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)
RCLONE ?= $(LOCALBIN)/rclone-$(RCLONE_VERSION)
VERSITYGW ?= $(LOCALBIN)/versitygw-$(VERSITYGW_VERSION)
PROMTOOL ?= $(LOCALBIN)/promtool-$(PROMTOOL_VERSION)
# The control plane takes minutes to build: it is kept under the user's
# cache directory (as Go's os.UserCacheDir), keyed by its versions, where
# every clone of the project on the machine finds it.
SFTPGATE_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/sftpgate
ENVTEST_ASSETS ?= $(SFTPGATE_CACHE)/k8s/$(K8S_VERSION)-etcd$(ETCD_VERSION)

# Arguments of sftpgate-dev under `make run` (e.g. RUN_ARGS=--fresh).
RUN_ARGS ?=

SHELL = /usr/bin/env bash -o pipefail
.SHELLFLAGS = -ec

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: controller-gen ## Generate the CRDs and the RBAC roles of the manager, web UI, gateway and worker from the markers.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd paths="./api/...;./controllers/..." output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=webui-role paths="./webui/..." output:rbac:artifacts:config=config/rbac/webui
	$(CONTROLLER_GEN) rbac:roleName=gateway-role paths="./gateway" output:rbac:artifacts:config=config/rbac/gateway
	$(CONTROLLER_GEN) rbac:roleName=worker-role paths="./worker" output:rbac:artifacts:config=config/rbac/worker

.PHONY: generate
generate: controller-gen ## Generate the DeepCopy methods of the API types.
	$(CONTROLLER_GEN) object paths="./api/..."

.PHONY: verify-generated
verify-generated: controller-gen ## Fail if the committed generated files are stale (and regenerate them).
	CONTROLLER_GEN=$(CONTROLLER_GEN) hack/verify-generated.sh

.PHONY: fmt
fmt: ## Format the Go code.
	go fmt ./...

.PHONY: fmt-check
fmt-check: ## Fail if gofmt would change a file.
	@files=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './bin/*')); \
	if [ -n "$$files" ]; then echo "gofmt would change: $$files (run make fmt)"; exit 1; fi

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

.PHONY: lint
lint: golangci-lint ## Run golangci-lint (config in .golangci.yml).
	$(GOLANGCI_LINT) run ./...

# The packages of make test: all but the benchmark, soak and chaos runs,
# which have targets of their own. The longest start first: go test runs
# two at a time in the order given, and one that started last would run
# on alone at the end.
TEST_FIRST = worker test/e2e/tenancy test/e2e/faults gateway test/e2e/upgrade test/e2e/quickstart
TEST_PACKAGES = $$( (printf './%s\n' $(TEST_FIRST); go list -f '{{.Dir}}' ./... | sed "s|^$(CURDIR)|.|") | \
	grep -v -e '/hack/bench$$' -e '/test/chaos$$' | awk '!seen[$$0]++')

# How many of a package's parallel tests run at once. Most wait for a
# server, a poll (a watch's is 5s at least) or a process, not for a core:
# the default, one per core, would leave two cores idle for minutes.
TEST_PARALLEL ?= 6

.PHONY: test
# The tests that run components as processes (test/e2e, and the manager
# beside a component's tests) share one build of the binary.
test: require-root test-prereqs verify-generated fmt-check vet lint envtest $(VERSITYGW) $(PROMTOOL) build ## Run every check and test against a real kube-apiserver, etcd, sshd and S3 server.
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) SFTPGATE_VERSITYGW=$(VERSITYGW) SFTPGATE_PROMTOOL=$(PROMTOOL) SFTPGATE_BINARY=$(LOCALBIN)/sftpgate go test -race -parallel=$(TEST_PARALLEL) $(TEST_PACKAGES) -count=1

# The tests start their own sshd, which logs in as a dedicated user: only
# root can do that. Without it they would not run, and a test that did not
# run is not a pass.
.PHONY: require-root
require-root:
	@if [ "$$(id -u)" != 0 ]; then \
	  echo "make test needs root: its sshd logs in as the test user sftpgate-test (DEVELOPMENT.md). Run: sudo make test" >&2; exit 1; fi

.PHONY: bench
# The server's files live in memory (/dev/shm, where there is one): the
# bench compares the gateway with a direct client, not the disk's writeback.
bench: build envtest $(RCLONE) $(VERSITYGW) ## Compare the gateway with a direct SFTP client, and transfers with rclone, on real sshd and S3 (prints tables).
	hack/test-prereqs.sh bench
	TMPDIR=$$( [ -d /dev/shm ] && echo /dev/shm || echo $${TMPDIR:-/tmp} ) \
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) SFTPGATE_BENCH_BINARY=$(LOCALBIN)/sftpgate SFTPGATE_BINARY=$(LOCALBIN)/sftpgate SFTPGATE_BENCH_RCLONE=$(RCLONE) SFTPGATE_VERSITYGW=$(VERSITYGW) \
		go test ./hack/bench/ -run '^TestBenchmark' -count=1 -v -timeout 120m

# How long make soak runs, and how often it restarts sshd.
SOAK ?= 10m
SOAK_RESTART_EVERY ?= 1m
.PHONY: soak
soak: build envtest ## Drive the gateway with mixed commands at concurrency 64 against an sshd restarted every minute (SOAK=10m); checks every answer.
	hack/test-prereqs.sh
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) SFTPGATE_BENCH_BINARY=$(LOCALBIN)/sftpgate SFTPGATE_BINARY=$(LOCALBIN)/sftpgate \
		go test ./hack/bench/ -run TestSoak -count=1 -v -timeout 0 -args -soak=$(SOAK) -soak-restart-every=$(SOAK_RESTART_EVERY)

# How long make chaos runs, and the seed of its faults' schedule and load
# (0: a new one, printed, to replay with CHAOS_SEED=<it>).
CHAOS ?= 10m
CHAOS_SEED ?= 0
.PHONY: chaos
chaos: require-root build envtest $(VERSITYGW) ## Run the whole system, a process per replica, under seeded faults with several tenants' load (CHAOS=10m, CHAOS_SEED); checks nothing is lost.
	hack/test-prereqs.sh
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) SFTPGATE_BINARY=$(LOCALBIN)/sftpgate SFTPGATE_VERSITYGW=$(VERSITYGW) \
		go test ./test/chaos/ -run '^TestChaos$$' -count=1 -v -timeout 0 -args -chaos=$(CHAOS) -chaos-seed=$(CHAOS_SEED)

.PHONY: screenshots
screenshots: require-root build envtest $(VERSITYGW) ## Retake docs/screenshots: every page the browser tests check, at a laptop's and a phone's size.
	hack/test-prereqs.sh
	rm -f docs/screenshots/*.png docs/screenshots/*.jpg
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) SFTPGATE_VERSITYGW=$(VERSITYGW) SFTPGATE_BINARY=$(LOCALBIN)/sftpgate SFTPGATE_SCREENSHOTS=$(CURDIR)/docs/screenshots \
		go test ./webui/ ./test/e2e/tenancy/ -count=1

FUZZTIME ?= 30s
.PHONY: fuzz
fuzz: ## Run every fuzz test of the repository, one after another, each for FUZZTIME (default 30s).
	FUZZTIME=$(FUZZTIME) hack/fuzz.sh

##@ Build

.PHONY: build
build: ## Build the sftpgate binary into bin/, as the Dockerfile does.
	CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o $(LOCALBIN)/sftpgate .

.PHONY: krew-archive
krew-archive: build ## Pack the binary as this platform's krew archive, with a manifest naming its SHA-256 (bin/krew).
	hack/krew/archive.sh

.PHONY: build-dev
build-dev: ## Build sftpgate-dev, the local system of make run, into bin/.
	@echo "Building sftpgate-dev (a minute or two the first time)"
	go build -o $(LOCALBIN)/sftpgate-dev ./hack/sftpgate-dev

.PHONY: run
run: build-dev envtest $(VERSITYGW) ## Run the whole system on this machine, no cluster needed: control plane, manager, gateway, web UI, demo SFTP and S3 servers.
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) SFTPGATE_VERSITYGW=$(VERSITYGW) $(LOCALBIN)/sftpgate-dev $(RUN_ARGS)

.PHONY: run-manager
run-manager: manifests generate build ## Run the manager against the cluster of the current kubeconfig (after make install).
	$(LOCALBIN)/sftpgate manager

##@ Deployment

.PHONY: build-installer
build-installer: manifests ## Write dist/install.yaml: everything config/default installs, in one file.
	@mkdir -p dist
	go run ./hack/render config/default > dist/install.yaml

.PHONY: chart
chart: manifests ## Write the Helm chart's CRDs, templates and values (charts/sftpgate) from config/default and config/prometheus.
	go run ./hack/chart

.PHONY: deploy
deploy: manifests ## Install sftpgate into the cluster of the current kubeconfig (config/default).
	kubectl apply --server-side -k config/default

.PHONY: undeploy
undeploy: ## Remove what deploy installed.
	kubectl delete --ignore-not-found -k config/default

.PHONY: install
install: manifests ## Install the CRDs into the cluster of the current kubeconfig.
	kubectl apply --server-side -k config/crd

.PHONY: uninstall
uninstall: manifests ## Remove the CRDs (and with them every SftpConnection) from the cluster.
	kubectl delete --ignore-not-found -k config/crd

##@ Dependencies

.PHONY: test-prereqs
test-prereqs: ## Install the system packages the tests need (OpenSSH server, Chromium).
	hack/test-prereqs.sh

.PHONY: envtest
envtest: $(ENVTEST_ASSETS)/kube-apiserver $(ENVTEST_ASSETS)/etcd ## Build kube-apiserver and etcd for the tests (minutes, once per machine).
$(ENVTEST_ASSETS)/kube-apiserver $(ENVTEST_ASSETS)/etcd &:
	K8S_VERSION=$(K8S_VERSION) ETCD_VERSION=$(ETCD_VERSION) hack/control-plane.sh $(ENVTEST_ASSETS)

.PHONY: controller-gen
controller-gen: $(CONTROLLER_GEN) ## Install controller-gen into bin/.
$(CONTROLLER_GEN):
	$(call go-install-tool,$(CONTROLLER_GEN),sigs.k8s.io/controller-tools/cmd/controller-gen,$(CONTROLLER_TOOLS_VERSION))

.PHONY: golangci-lint
golangci-lint: $(GOLANGCI_LINT) ## Install golangci-lint into bin/.
$(GOLANGCI_LINT):
	$(call go-install-tool,$(GOLANGCI_LINT),github.com/golangci/golangci-lint/v2/cmd/golangci-lint,$(GOLANGCI_LINT_VERSION))

$(RCLONE):
	$(call go-install-tool,$(RCLONE),github.com/rclone/rclone,$(RCLONE_VERSION))

.PHONY: versitygw
versitygw: $(VERSITYGW) ## Install versitygw, the tests' S3 server, into bin/.
$(VERSITYGW):
	$(call go-install-tool,$(VERSITYGW),github.com/versity/versitygw/cmd/versitygw,$(VERSITYGW_VERSION))

.PHONY: promtool
promtool: $(PROMTOOL) ## Install promtool, which tests the alerting rules, into bin/.
$(PROMTOOL):
	$(call go-install-tool,$(PROMTOOL),github.com/prometheus/prometheus/cmd/promtool,$(PROMTOOL_VERSION))

# go-install-tool installs a Go package at a version into bin/ under a
# versioned name, so that changing a version installs it afresh.
# $1: target path, $2: package, $3: version.
define go-install-tool
@[ -f "$(1)" ] || { \
set -e; \
echo "Installing $(2)@$(3)"; \
rm -f "$(1)"; \
GOBIN="$(LOCALBIN)" go install "$(2)@$(3)"; \
mv "$(LOCALBIN)/$$(basename "$(2)")" "$(1)"; \
}
endef
