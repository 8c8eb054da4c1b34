# devloop — a Kubernetes operator for the inner development loop.
#
#   make dev-up      the main job: a local single-node cluster, the operator from its chart, the sample Ready
#   make test        unit tests and envtest suites (builds the test binaries once); make fuzz: short fuzz runs
#   make e2e         end-to-end on the local cluster; make e2e-gitops: the Flux and OLM cases

K8S_VERSION  ?= 1.37.2
FUZZTIME     ?= 10s

export GOTOOLCHAIN := local
# Everything is built without cgo (the operator, the tests, the Kubernetes
# binaries), so a package they share is compiled once into the build cache.
export CGO_ENABLED := 0
# Some k8s.io modules are missing from the checksum database behind the proxy.
export GONOSUMDB := k8s.io

ASSETS := $(CURDIR)/bin/k8s/v$(K8S_VERSION)
CONTROLLER_GEN := bin/controller-gen
# compile LABEL OUT PACKAGE: go build with a package count every 20 s (a
# cold compile says how far it got instead of minutes of silence).
compile = @hack/with-progress.sh "$(1): compiling, packages" go build -v -o $(2) $(3)

.PHONY: all
all: build

##@ Development

.PHONY: bin/controller-gen bin/olm-tool
bin/controller-gen:
	$(call compile,controller-gen,$@,sigs.k8s.io/controller-tools/cmd/controller-gen)
bin/olm-tool:
	$(call compile,hack/olm,$@,./hack/olm)

.PHONY: generate
generate: bin/controller-gen ## Generate deepcopy code.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...

.PHONY: manifests
manifests: bin/controller-gen ## Generate the CRD and the manager's RBAC from the Go markers.
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=manager-role paths=./controllers/... output:rbac:artifacts:config=config/rbac
	@# The chart installs copies of the generated CRD and rules (test/install checks them).
	cp config/crd/bases/*.yaml charts/devloop/crds/
	cp config/rbac/role.yaml charts/devloop/files/manager-role.yaml

.PHONY: verify-generated
verify-generated: generate manifests bundle catalog ## Fail if generated files are not committed.
	@git diff --exit-code -- api config charts bundle catalog || { echo "generated files are stale: run 'make generate manifests bundle catalog' and commit"; exit 1; }

.PHONY: fmt vet
fmt:
	go fmt ./...
vet:
	go vet ./...

##@ Build

.PHONY: build
build: bin/manager ## Build the operator binary.

.PHONY: bin/manager
bin/manager:
	$(call compile,the operator,bin/manager,./cmd/manager)

.PHONY: build-plugin
build-plugin: bin/kubectl-devloop ## Build the kubectl plugin (put bin/kubectl-devloop on your PATH).

.PHONY: bin/kubectl-devloop
bin/kubectl-devloop:
	CGO_ENABLED=0 go build -o bin/kubectl-devloop ./cmd/kubectl-devloop

##@ Install paths (charts/devloop, config/, bundle/, catalog/)

IMAGE    ?=
INSECURE ?=
TAG      ?= dev

VERSION      ?= 0.1.0
OPM_VERSION  ?= 1.73.0
OPM          := $(CURDIR)/bin/opm/v$(OPM_VERSION)/opm
OLM_PREFIX   ?=

.PHONY: image
image: ## Operator image for linux/amd64+arm64 without Docker: OCI layout bin/image/devloop, or IMAGE=host/repo:tag [INSECURE=1].
	go run ./hack/image -tag $(TAG) $(if $(IMAGE),-image $(IMAGE)) $(if $(INSECURE),-insecure)

.PHONY: bundle
bundle: manifests bin/olm-tool ## OLM registry+v1 bundle/ and config/olm/installer-rbac.yaml from config/ (VERSION=0.1.0).
	bin/olm-tool bundle -version $(VERSION)

.PHONY: catalog
catalog: opm bin/olm-tool ## File-based catalog/ from catalog/semver-template.yaml (opm), then opm validate.
	bin/olm-tool catalog -opm $(OPM)
	$(OPM) validate catalog

.PHONY: olm-images
olm-images: ## Push the bundle and catalog images: OLM_PREFIX=host/path [INSECURE=1].
	go run ./hack/olm images -prefix $(OLM_PREFIX) $(if $(INSECURE),-insecure)

.PHONY: opm
opm: ## Build opm from Go modules (cached under bin/opm/v$(OPM_VERSION)).
	OPM_VERSION=$(OPM_VERSION) hack/opm.sh >/dev/null

##@ Test

.PHONY: test-binaries
test-binaries: ## Build etcd, kube-apiserver and kubectl from Go modules (cached under bin/k8s).
	K8S_VERSION=$(K8S_VERSION) hack/k8s-binaries.sh etcd kube-apiserver kubectl >/dev/null

.PHONY: test
# go vet's full set of checks runs inside go test (-vet=all), beside the
# compiles and the long envtest runs instead of before them; the packages
# without tests are vetted after. go test also runs each fuzz target's seed
# corpus; `make fuzz` explores beyond it (.ci/run runs it). Test binaries
# are linked without symbol tables and DWARF: less link time, and stack
# traces keep their file:line.
# -timeout: go test's default of 10 minutes per test binary is less than
# internal/cli takes on a busy machine, where its tests first compile the
# operator they run (seen: 606 s, timed out in that compile at load 11-14).
test: test-binaries opm ## Run all tests against a real kube-apiserver and etcd, and go vet.
	hack/chromium.sh # the dashboard's browser test drives Debian's chromium
	# internal/cli's tests run the operator binary: built once here, outside
	# go test's timeout, before the packages that share its dependencies.
	go build -ldflags='-s -w' -o bin/test-manager ./cmd/manager
	DEVLOOP_TEST_MANAGER=$(CURDIR)/bin/test-manager KUBEBUILDER_ASSETS=$(ASSETS) hack/go-test.sh -count=1 -vet=all -ldflags='-s -w' -timeout 30m
	go vet $$(go list -f '{{if not (or .TestGoFiles .XTestGoFiles)}}{{.ImportPath}}{{end}}' ./...)

.PHONY: fuzz
fuzz: ## Fuzz the DAG and spec checks beyond their seed corpora (FUZZTIME=10s each).
	go test ./internal/dag -run '^$$' -fuzz FuzzGraph -fuzztime $(FUZZTIME)
	go test ./internal/plan -run '^$$' -fuzz FuzzBuild -fuzztime $(FUZZTIME)

##@ Run

.PHONY: run-local
run-local: build test-binaries ## Control plane + operator + samples; Ctrl-C stops all.
	go run ./hack/localrun $(ARGS)

##@ Local cluster

include hack/cluster/cluster.mk

.PHONY: dev-up dev-down dev-clean
dev-up: cluster-binaries ## The main job: local cluster + registry + operator (from its chart) + the sample, Ready (NODES=2: a second node too).
	$(CLUSTER_SH) up
	$(if $(filter 2,$(NODES)),$(NODE2_SH) up)
	$(call compile,hack/devup,bin/devup,./hack/devup)
	bin/devup $(ARGS)

dev-down: ## Stop the local cluster (state kept; dev-up resumes it).
	$(CLUSTER_SH) down

dev-clean: ## Stop the local cluster and remove all its state.
	$(CLUSTER_SH) clean

.PHONY: e2e e2e-gitops real-projects
# make e2e runs the change-to-serving benchmark with a few changes per path
# (every path still runs and prints its figures; the live path still shows
# that consecutive live updates make no new pod); make bench-serving runs
# the full count the figures in docs/performance.md come from.
BENCH_ITERATIONS ?= 4
BENCH_LIVE_ITERATIONS ?= 12
# make e2e runs on two nodes (hack/cluster/node2.sh, about 15 s and 210 MiB
# more), as the clusters teams share have several: the multi-node cases
# (TestMultiNode*) run with the others, and every other case's builders and
# pods land on either node. E2E_NODES=1 runs on one node (they skip).
E2E_NODES ?= 2
E2E_LONG ?= run
e2e: cluster-binaries ## End-to-end tests on a real local two-node cluster (root), but the Flux, OLM and real-project cases: up, test, down; each case's time (RUN=regexp to select; E2E_NODES=1 for one node).
	hack/chromium.sh # TestUI drives the dashboard in Debian's chromium
	NODES=$(E2E_NODES) DEVLOOP_BENCH_ITERATIONS=$(BENCH_ITERATIONS) DEVLOOP_BENCH_LIVE_ITERATIONS=$(BENCH_LIVE_ITERATIONS) \
	  DEVLOOP_E2E_LONG=$(E2E_LONG) DEVLOOP_E2E_FLUX=skip DEVLOOP_E2E_OLM=skip DEVLOOP_E2E_REAL=skip hack/e2e.sh -timeout 75m $(if $(RUN),-run '$(RUN)')

# What .ci/run runs of make e2e: on one node (make e2e-multinode runs the
# two-node cases), every case but the long ones (longCase in test/e2e: the
# cold compile of a whole tree, the chart live update's cold fixture build,
# the 5-minute outage, Delve's cold build; docs/development.md), and the
# change-to-serving benchmark with 1 change per path and 3 live updates — a
# check that each path works, not a figure. CI must fit in 90 minutes on a
# cold machine.
.PHONY: e2e-ci
e2e-ci: ## make e2e as CI runs it: one node, the long cases skipped, the benchmark with 1 change per path.
	$(MAKE) e2e E2E_NODES=1 E2E_LONG=skip BENCH_ITERATIONS=1 BENCH_LIVE_ITERATIONS=3

.PHONY: bench-serving
bench-serving: ## The change-to-serving benchmark (TestChangeToServingLatency) with its full count: 10 changes per path, 100 live updates in a row: up, test, down.
	$(MAKE) e2e RUN='^TestChangeToServingLatency$$' BENCH_ITERATIONS=10 BENCH_LIVE_ITERATIONS=100

# Only the cases that need two nodes (TestMultiNode*, which make e2e runs
# too), on the local cluster with node 2 (hack/cluster/node2.sh).
.PHONY: e2e-multinode
e2e-multinode: cluster-binaries ## Only the multi-node end-to-end cases on a two-node local cluster (root): up, test, down (RUN=regexp to select).
	NODES=2 DEVLOOP_E2E_FLUX=skip DEVLOOP_E2E_OLM=skip DEVLOOP_E2E_REAL=skip hack/e2e.sh -timeout 40m -run '$(or $(RUN),^TestMultiNode)'

# The two cold compiles of one tree that TestOneCompilePerTree measures
# only for ratios (the largest binary alone; the unit suite with an empty
# cache): a benchmark, not part of make e2e.
.PHONY: bench-onecompile
bench-onecompile: cluster-binaries ## TestOneCompilePerTree with its cold-compile ratios (docs/performance.md) on the local cluster: up, test, down.
	DEVLOOP_E2E_RATIOS=1 hack/e2e.sh -timeout 60m -run '^TestOneCompilePerTree$$'

# The remote-cluster benchmark's laptop (issue 46): the plugin, Tilt and
# the local go build in a network namespace of their own, across a link
# with each direction's rate (tc) and a round trip (hack/link's proxy) to
# the local cluster's API server and registry.
LINK ?= home
.PHONY: link-up link-down link-check bench-tilt
link-up: ## The shaped link to the local cluster: LINK=office (100/100 Mbit/s, 10 ms), home (20 up/100 down, 40 ms) or UP:DOWN:RTT_MS.
	hack/link/link.sh up $(LINK)
	hack/link/link.sh check

link-down: ## Remove the shaped link.
	hack/link/link.sh down

link-check: ## Measure the shaped link's round trip and rates.
	hack/link/link.sh check

# devloop's live update beside Tilt's on the running local cluster (make
# dev-up first; tilt and crane built as docs/performance.md says); across
# the shaped link when it is up (make link-up).
BENCH_PROGRAM ?= server
bench-tilt: ## TestLiveUpdateAgainstTilt on the running local cluster; across the shaped link if it is up (BENCH_PROGRAM=server or operator).
	DEVLOOP_BENCH_LINK=$$(test -f /run/devloop-link/proxy.pid && echo /run/devloop-link) DEVLOOP_BENCH_PROGRAM=$(BENCH_PROGRAM) \
	  go test -tags e2e ./test/e2e/ -count=1 -v -timeout 60m -run '^TestLiveUpdateAgainstTilt$$'

# The real projects' loops from their real trees, printing figures
# (docs/real-projects.md): GPU Operator from its Go module, with every
# figure (warm Ready, edit by rollout, the unit suite: a compile each).
real-projects: cluster-binaries ## The real projects' loops (GPU Operator's real tree) on the local cluster, with figures: up, test, down.
	$(CLUSTER_SH) up
	DEVLOOP_E2E_REAL_FIGURES=1 go test -tags e2e ./test/e2e/ -count=1 -v -timeout 150m -run '^TestRealGPUOperator$$'; rc=$$?; $(CLUSTER_SH) down; exit $$rc

# GPU Operator's dual-tag loop on its real tree for CI (issue 42): one cold
# build of the tree, the chart, the operator's validator DaemonSet on the
# revision tag; not the figures-only parts (make real-projects runs them).
.PHONY: e2e-real
e2e-real: cluster-binaries ## GPU Operator's dual-tag loop on its real tree (CI's part of make real-projects): up, test, down; its time.
	DEVLOOP_E2E_FLUX=skip DEVLOOP_E2E_OLM=skip hack/e2e.sh -timeout 60m -run '^TestRealGPUOperator$$'

# The OLM-packaged operator's loop (stakater/ipshield, docs/real-projects.md)
# through OLM v1: its tree is no Go module, so IPSHIELD_TREE names a checkout
# (commit b2e67d5). OLM's controllers are built first, as for e2e-gitops.
.PHONY: real-ipshield-olm
real-ipshield-olm: cluster-binaries olm-binaries opm ## The OLM-packaged operator's loop (IPSHIELD_TREE=checkout of stakater/ipshield) through OLM v1 on the local cluster, with figures: up, test, down.
	@[ -n "$(IPSHIELD_TREE)" ] || { echo "IPSHIELD_TREE=DIR: a checkout of github.com/stakater/ipshield (b2e67d5)" >&2; exit 2; }
	$(CLUSTER_SH) up
	DEVLOOP_IPSHIELD_TREE=$(abspath $(IPSHIELD_TREE)) go test -tags e2e ./test/e2e/ -count=1 -v -timeout 90m -run '^TestRealIPShieldOLM$$'; rc=$$?; $(CLUSTER_SH) down; exit $$rc

.PHONY: real-dynamo
real-dynamo: cluster-binaries ## Dynamo's operator loop (DYNAMO_TREE=the deploy/ directory of a checkout of ai-dynamo/dynamo; ENVTEST_ASSETS=its envtest's kube-apiserver and etcd, default this cluster's) on the local cluster, with figures: up, test, down.
	@[ -n "$(DYNAMO_TREE)" ] || { echo "DYNAMO_TREE=DIR: the deploy/ directory of a checkout of github.com/ai-dynamo/dynamo" >&2; exit 2; }
	$(CLUSTER_SH) up
	DEVLOOP_DYNAMO_TREE=$(abspath $(DYNAMO_TREE)) DEVLOOP_ENVTEST_ASSETS=$(or $(ENVTEST_ASSETS),$(ASSETS)) DEVLOOP_ENVTEST_OWN=$(if $(ENVTEST_ASSETS),1) go test -tags e2e ./test/e2e/ -count=1 -v -timeout 150m -run '^TestRealDynamo$$'; rc=$$?; $(CLUSTER_SH) down; exit $$rc

.PHONY: real-volcano
real-volcano: cluster-binaries ## Volcano's loop (VOLCANO_TREE=a checkout of volcano-sh/volcano) on the local cluster, with figures: up, test, down.
	@[ -n "$(VOLCANO_TREE)" ] || { echo "VOLCANO_TREE=DIR: a checkout of github.com/volcano-sh/volcano" >&2; exit 2; }
	$(CLUSTER_SH) up
	DEVLOOP_VOLCANO_TREE=$(abspath $(VOLCANO_TREE)) go test -tags e2e ./test/e2e/ -count=1 -v -timeout 180m -run '^TestRealVolcano$$'; rc=$$?; $(CLUSTER_SH) down; exit $$rc

# Flux's and OLM's controllers are built from Go modules first, outside the
# test timeout (minutes on a cold cache, then cached under bin/flux, bin/olm).
e2e-gitops: cluster-binaries flux-binaries olm-binaries ## The Flux and OLM end-to-end cases (their controllers built from Go modules) on the local cluster.
	$(CLUSTER_SH) up
	go test -tags e2e ./test/e2e/ -count=1 -v -timeout 20m -run '^(TestFlux|TestOLM)'; rc=$$?; $(CLUSTER_SH) down; exit $$rc

.PHONY: clean
clean: ## Remove build output (keeps the cached test binaries).
	rm -rf bin/manager bin/local

.PHONY: help
help:
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_\/-]+:.*##/ { printf "  %-18s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)
