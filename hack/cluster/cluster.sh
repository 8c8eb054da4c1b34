#!/usr/bin/env bash
# A real single-node Kubernetes cluster on this machine, without Docker:
# the distribution registry, etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, containerd + CNI bridge, kubelet, kube-proxy (iptables),
# CoreDNS and a host-path volume provisioner, each a host process started
# and stopped by PID.
#
# Usage (root):
#   hack/cluster/cluster.sh up       install/build what is missing, start what is not running,
#                                    wait for the node to be Ready and a smoke pod to resolve DNS
#   hack/cluster/cluster.sh down     stop everything by PID; remove the pods' mounts, network
#                                    namespaces, bridge, iptables chains and sysctls it changed
#   hack/cluster/cluster.sh clean    down + remove all state (PKI, etcd data, images, registry)
#   hack/cluster/cluster.sh status   what runs, the node, the kubeconfig
#   hack/cluster/cluster.sh check    end-to-end check: pod, DNS, Service IP, kubectl logs
#   hack/cluster/cluster.sh env      KUBECONFIG=... and the registry address, for eval
#
# State lives in $CLUSTER_DIR (default bin/cluster): pids/, logs/, pki/, the
# admin kubeconfig at $CLUSTER_DIR/kubeconfig. Addresses (fixed):
#   node / registry / DNS   10.250.0.1 (an extra address on lo); registry :5000 (plain HTTP)
#   apiserver               https://127.0.0.1:6443 (also 10.250.0.1:6443, Service 10.96.0.1:443)
#   etcd                    http://127.0.0.1:2379
#   pods                    10.244.0.0/24 on bridge devloop0; Services 10.96.0.0/16
#   volumes                 default StorageClass "local": a directory per claim under $CLUSTER_DIR/volumes
# Images: $REGISTRY/pause:3.10 (sandbox) and $REGISTRY/busybox:1.35 (also :latest).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$ROOT/hack/cluster
STATE=${CLUSTER_DIR:-$ROOT/bin/cluster}
NODE_IP=10.250.0.1
NODE_NAME=${NODE_NAME:-devloop}
REGISTRY=$NODE_IP:5000
POD_CIDR=10.244.0.0/24
CLUSTER_CIDR=10.244.0.0/16
SERVICE_CIDR=10.96.0.0/16
SERVICE_IP=10.96.0.1
BRIDGE=devloop0
CNI_NET=devloop
PAUSE_IMAGE=$REGISTRY/pause:3.10
BUSYBOX_IMAGE=$REGISTRY/busybox:1.35
# shellcheck disable=SC2034 # read by the kubeconfig template
APISERVER=https://127.0.0.1:6443
NICE=${NICE:-nice -n 15}
# Every component, in start order; down goes backwards.
COMPONENTS=(registry etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet kube-proxy coredns provisioner)
# Sysctls that kubelet, kube-proxy or the bridge plugin may change; saved on
# the first up and restored by down.
SYSCTLS=(net.ipv4.ip_forward net.bridge.bridge-nf-call-iptables net.bridge.bridge-nf-call-ip6tables
  net.ipv4.conf.all.route_localnet vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
  kernel.keys.root_maxkeys kernel.keys.root_maxbytes)

export GOTOOLCHAIN=local GONOSUMDB=${GONOSUMDB:-k8s.io}

log() { echo "cluster: $*" >&2; }
die() { log "error: $*"; [ ! -d "$STATE/logs" ] || log "logs: $STATE/logs; '$0 down' stops what runs"; exit 1; }

PKI=$STATE/pki
PKI_VERSION=2
KCFG=$STATE/kubeconfigs
SOCK=$STATE/run/containerd.sock
ADMIN_KUBECONFIG=$STATE/kubeconfig

# render, kubeconfig and write_configs: the config files, from hack/cluster/config/.
# shellcheck source=configs.sh
. "$HERE/configs.sh"

need_root() { [ "$(id -u)" = 0 ] || die "must run as root (containerd, kubelet, iptables)"; }

# ---------------------------------------------------------------- processes

pidfile() { echo "$STATE/pids/$1.pid"; }

# binary_of NAME: the executable the component runs as.
binary_of() {
  case $1 in
    registry) echo /usr/bin/docker-registry ;;
    containerd) echo /usr/bin/containerd ;;
    provisioner) echo "$STATE/tools/provisioner" ;;
    *) local var; var=$(echo "$1" | tr 'a-z-' 'A-Z_'); echo "${!var:-}" ;;
  esac
}

# pid_of NAME: the PID of a running component, or nothing. The PID must still
# run the component's binary (a stale pid file after a reboot may name
# another process).
pid_of() {
  local f pid exe
  f=$(pidfile "$1")
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 0
  exe=$(readlink "/proc/$pid/exe" 2>/dev/null || true)
  exe=${exe% (deleted)}
  case $exe in
    */$(basename "$(binary_of "$1")") | "$(binary_of "$1")") echo "$pid" ;;
  esac
}

running() { [ -n "$(pid_of "$1")" ]; }

# launch NAME ARGS...: starts the component's binary in its own session (so
# Ctrl-C or make's exit does not stop it), output to logs/NAME.log. A
# caller may set LAUNCH_WRAP (an array: a command that execs what follows,
# node2.sh's nsenter into node 2's namespace) and LAUNCH_SETTLE (how long
# to give the binary before checking it still runs; 0.2 s).
launch() {
  local name=$1; shift
  local bin; bin=$(binary_of "$name")
  [ -x "$bin" ] || die "no binary for $name ($bin)"
  mkdir -p "$STATE/pids" "$STATE/logs"
  echo "=== $(date -Is) starting $bin $*" >>"$STATE/logs/$name.log"
  # A subshell without job control is not a process group leader, so setsid
  # calls setsid(2) and execs in place (as LAUNCH_WRAP's command must): $!
  # is the component's own PID.
  (exec setsid ${LAUNCH_WRAP[@]+"${LAUNCH_WRAP[@]}"} "$bin" "$@" </dev/null >>"$STATE/logs/$name.log" 2>&1) &
  echo $! >"$(pidfile "$name")"
  sleep "${LAUNCH_SETTLE:-0.2}"
  running "$name" || { tail -20 "$STATE/logs/$name.log" >&2; die "$name exited at once (log: $STATE/logs/$name.log)"; }
  log "started $name (pid $(pid_of "$name"), log $STATE/logs/$name.log)"
}

# alive PID: the process exists and is not a zombie (the components are
# reparented to PID 1, which may reap them only a while after they exit).
alive() {
  local st
  st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
  [ -n "$st" ] && [ "$st" != Z ]
}

# stop NAME: SIGTERM, then SIGKILL after 15 s.
stop() {
  local name=$1 pid i t0=$SECONDS
  pid=$(pid_of "$name")
  if [ -z "$pid" ]; then
    rm -f "$(pidfile "$name")"
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 150); do
    alive "$pid" || break
    sleep 0.1
  done
  if alive "$pid"; then
    log "$name (pid $pid) ignored SIGTERM for 15s: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    for i in $(seq 1 50); do
      alive "$pid" || break
      sleep 0.1
    done
  fi
  rm -f "$(pidfile "$name")"
  log "stopped $name (pid $pid) in $((SECONDS - t0))s"
}

# wait_for WHAT SECONDS CMD...: polls CMD until it succeeds.
wait_for() {
  local what=$1 secs=$2 start=$SECONDS; shift 2
  until "$@" >/dev/null 2>&1; do
    if [ $((SECONDS - start)) -ge "$secs" ]; then
      die "$what not ready after ${secs}s"
    fi
    sleep 0.3
  done
}

# Not `wget -T`: Debian's static busybox 1.35 wget segfaults with it.
http_ok() { timeout 3 busybox wget -q -O /dev/null "$1"; }

kubectl_() { "$KUBECTL" --kubeconfig "$ADMIN_KUBECONFIG" "$@"; }

# ---------------------------------------------------------------- preparation

# binaries [--paths]: sets ETCD, KUBE_APISERVER, ..., KUBECTL; builds what is
# missing unless --paths.
binaries() {
  local line
  while IFS= read -r line; do
    case $line in *=*) export "${line?}" ;; esac
  done < <("$HERE/../k8s-binaries.sh" "$@")
}

# tools: the pause binary (static), imagepack and the volume provisioner,
# from this repository.
tools() {
  mkdir -p "$STATE/tools"
  (cd "$ROOT" && CGO_ENABLED=0 $NICE go build -trimpath -ldflags "-s -w" -o "$STATE/tools/pause" ./hack/cluster/pause \
    && CGO_ENABLED=0 $NICE go build -o "$STATE/tools/imagepack" ./hack/cluster/imagepack \
    && CGO_ENABLED=0 $NICE go build -o "$STATE/tools/provisioner" ./hack/cluster/provisioner)
}

node_address() {
  ip -4 addr show dev lo | grep -q "inet $NODE_IP/" && return 0
  ip addr add "$NODE_IP/32" dev lo
  touch "$STATE/.added-node-ip"
  log "added $NODE_IP/32 to lo"
}

sysctls() {
  local k v
  if [ ! -f "$STATE/sysctl.orig" ]; then
    for k in "${SYSCTLS[@]}"; do
      v=$(sysctl -n "$k" 2>/dev/null) && echo "$k=$v"
    done >"$STATE/sysctl.orig.tmp"
    mv "$STATE/sysctl.orig.tmp" "$STATE/sysctl.orig"
  fi
  sysctl -q -w net.ipv4.ip_forward=1
  sysctl -q -w net.bridge.bridge-nf-call-iptables=1 2>/dev/null || log "warning: no br_netfilter (Service IPs between pods may not answer)"
}

# ca NAME CN: a self-signed CA.
ca() {
  openssl req -x509 -new -newkey rsa:2048 -nodes -keyout "$PKI/$1.key" -subj "/CN=$2" -days 3650 -sha256 \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
    -out "$PKI/$1.crt" 2>/dev/null
}

# cert NAME CN O EKU [SANS] [CA]: a key and a certificate signed by CA (default: the cluster CA).
cert() {
  local name=$1 cn=$2 o=$3 eku=$4 sans=${5:-} ca=${6:-ca} subj
  subj="/CN=$cn"
  [ -z "$o" ] || subj="/O=$o$subj"
  openssl req -new -newkey rsa:2048 -nodes -keyout "$PKI/$name.key" -subj "$subj" -out "$PKI/$name.csr" 2>/dev/null
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$eku"
    [ -z "$sans" ] || echo "subjectAltName=$sans"
  } >"$PKI/$name.ext"
  openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/$ca.crt" -CAkey "$PKI/$ca.key" -CAcreateserial \
    -days 3650 -sha256 -extfile "$PKI/$name.ext" -out "$PKI/$name.crt" 2>/dev/null
  rm -f "$PKI/$name.csr" "$PKI/$name.ext"
}

pki() {
  # Bump PKI_VERSION when the set of certificates changes: an older state's PKI is made anew.
  [ -f "$PKI/.complete-v$PKI_VERSION" ] && return 0
  local c
  for c in "${COMPONENTS[@]}"; do
    running "$c" && die "$PKI is missing or from an older version of this script while $c runs: run '$0 down' first"
  done
  log "creating the cluster CA and certificates in $PKI"
  rm -rf "$PKI" "$KCFG"
  mkdir -p "$PKI" "$KCFG"
  chmod 700 "$PKI"
  ca ca devloop-cluster-ca
  # The aggregation layer's CA and client (kube-apiserver --requestheader-*, --proxy-client-*).
  ca front-proxy-ca devloop-front-proxy-ca
  cert front-proxy-client front-proxy-client "" clientAuth "" front-proxy-ca
  cert kube-apiserver kube-apiserver "" serverAuth \
    "DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost,IP:127.0.0.1,IP:$NODE_IP,IP:$SERVICE_IP"
  cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters clientAuth
  cert kubelet-serving "system:node:$NODE_NAME" system:nodes serverAuth "DNS:$NODE_NAME,DNS:localhost,IP:$NODE_IP,IP:127.0.0.1"
  cert admin devloop-admin system:masters clientAuth
  cert kube-controller-manager system:kube-controller-manager "" clientAuth
  cert kube-scheduler system:kube-scheduler "" clientAuth
  cert kube-proxy system:kube-proxy "" clientAuth
  cert kubelet "system:node:$NODE_NAME" system:nodes clientAuth
  cert coredns devloop:coredns "" clientAuth
  openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
  openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
  chmod 600 "$PKI"/*.key
  for n in kube-controller-manager kube-scheduler kube-proxy kubelet coredns; do
    kubeconfig "$KCFG/$n.kubeconfig" "$n"
  done
  kubeconfig "$ADMIN_KUBECONFIG" admin
  touch "$PKI/.complete-v$PKI_VERSION"
}

# shellcheck disable=SC2034 # HOST_RESOLV_CONF: read by the kubelet and CoreDNS templates
configs() {
  # Pods with dnsPolicy Default, and CoreDNS's forward, use the host's
  # resolvers; systemd-resolved's stub (127.0.0.53) is useless inside a pod.
  HOST_RESOLV_CONF=/etc/resolv.conf
  [ ! -f /run/systemd/resolve/resolv.conf ] || HOST_RESOLV_CONF=/run/systemd/resolve/resolv.conf
  write_configs
}

# ---------------------------------------------------------------- components

start_registry() {
  launch registry serve "$STATE/config/registry.yml"
  wait_for registry 30 http_ok "http://$REGISTRY/v2/"
}

start_etcd() {
  launch etcd --name "$NODE_NAME" --data-dir "$STATE/etcd" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster "$NODE_NAME=http://127.0.0.1:2380" --listen-metrics-urls http://127.0.0.1:2381 \
    --unsafe-no-fsync --log-level warn
  wait_for etcd 60 http_ok http://127.0.0.1:2381/health
}

start_kube_apiserver() {
  launch kube-apiserver \
    --etcd-servers http://127.0.0.1:2379 \
    --bind-address 0.0.0.0 --secure-port 6443 --advertise-address "$NODE_IP" \
    --tls-cert-file "$PKI/kube-apiserver.crt" --tls-private-key-file "$PKI/kube-apiserver.key" \
    --client-ca-file "$PKI/ca.crt" \
    --service-cluster-ip-range "$SERVICE_CIDR" \
    --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
    --allow-privileged=true \
    --kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority "$PKI/ca.crt" \
    --kubelet-preferred-address-types InternalIP \
    --requestheader-client-ca-file "$PKI/front-proxy-ca.crt" --requestheader-allowed-names front-proxy-client \
    --requestheader-username-headers X-Remote-User --requestheader-group-headers X-Remote-Group \
    --requestheader-extra-headers-prefix X-Remote-Extra- \
    --proxy-client-cert-file "$PKI/front-proxy-client.crt" --proxy-client-key-file "$PKI/front-proxy-client.key" \
    --enable-aggregator-routing=true
  wait_for kube-apiserver 120 kubectl_ get --raw /readyz
  kubectl_ apply -f "$STATE/config/rbac.yaml" >/dev/null
}

start_kube_controller_manager() {
  launch kube-controller-manager \
    --kubeconfig "$KCFG/kube-controller-manager.kubeconfig" \
    --authentication-kubeconfig "$KCFG/kube-controller-manager.kubeconfig" \
    --authorization-kubeconfig "$KCFG/kube-controller-manager.kubeconfig" \
    --bind-address 127.0.0.1 --leader-elect=false \
    --service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
    --cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
    --use-service-account-credentials \
    --service-cluster-ip-range "$SERVICE_CIDR" --cluster-cidr "$CLUSTER_CIDR" --allocate-node-cidrs=false
}

start_kube_scheduler() {
  launch kube-scheduler \
    --kubeconfig "$KCFG/kube-scheduler.kubeconfig" \
    --authentication-kubeconfig "$KCFG/kube-scheduler.kubeconfig" \
    --authorization-kubeconfig "$KCFG/kube-scheduler.kubeconfig" \
    --bind-address 127.0.0.1 --leader-elect=false
}

ctr_() { ctr --address "$SOCK" "$@"; }

start_containerd() {
  launch containerd --config "$STATE/config/containerd.toml"
  wait_for containerd 30 ctr_ version
  # ctr answers before the CRI service has recovered its state; a kubelet
  # started then exits ("server is not initialized yet"). containerd 1.6
  # logs this line last, just before the CRI service is initialized.
  wait_for "containerd CRI service" 60 cri_ready
}

# cri_ready: the CRI service of the containerd launched last has started.
cri_ready() {
  awk '/^=== /{up=0} /Start streaming server/{up=1} END{exit !up}' "$STATE/logs/containerd.log"
}

start_kubelet() {
  launch kubelet --config "$STATE/config/kubelet.yaml" \
    --kubeconfig "$KCFG/kubelet.kubeconfig" \
    --root-dir "$STATE/kubelet" \
    --hostname-override "$NODE_NAME" --node-ip "$NODE_IP"
  wait_for kubelet 60 http_ok http://127.0.0.1:10248/healthz
}

start_kube_proxy() {
  launch kube-proxy --config "$STATE/config/kube-proxy.yaml"
  wait_for kube-proxy 60 http_ok http://127.0.0.1:10256/healthz
}

start_coredns() {
  launch coredns -conf "$STATE/config/Corefile"
  wait_for coredns 60 http_ok http://127.0.0.1:8181/ready
}

# The default StorageClass "local": a host directory per claim, under
# $STATE/volumes (build caches of builder Jobs).
start_provisioner() {
  mkdir -p "$STATE/volumes"
  launch provisioner --kubeconfig "$ADMIN_KUBECONFIG" --root "$STATE/volumes" --node "$NODE_NAME"
  wait_for "storage class local" 30 kubectl_ get storageclass local
}

images() {
  local out
  out=$("$STATE/tools/imagepack" -registry "$REGISTRY" -insecure \
    -pause "$STATE/tools/pause" -pause-ref "${PAUSE_IMAGE#"$REGISTRY"/}" \
    -busybox /bin/busybox -busybox-ref "${BUSYBOX_IMAGE#"$REGISTRY"/},busybox:latest")
  log "images: $(echo "$out" | tr '\n' ' ')"
}

node_ready() {
  [ "$(kubectl_ get node "$NODE_NAME" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}

# smoke: a busybox pod from the local registry that resolves kubernetes.default
# and dials it. busybox's own nslookup ignores resolv.conf's search list, so
# it gets the full name; nc resolves the short one through libc, as apps do.
smoke() {
  local start=$SECONDS
  kubectl_ -n default delete pod devloop-smoke --ignore-not-found --wait=true >/dev/null
  # The default ServiceAccount appears a moment after the namespace controller starts.
  wait_for "default ServiceAccount" 60 kubectl_ -n default get serviceaccount default
  kubectl_ -n default run devloop-smoke --image "$BUSYBOX_IMAGE" --restart Never \
    --command -- sh -c "nslookup kubernetes.default.svc.cluster.local | grep -q '$SERVICE_IP' && nc -w 5 kubernetes.default 443 </dev/null && echo smoke-ok" >/dev/null
  if ! kubectl_ -n default wait pod/devloop-smoke --for=jsonpath='{.status.phase}'=Succeeded --timeout 120s >/dev/null; then
    kubectl_ -n default describe pod devloop-smoke >&2 || true
    kubectl_ -n default logs devloop-smoke >&2 || true
    die "smoke pod did not succeed"
  fi
  kubectl_ -n default logs devloop-smoke | grep -q smoke-ok || die "smoke pod printed no smoke-ok"
  log "smoke pod ran from $BUSYBOX_IMAGE, resolved and dialled kubernetes.default in $((SECONDS - start))s"
  kubectl_ -n default delete pod devloop-smoke --wait=false >/dev/null
}

# ---------------------------------------------------------------- commands

# disk_room says how much disk the cluster's state has and warns when it
# is little: the kubelet taints the node disk-pressure below 500 MiB free
# (config/kubelet.yaml), and then no pod is scheduled, the operator's
# included; the end-to-end suite takes a few GiB of images and logs.
disk_room() {
  local free_mib
  free_mib=$(df -Pm "$STATE" | awk 'NR == 2 {print $4}')
  if [ "$free_mib" -lt 4096 ]; then
    log "warning: only ${free_mib} MiB free under $STATE; below 500 MiB the node is tainted disk-pressure and no pod is scheduled (make dev-clean frees the cluster's images)"
  else
    log "disk: ${free_mib} MiB free under $STATE"
  fi
}

cmd_up() {
  need_root
  local t0=$SECONDS all=1 c t_kubelet=$SECONDS
  mkdir -p "$STATE"
  "$HERE/deps.sh"
  binaries
  for c in "${COMPONENTS[@]}"; do running "$c" || all=0; done
  if [ $all = 1 ]; then
    log "already running (state $STATE); nothing to do"
    node_ready && log "node $NODE_NAME is Ready" || log "warning: node $NODE_NAME is not Ready"
    print_env
    return 0
  fi
  tools
  disk_room
  node_address
  sysctls
  pki
  configs
  for c in "${COMPONENTS[@]}"; do
    if running "$c"; then
      log "$c already running (pid $(pid_of "$c"))"
    else
      [ "$c" != kubelet ] || t_kubelet=$SECONDS
      "start_${c//-/_}"
      log "$c ready at +$((SECONDS - t0))s"
    fi
    # The images go to the registry before containerd needs the pause image
    # (pushing unchanged images uploads nothing).
    [ "$c" != registry ] || images
  done
  wait_for "node $NODE_NAME Ready" 120 node_ready
  log "node $NODE_NAME Ready at +$((SECONDS - t0))s ($((SECONDS - t_kubelet))s after the kubelet started)"
  [ "${SMOKE:-1}" = 0 ] || smoke
  log "cluster up in $((SECONDS - t0))s"
  print_env
}

print_env() {
  echo "export KUBECONFIG=$ADMIN_KUBECONFIG"
  echo "# registry: $REGISTRY (plain HTTP; pods and the node use the same name)"
  echo "# kubectl:  $KUBECTL"
}

# cleanup_iptables: deletes every KUBE-* and CNI-* chain and the rules that
# jump to them, in every table, IPv4 and IPv6. Other rules stay.
cleanup_iptables() {
  local save tbl line chain
  for save in iptables-save ip6tables-save; do
    command -v "$save" >/dev/null || continue
    local ipt=${save%-save}
    for tbl in filter nat mangle raw; do
      # Rules in any chain that jump to one of ours, deleted by their spec.
      { "$save" -t "$tbl" 2>/dev/null || true; } | { grep -E -- '^-A .*-j (KUBE|CNI)-' || true; } | { grep -vE '^-A (KUBE|CNI)-' || true; } |
        while IFS= read -r line; do
          eval "$ipt -t $tbl -D ${line#-A }" 2>/dev/null || true
        done
      for chain in $("$save" -t "$tbl" 2>/dev/null | sed -n 's/^:\(\(KUBE\|CNI\)-[^ ]*\) .*/\1/p'); do
        "$ipt" -t "$tbl" -F "$chain" 2>/dev/null || true
      done
      for chain in $("$save" -t "$tbl" 2>/dev/null | sed -n 's/^:\(\(KUBE\|CNI\)-[^ ]*\) .*/\1/p'); do
        "$ipt" -t "$tbl" -X "$chain" 2>/dev/null || true
      done
    done
  done
}

# kill_pods: with kubelet stopped, kills and deletes every container task in
# containerd's k8s.io namespace, so no shim outlives containerd.
kill_pods() {
  running containerd || return 0
  local ids id
  ids=$(ctr_ -n k8s.io tasks ls -q 2>/dev/null || true)
  [ -n "$ids" ] || return 0
  log "killing $(echo "$ids" | wc -l) container task(s)"
  local t0=$SECONDS
  for id in $ids; do ctr_ -n k8s.io tasks kill -a -s SIGKILL "$id" >/dev/null 2>&1 || true; done
  # containerd's CRI plugin deletes a task once it sees it exit; delete what
  # is left (--force: also a task that has not reported its exit yet).
  for id in $ids; do
    ctr_ -n k8s.io tasks delete --force "$id" >/dev/null 2>&1 || true
  done
  ids=$(ctr_ -n k8s.io tasks ls -q 2>/dev/null || true)
  [ -z "$ids" ] || log "warning: container tasks left: $ids"
  log "killed the container tasks in $((SECONDS - t0))s"
}

# unmount_state: unmounts whatever kubelet and containerd left mounted under
# the state directory (volumes, sandbox /dev/shm, rootfs), deepest first.
unmount_state() {
  local m
  for m in $(awk -v s="$STATE/" 'index($2, s) == 1 { print $2 }' /proc/self/mounts | sort -r); do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "warning: could not unmount $m"
  done
}

# cleanup_network: the pods' network namespaces (once no process is in
# them), the bridge, the IPAM and CNI cache entries of this network.
cleanup_network() {
  local ns
  for ns in /run/netns/cni-*; do
    [ -e "$ns" ] || continue
    [ -z "$(ip netns pids "$(basename "$ns")" 2>/dev/null)" ] || continue
    umount "$ns" 2>/dev/null || true
    rm -f "$ns"
  done
  ip link show "$BRIDGE" >/dev/null 2>&1 && ip link del "$BRIDGE"
  rm -rf "$STATE/cni/ipam"
  rm -f /var/lib/cni/results/"$CNI_NET"-* 2>/dev/null || true
  local f id
  for f in /var/lib/cni/results/cni-loopback-*; do
    [ -e "$f" ] || continue
    id=${f#/var/lib/cni/results/cni-loopback-}; id=${id%-lo}
    [ ! -d "$STATE/containerd/root/io.containerd.grpc.v1.cri/sandboxes/$id" ] || rm -f "$f"
  done
  # kubelet's /var/log/containers links into podLogsDir.
  local l
  for l in /var/log/containers/*.log; do
    [ -L "$l" ] || continue
    case $(readlink "$l") in "$STATE"/*) rm -f "$l" ;; esac
  done
  # Empty directories and cgroups that containerd, runc, the CNI plugins and kubelet
  # made outside the state directory (non-empty ones stay).
  rmdir /sys/fs/cgroup/*/k8s.io/* /sys/fs/cgroup/*/k8s.io 2>/dev/null || true
  # The device plugin socket's directory is fixed in the kubelet, whatever --root-dir says.
  [ ! -S /var/lib/kubelet/device-plugins/kubelet.sock ] || rm -f /var/lib/kubelet/device-plugins/kubelet.sock
  rmdir /var/lib/kubelet/device-plugins /var/lib/kubelet 2>/dev/null || true
  rmdir /var/lib/cni/results /var/lib/cni /run/containerd/s /run/containerd/runc/k8s.io /run/containerd/runc \
    /run/containerd /var/log/containers /run/netns 2>/dev/null || true
  return 0
}

restore_sysctls() {
  [ -f "$STATE/sysctl.orig" ] || return 0
  local kv
  while IFS= read -r kv; do
    sysctl -q -w "$kv" 2>/dev/null || true
  done <"$STATE/sysctl.orig"
  rm -f "$STATE/sysctl.orig"
}

cmd_down() {
  need_root
  [ -d "$STATE" ] || { log "nothing to stop (no $STATE)"; return 0; }
  # Node 2 first (node2.sh): its kubelet and pods use this node's services.
  [ ! -d "$STATE/node2" ] || "$HERE/node2.sh" down || log "warning: node 2 did not stop cleanly"
  local i
  for ((i = ${#COMPONENTS[@]} - 1; i >= 0; i--)); do
    case ${COMPONENTS[i]} in
      containerd) kill_pods ;;
    esac
    stop "${COMPONENTS[i]}"
  done
  unmount_state
  cleanup_network
  cleanup_iptables
  restore_sysctls
  if [ -f "$STATE/.added-node-ip" ]; then
    ip addr del "$NODE_IP/32" dev lo 2>/dev/null || true
    rm -f "$STATE/.added-node-ip"
  fi
  log "down (state kept in $STATE; 'clean' removes it)"
}

cmd_clean() {
  cmd_down
  unmount_state
  if awk -v s="$STATE/" 'index($2, s) == 1 { found = 1 } END { exit !found }' /proc/self/mounts; then
    die "mounts remain under $STATE; not removing it"
  fi
  rm -rf --one-file-system "$STATE"
  log "removed $STATE"
}

cmd_status() {
  local c pid rc=0
  for c in "${COMPONENTS[@]}"; do
    pid=$(pid_of "$c")
    if [ -n "$pid" ]; then
      printf '%-24s running (pid %s)\n' "$c" "$pid"
    else
      printf '%-24s stopped\n' "$c"
      rc=3
    fi
  done
  if running kube-apiserver && [ -x "$KUBECTL" ]; then
    kubectl_ get nodes -o wide 2>/dev/null || true
  fi
  echo "state:      $STATE"
  echo "kubeconfig: $ADMIN_KUBECONFIG"
  return $rc
}

# check: what a user of the cluster relies on, end to end: a pod behind a
# Service, DNS (cluster names and the search list), Service IPs, the apiserver
# through its Service, the registry from inside a pod, kubectl logs and exec.
cmd_check() {
  local t0=$SECONDS out ip
  # Fresh names every run: a recreated Service gets a new IP, which DNS caches may not know yet.
  local web=devloop-check-web-$$ client=devloop-check-client-$$
  node_ready || die "node $NODE_NAME is not Ready"
  kubectl_ -n default delete pod,service -l devloop-check --ignore-not-found --grace-period 1 --wait=true >/dev/null
  # A web server pod behind a Service.
  kubectl_ -n default run "$web" --image "$BUSYBOX_IMAGE" --port 8080 --labels "app=$web,devloop-check=1" \
    --command -- sh -c 'mkdir -p /www && echo hello-from-web >/www/index.html && echo web-started && exec httpd -f -p 8080 -h /www' >/dev/null
  kubectl_ -n default expose pod "$web" --name "$web" --port 80 --target-port 8080 >/dev/null
  kubectl_ -n default wait "pod/$web" --for condition=Ready --timeout 120s >/dev/null
  log "web pod Ready in $((SECONDS - t0))s"
  ip=$(kubectl_ -n default get service "$web" -o jsonpath='{.spec.clusterIP}')
  # A client pod: DNS for a Service and for kubernetes.default, the web
  # Service by name and by IP, and the apiserver through its Service IP.
  kubectl_ -n default run "$client" --image "$BUSYBOX_IMAGE" --restart Never --labels devloop-check=1 --command -- sh -c "
    set -e
    nslookup kubernetes.default.svc.cluster.local | grep -q '$SERVICE_IP' && echo dns-kubernetes-ok
    nslookup $web.default.svc.cluster.local | grep -q '$ip' && echo dns-service-ok
    timeout 10 wget -q -O - http://$web/ | grep -q hello-from-web && echo service-by-name-ok
    timeout 10 wget -q -O - http://$ip/ | grep -q hello-from-web && echo service-ip-ok
    nc -w 5 kubernetes.default 443 </dev/null && echo apiserver-service-ok
    timeout 10 wget -q -O - http://$REGISTRY/v2/_catalog | grep -q busybox && echo registry-from-pod-ok
  " >/dev/null
  if ! kubectl_ -n default wait "pod/$client" --for=jsonpath='{.status.phase}'=Succeeded --timeout 120s >/dev/null; then
    kubectl_ -n default logs "$client" >&2 || true
    die "check pod failed"
  fi
  out=$(kubectl_ -n default logs "$client")
  echo "$out"
  for want in dns-kubernetes-ok dns-service-ok service-by-name-ok service-ip-ok apiserver-service-ok registry-from-pod-ok; do
    echo "$out" | grep -qx "$want" || die "check: missing $want"
  done
  kubectl_ -n default logs "$web" | grep -q web-started || die "kubectl logs of the web pod"
  echo "kubectl-logs-ok"
  kubectl_ -n default exec "$web" -- cat /www/index.html | grep -q hello-from-web || die "kubectl exec"
  echo "kubectl-exec-ok"
  kubectl_ -n default delete pod,service -l devloop-check --ignore-not-found --grace-period 1 --wait=false >/dev/null
  log "check passed in $((SECONDS - t0))s"
}

# Sourced (node2.sh): the functions and variables above only.
[[ ${BASH_SOURCE[0]} == "$0" ]] || return 0

case ${1:-} in
  up) cmd_up ;;
  down) binaries --paths; cmd_down ;;
  clean) binaries --paths; cmd_clean ;;
  status) binaries --paths; cmd_status ;;
  check) binaries --paths; cmd_check ;;
  env) binaries --paths; print_env ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
esac
