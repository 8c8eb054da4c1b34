#!/usr/bin/env bash
# A second node, devloop-2, for the local cluster cluster.sh runs: its own
# containerd (root, state, socket), kubelet (root dir, client and serving
# certificates signed by the cluster's CA) and kube-proxy, all in a network
# namespace of their own with address 10.250.0.2, joined to the host by a
# veth pair and routes. Pods get 10.244.1.0/24 on bridge devloop1 (the same
# bridge + host-local CNI as node 1); node 1's pods (10.244.0.0/24) and the
# host's 10.250.0.1 (apiserver, registry, DNS) are routed both ways.
#
# Also the StorageClass local-shared: volumes usable on both nodes (a
# directory on this machine), where "local" is node 1's own.
#
# Usage (root, node 1 up through cluster.sh):
#   hack/cluster/node2.sh up       start node 2 (registered with the NoSchedule taint
#                                  devloop.dev/node2-wip), wait for Ready, run check,
#                                  then remove the taint (NODE2_KEEP_TAINT=1: keep it)
#   hack/cluster/node2.sh down     stop node 2 by PID; remove its node object, mounts,
#                                  network namespace, veth, routes; node 1 stays as it is
#   hack/cluster/node2.sh status   what runs, its memory, the nodes
#   hack/cluster/node2.sh check    pods on both nodes: pod to pod both ways, a Service
#                                  on node 2 from node 1 and back, DNS, the registry,
#                                  the apiserver Service; image pulls on node 2
#
# State in $CLUSTER_DIR/node2 (pids/, logs/, pki/, config/, containerd/,
# kubelet/, netns: the namespace's bind-mount file). Not `ip netns add`:
# that rbind-mounts /run/netns, where node 1's containerd keeps its pods'
# namespaces, and those pods can then no longer be torn down.
set -euo pipefail

# The cluster's variables and functions (launch's helpers, render, cert, ...).
# shellcheck source=cluster.sh
. "$(dirname "$0")/cluster.sh"

CLUSTER_STATE=$STATE
CLUSTER_PKI=$PKI
HOST_IP=$NODE_IP # node 1's address: apiserver, registry, DNS
STATE=$CLUSTER_STATE/node2
NODE_NAME=devloop-2
NODE_IP=10.250.0.2
POD_CIDR=10.244.1.0/24
BRIDGE=devloop1
CNI_NET=devloop2 # not devloop-*: node 1's down removes those CNI results
APISERVER=https://$HOST_IP:6443 # 127.0.0.1 in the namespace is its own loopback
PKI=$STATE/pki
KCFG=$STATE/kubeconfigs
SOCK=$STATE/run/containerd.sock
NETNS=$STATE/netns
VETH_HOST=dl2-host
VETH_NODE=dl2-node # eth0 once inside the namespace
TAINT=devloop.dev/node2-wip
SHARED_CLASS=local-shared
COMPONENTS=(containerd kubelet kube-proxy provisioner)

log() { echo "node2: $*" >&2; }

in_node() { nsenter --net="$NETNS" "$@"; }

netns_mounted() { awk -v f="$NETNS" '$5 == f { found = 1 } END { exit !found }' /proc/self/mountinfo; }

# network: the namespace, the veth pair and the routes, each made only if
# missing (up is run again on a half-made node).
network() {
  mkdir -p "$STATE"
  if ! netns_mounted; then
    touch "$NETNS"
    unshare --net="$NETNS" true
    log "network namespace $NETNS"
  fi
  if ! ip link show "$VETH_HOST" >/dev/null 2>&1; then
    ip link add "$VETH_HOST" type veth peer name "$VETH_NODE"
    ip link set "$VETH_NODE" netns "$NETNS"
    in_node ip link set "$VETH_NODE" name eth0
  fi
  in_node ip link set lo up
  in_node ip -4 addr show dev eth0 | grep -q "inet $NODE_IP/" || in_node ip addr add "$NODE_IP/32" dev eth0
  in_node ip link set eth0 up
  # The host answers for its own addresses on the veth (10.250.0.1 is on
  # its lo): no address on the host end, link routes on both.
  in_node ip route replace "$HOST_IP/32" dev eth0
  in_node ip route replace default via "$HOST_IP" dev eth0
  ip link set "$VETH_HOST" up
  ip route replace "$NODE_IP/32" dev "$VETH_HOST"
  ip route replace "$POD_CIDR" via "$NODE_IP" dev "$VETH_HOST"
  # Per namespace: forwarding between eth0 and the pods' bridge, and
  # bridged pod traffic through iptables (kube-proxy's Service rules).
  in_node sysctl -q -w net.ipv4.ip_forward=1
  in_node sysctl -q -w net.bridge.bridge-nf-call-iptables=1 2>/dev/null || log "warning: no bridge-nf-call-iptables in the namespace"
}

# certs: node 2's kubelet client and serving certificates and kube-proxy's
# client certificate, signed by the cluster's CA; kubeconfigs for the
# apiserver at the host's address.
certs() {
  [ -f "$PKI/.complete" ] && return 0
  mkdir -p "$PKI" "$KCFG"
  chmod 700 "$PKI"
  (
    PKI=$CLUSTER_PKI
    cert node2-kubelet "system:node:$NODE_NAME" system:nodes clientAuth
    cert node2-kubelet-serving "system:node:$NODE_NAME" system:nodes serverAuth "DNS:$NODE_NAME,IP:$NODE_IP"
    cert node2-kube-proxy system:kube-proxy "" clientAuth
  )
  local n
  for n in kubelet kubelet-serving kube-proxy; do
    mv "$CLUSTER_PKI/node2-$n.crt" "$PKI/$n.crt"
    mv "$CLUSTER_PKI/node2-$n.key" "$PKI/$n.key"
  done
  cp "$CLUSTER_PKI/ca.crt" "$PKI/ca.crt"
  chmod 600 "$PKI"/*.key
  kubeconfig "$KCFG/kubelet.kubeconfig" kubelet
  kubeconfig "$KCFG/kube-proxy.kubeconfig" kube-proxy
  touch "$PKI/.complete"
}

# put FILE: stdin into FILE, unless FILE holds it already: a running
# kube-proxy exits when its config file is written, even unchanged.
put() {
  local tmp=$1.tmp
  cat >"$tmp"
  if cmp -s "$tmp" "$1"; then rm -f "$tmp"; else mv "$tmp" "$1"; fi
}

# node_configs: node 1's templates with node 2's values, and what differs:
# pod namespaces under containerd's state (not /run/netns, node 1's), runc
# state of its own, cluster DNS on the host's address, the taint.
# shellcheck disable=SC2034 # POD_GATEWAY, HOST_RESOLV_CONF: read by the templates
node_configs() {
  local POD_GATEWAY=${POD_CIDR%.0/24}.1 HOST_RESOLV_CONF=/etc/resolv.conf
  [ ! -f /run/systemd/resolve/resolv.conf ] || HOST_RESOLV_CONF=/run/systemd/resolve/resolv.conf
  mkdir -p "$STATE/config" "$STATE/containerd/certs.d/$REGISTRY" "$STATE/cni/net.d" "$STATE/run" "$STATE/pod-logs"
  render hosts.toml | put "$STATE/containerd/certs.d/$REGISTRY/hosts.toml"
  render containerd.toml | sed \
    -e "s|^  restrict_oom_score_adj = true\$|&\n  netns_mounts_under_state_dir = true|" \
    -e "s|^        SystemdCgroup = false\$|&\n        Root = \"$STATE/runc\"|" | put "$STATE/config/containerd.toml"
  render cni.conflist | put "$STATE/cni/net.d/10-$CNI_NET.conflist"
  {
    render kubelet.yaml | sed "s|^clusterDNS: \[$NODE_IP\]\$|clusterDNS: [$HOST_IP]|"
    printf 'registerWithTaints:\n- key: %s\n  effect: NoSchedule\n' "$TAINT"
  } | put "$STATE/config/kubelet.yaml"
  render kube-proxy.yaml | put "$STATE/config/kube-proxy.yaml"
  grep -q netns_mounts_under_state_dir "$STATE/config/containerd.toml" || die "containerd.toml: the template changed (netns_mounts_under_state_dir not inserted)"
  grep -q "Root = " "$STATE/config/containerd.toml" || die "containerd.toml: the template changed (runc Root not inserted)"
  grep -q "clusterDNS: \[$HOST_IP\]" "$STATE/config/kubelet.yaml" || die "kubelet.yaml: the template changed (clusterDNS not set)"
}

# launch_in_node NAME ARGS...: launch (cluster.sh), in node 2's namespace
# (nsenter execs the binary: $! is still the component's own PID).
launch_in_node() {
  local LAUNCH_WRAP=(nsenter "--net=$NETNS") LAUNCH_SETTLE=0.3
  launch "$@"
}

http_ok_in_node() { in_node busybox wget -q -O /dev/null "$1"; }

node2_start_containerd() {
  launch_in_node containerd --config "$STATE/config/containerd.toml"
  wait_for containerd 30 ctr_ version
  wait_for "containerd CRI service" 60 cri_ready
}

node2_start_kubelet() {
  launch_in_node kubelet --config "$STATE/config/kubelet.yaml" \
    --kubeconfig "$KCFG/kubelet.kubeconfig" \
    --root-dir "$STATE/kubelet" \
    --hostname-override "$NODE_NAME" --node-ip "$NODE_IP"
  wait_for kubelet 60 http_ok_in_node http://127.0.0.1:10248/healthz
}

node2_start_kube_proxy() {
  launch_in_node kube-proxy --config "$STATE/config/kube-proxy.yaml"
  wait_for kube-proxy 60 http_ok_in_node http://127.0.0.1:10256/healthz
}

# A second StorageClass, local-shared: a directory per claim under
# node2/volumes-shared, usable on both nodes (the directory is on this
# machine), as a network disk that follows a pod to another node. "local"
# stays node 1's own disk. In the host's namespace: it only talks to the
# apiserver and makes directories.
node2_start_provisioner() {
  mkdir -p "$STATE/tools" "$STATE/volumes-shared"
  (cd "$ROOT" && CGO_ENABLED=0 $NICE go build -o "$STATE/tools/provisioner" ./hack/cluster/provisioner)
  launch provisioner --kubeconfig "$ADMIN_KUBECONFIG" --root "$STATE/volumes-shared" \
    --node "devloop,$NODE_NAME" --class "$SHARED_CLASS" --default-class=false
  wait_for "storage class $SHARED_CLASS" 30 kubectl_ get storageclass "$SHARED_CLASS"
}

has_taint() { kubectl_ get node "$NODE_NAME" -o jsonpath='{.spec.taints[*].key}' 2>/dev/null | grep -qw "$TAINT"; }

cmd2_up() {
  need_root
  local t0=$SECONDS c
  [ -n "$(STATE=$CLUSTER_STATE pid_of kube-apiserver)" ] || die "node 1 is not up (no kube-apiserver under $CLUSTER_STATE): run cluster.sh up first"
  network
  certs
  node_configs
  for c in "${COMPONENTS[@]}"; do
    if running "$c"; then
      log "$c already running (pid $(pid_of "$c"))"
    else
      "node2_start_${c//-/_}"
      log "$c ready at +$((SECONDS - t0))s"
    fi
  done
  wait_for "node $NODE_NAME Ready" 120 node_ready
  log "node $NODE_NAME Ready at +$((SECONDS - t0))s"
  if [ "${NODE2_KEEP_TAINT:-0}" = 1 ]; then
    log "taint $TAINT kept (NODE2_KEEP_TAINT=1)"
  elif has_taint; then
    cmd2_check
    kubectl_ taint node "$NODE_NAME" "$TAINT:NoSchedule-" >/dev/null
    log "checks passed: taint $TAINT removed"
  fi
  log "node 2 up in $((SECONDS - t0))s; $(memory)"
}

# memory: resident memory of node 2's processes (its pods' excluded).
memory() {
  local c pid kib total=0 parts=''
  for c in "${COMPONENTS[@]}"; do
    pid=$(pid_of "$c")
    [ -n "$pid" ] || continue
    kib=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
    total=$((total + kib))
    parts+=" $c $((kib / 1024))"
  done
  echo "RSS $((total / 1024)) MiB (${parts# } MiB)"
}

cmd2_down() {
  need_root
  [ -d "$STATE" ] || { log "nothing to stop (no $STATE)"; return 0; }
  local t0=$SECONDS
  stop provisioner
  stop kube-proxy
  stop kubelet
  kill_pods
  stop containerd
  # The Node object goes too: its pods are then deleted by the control
  # plane instead of waiting for a kubelet that never returns.
  if [ -n "$(STATE=$CLUSTER_STATE pid_of kube-apiserver)" ]; then
    kubectl_ delete node "$NODE_NAME" --ignore-not-found --wait=false >/dev/null 2>&1 || log "warning: could not delete node $NODE_NAME"
    # Volumes of the class stay (and their directories, in the state).
    kubectl_ delete storageclass "$SHARED_CLASS" --ignore-not-found >/dev/null 2>&1 || true
  fi
  ip link del "$VETH_HOST" 2>/dev/null || true # its routes go with it
  ip route del "$POD_CIDR" 2>/dev/null || true
  unmount_state # the pods' namespaces, volumes, rootfs, and the node's namespace file
  rm -f "$NETNS"
  rm -rf "$STATE/cni/ipam" "$STATE/runc"
  rm -f /var/lib/cni/results/"$CNI_NET"-* 2>/dev/null || true
  local l
  for l in /var/log/containers/*.log; do
    [ -L "$l" ] || continue
    case $(readlink "$l") in "$STATE"/*) rm -f "$l" ;; esac
  done
  log "down in $((SECONDS - t0))s (state kept in $STATE)"
}

cmd2_status() {
  local c pid rc=0
  for c in "${COMPONENTS[@]}"; do
    pid=$(pid_of "$c")
    if [ -n "$pid" ]; then printf 'node2 %-18s running (pid %s)\n' "$c" "$pid"; else printf 'node2 %-18s stopped\n' "$c"; rc=3; fi
  done
  netns_mounted && echo "netns:  $NETNS" || echo "netns:  none"
  echo "memory: $(memory)"
  kubectl_ get nodes -o wide 2>/dev/null || true
  return $rc
}

# shellcheck source=node2-check.sh
. "$HERE/node2-check.sh"

[[ ${BASH_SOURCE[0]} == "$0" ]] || return 0

case ${1:-} in
  up) binaries --paths; cmd2_up ;;
  down) binaries --paths; cmd2_down ;;
  status) binaries --paths; cmd2_status ;;
  check) binaries --paths; cmd2_check ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
esac
