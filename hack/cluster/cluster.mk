# Local single-node cluster (hack/cluster/cluster.sh): registry, etcd,
# kube-apiserver, controller-manager, scheduler, containerd, kubelet,
# kube-proxy and CoreDNS as host processes. Root only. Include from the
# Makefile:  include hack/cluster/cluster.mk
#
#   make cluster-up       build what is missing (cached under bin/k8s), start, wait for Ready
#   make cluster-status   what runs; the node
#   make cluster-check    end to end: pod, DNS, Service IP, kubectl logs/exec
#   make cluster-down     stop everything (state kept in bin/cluster)
#   make cluster-clean    down and remove bin/cluster
#   make node2-up         a second node, devloop-2, beside the running cluster (node2.sh; also make dev-up NODES=2)
#   make node2-down       stop node 2 (node 1 stays)
#
# Then: export KUBECONFIG=$(CURDIR)/bin/cluster/kubeconfig (printed by cluster-up).

CLUSTER_SH := hack/cluster/cluster.sh
NODE2_SH   := hack/cluster/node2.sh

.PHONY: node2-up node2-down node2-status node2-check cluster-up cluster-down cluster-clean cluster-status cluster-check cluster-binaries flux-binaries olm-binaries

cluster-binaries: ## Build the local cluster's binaries from Go modules (cached under bin/k8s).
	K8S_VERSION=$(K8S_VERSION) hack/k8s-binaries.sh >/dev/null

# Before the e2e suite's timeout starts: a cold build takes 10-25 minutes.
flux-binaries: ## Build Flux source- and kustomize-controller for the e2e suite (cached under bin/flux; DEVLOOP_E2E_FLUX=skip: nothing).
	@[ "$(DEVLOOP_E2E_FLUX)" = skip ] || hack/cluster/flux-binaries.sh >/dev/null

# Likewise: a cold build of both takes about 7 minutes (docs/olm-e2e.md).
olm-binaries: ## Build OLM v1's operator-controller and catalogd for the e2e suite (cached under bin/olm; DEVLOOP_E2E_OLM=skip: nothing).
	@[ "$(DEVLOOP_E2E_OLM)" = skip ] || hack/cluster/olm-binaries.sh >/dev/null

cluster-up: ## Start the local single-node cluster (root); KUBECONFIG=bin/cluster/kubeconfig.
	$(CLUSTER_SH) up

cluster-down: ## Stop the local cluster by PID; keeps its state.
	$(CLUSTER_SH) down

cluster-clean: ## Stop the local cluster and remove its state (bin/cluster).
	$(CLUSTER_SH) clean

cluster-status: ## Show which local cluster processes run.
	@$(CLUSTER_SH) status || true   # the script exits 3 when something is stopped

cluster-check: ## End-to-end check of the running local cluster (pod, DNS, Service IP, logs, exec).
	$(CLUSTER_SH) check

# For targets built on top of the cluster (e.g. a dev-up that deploys the operator).
CLUSTER_KUBECONFIG := $(CURDIR)/bin/cluster/kubeconfig
CLUSTER_REGISTRY   := 10.250.0.1:5000

node2-up: ## Add node devloop-2 to the running local cluster (root): own netns, containerd, kubelet, kube-proxy.
	$(NODE2_SH) up

node2-down: ## Stop node devloop-2 and remove what it made; node 1 stays.
	$(NODE2_SH) down

node2-status: ## Show node 2's processes, memory and the nodes.
	@$(NODE2_SH) status || true

node2-check: ## Pods on both nodes: pod to pod, Services, DNS, registry pulls, across.
	$(NODE2_SH) check
