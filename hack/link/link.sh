#!/usr/bin/env bash
# link.sh: the laptop of the remote-cluster benchmark (issue 46), on this
# machine. The laptop's side (the plugin, Tilt, `go build`) runs in a
# network namespace of its own, joined to the host by a veth pair, so
# every byte it sends to the cluster's API server and registry crosses
# that link while traffic inside the cluster does not:
#   - tc's tbf on each end of the veth limits each direction's rate (this
#     kernel has no netem);
#   - `link proxy` (hack/link) adds the round trip: inside the namespace,
#     the API server and the registry (10.250.0.1:6443, :5000) are
#     rewritten (DNAT) to the proxy on the host's end of the link, which
#     forwards each chunk half a round trip after it read it.
# The namespace is a bind-mounted file of our own (LOCAL-CLUSTER.md: never
# `ip netns add` beside containerd's /run/netns).
#
#   link.sh up office|home|UP_MBIT:DOWN_MBIT:RTT_MS
#   link.sh run CMD...     CMD in the laptop's namespace, KUBECONFIG set
#   link.sh check          the link's round trip and rates, measured
#   link.sh down           remove all of it
#   link.sh status
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DIR=${LINK_DIR:-/run/devloop-link}
NETNS=$DIR/netns
CLUSTER_DIR=${CLUSTER_DIR:-$ROOT/bin/cluster}
NODE_IP=10.250.0.1
HOST_IP=10.251.0.1
LAPTOP_IP=10.251.0.2
HOST_IF=dlink-host
LAPTOP_IF=dlink-laptop
LINK_BIN=$ROOT/bin/link

profile() {
  case "$1" in
  office) echo "100:100:10" ;;            # 100 Mbit/s each way, 10 ms round trip
  home) echo "20:100:40" ;;               # 20 Mbit/s up, 100 down, 40 ms
  *:*:*) echo "$1" ;;
  *) echo "unknown link profile $1 (office, home or UP_MBIT:DOWN_MBIT:RTT_MS)" >&2; exit 2 ;;
  esac
}

in_ns() { nsenter --net="$NETNS" -- "$@"; }

up() {
  local p up_mbit down_mbit rtt_ms
  p=$(profile "${1:-office}")
  IFS=: read -r up_mbit down_mbit rtt_ms <<<"$p"
  down # whatever an earlier run left
  mkdir -p "$DIR"
  (cd "$ROOT" && go build -o "$LINK_BIN" ./hack/link)
  touch "$NETNS"
  unshare --net="$NETNS" true
  ip link add "$HOST_IF" type veth peer name "$LAPTOP_IF"
  # ip moves a link into a namespace by a PID in it.
  nsenter --net="$NETNS" -- sleep 60 &
  local holder=$! want
  want=$(stat -L -c %i "$NETNS")
  until [ "$(stat -L -c %i "/proc/$holder/ns/net" 2>/dev/null)" = "$want" ]; do sleep 0.05; done
  ip link set "$LAPTOP_IF" netns "$holder"
  kill "$holder" 2>/dev/null || true
  ip addr add "$HOST_IP/30" dev "$HOST_IF"
  ip link set "$HOST_IF" up
  in_ns ip link set lo up
  in_ns ip addr add "$LAPTOP_IP/30" dev "$LAPTOP_IF"
  in_ns ip link set "$LAPTOP_IF" up
  in_ns ip route add default via "$HOST_IP"
  # Each direction's rate: the egress of each end (burst and queue sized
  # for a few ms at the rate, as a modem's buffer).
  tc qdisc add dev "$HOST_IF" root tbf rate "${down_mbit}mbit" burst 64kb latency 200ms
  in_ns tc qdisc add dev "$LAPTOP_IF" root tbf rate "${up_mbit}mbit" burst 64kb latency 200ms
  # The round trip: the cluster's API server and registry, as the
  # laptop's kubeconfig and images name them, go to the proxy.
  in_ns iptables -t nat -A OUTPUT -p tcp -d "$NODE_IP" --dport 6443 -j DNAT --to-destination "$HOST_IP:16443"
  in_ns iptables -t nat -A OUTPUT -p tcp -d "$NODE_IP" --dport 5000 -j DNAT --to-destination "$HOST_IP:15000"
  "$LINK_BIN" proxy --rtt "${rtt_ms}ms" \
    --routes "$HOST_IP:16443=$NODE_IP:6443,$HOST_IP:15000=$NODE_IP:5000" >"$DIR/proxy.log" 2>&1 &
  echo $! >"$DIR/proxy.pid"
  echo "$p" >"$DIR/profile"
  # The laptop's kubeconfig: the API server by the node's address (in its
  # serving certificate), which the DNAT above sends through the link.
  if [ -f "$CLUSTER_DIR/kubeconfig" ]; then
    sed "s#server: https://127.0.0.1:6443#server: https://$NODE_IP:6443#" "$CLUSTER_DIR/kubeconfig" >"$DIR/kubeconfig"
  fi
  echo "link up: ${up_mbit} Mbit/s up, ${down_mbit} Mbit/s down, ${rtt_ms} ms round trip (laptop $LAPTOP_IP in $NETNS)"
}

down() {
  if [ -f "$DIR/proxy.pid" ]; then
    kill "$(cat "$DIR/proxy.pid")" 2>/dev/null || true
    rm -f "$DIR/proxy.pid"
  fi
  ip link del "$HOST_IF" 2>/dev/null || true
  if grep -q " $NETNS " /proc/self/mountinfo; then
    umount "$NETNS" || true
  fi
  rm -rf "$DIR"
}

status() {
  if [ ! -f "$DIR/proxy.pid" ]; then
    echo "link down"
    return
  fi
  echo "link up: profile $(cat "$DIR/profile") (up Mbit/s:down Mbit/s:round trip ms), proxy PID $(cat "$DIR/proxy.pid")"
  tc qdisc show dev "$HOST_IF"
  in_ns tc qdisc show dev "$LAPTOP_IF"
}

case "${1:-}" in
up) shift; up "$@" ;;
down) down ;;
status) status ;;
run) shift; in_ns env KUBECONFIG="$DIR/kubeconfig" "$@" ;;
check) in_ns "$LINK_BIN" check --registry "$NODE_IP:5000" ;;
*) sed -n '2,20p' "$0"; exit 2 ;;
esac
