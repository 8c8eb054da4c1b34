# shellcheck shell=bash
# Sourced by node2.sh: cmd2_check, what a workload spread over both nodes
# relies on. A web pod on each node behind a Service of its own; a client
# pod on each node dials the other node's pod by IP, its Service by name
# and by IP, resolves cluster names, dials the apiserver's Service and the
# registry. Node 2's pods pull their image with pullPolicy Always, so every
# check also pulls from the registry on node 2. The pods tolerate the
# devloop.dev/node2-wip taint.

# check_pod NAME NODE LABELS COMMAND: a busybox pod pinned to NODE.
check_pod() {
  local name=$1 node=$2 labels=$3 command=$4
  kubectl_ -n default apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $name
  labels: {devloop-check: "2", $labels}
spec:
  nodeName: $node
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  tolerations: [{key: $TAINT, operator: Exists, effect: NoSchedule}]
  containers:
  - name: main
    image: $BUSYBOX_IMAGE
    imagePullPolicy: Always
    command:
    - sh
    - -c
    - |
$(echo "$command" | sed 's/^/      /')
EOF
}

# web_pod NAME NODE: an HTTP server answering its name, behind a Service NAME.
web_pod() {
  check_pod "$1" "$2" "app: $1" "mkdir -p /www && echo hello-from-$1 >/www/index.html && exec httpd -f -p 8080 -h /www"
  kubectl_ -n default expose pod "$1" --name "$1" --port 80 --target-port 8080 >/dev/null
}

# client_script WEB IP SVCIP: what a client pod runs against the web pod
# WEB (pod IP IP, Service IP SVCIP), printing one line per check passed.
client_script() {
  local web=$1 ip=$2 svc=$3
  cat <<EOF
timeout 10 wget -q -O - http://$ip:8080/ | grep -q hello-from-$web && echo pod-to-pod-ok
timeout 10 wget -q -O - http://$svc/ | grep -q hello-from-$web && echo service-ip-ok
timeout 10 wget -q -O - http://$web/ | grep -q hello-from-$web && echo service-by-name-ok
nslookup $web.default.svc.cluster.local | grep -q '$svc' && echo dns-service-ok
nslookup kubernetes.default.svc.cluster.local | grep -q '$SERVICE_IP' && echo dns-kubernetes-ok
nc -w 5 kubernetes.default 443 </dev/null && echo apiserver-service-ok
timeout 10 wget -q -O - http://$REGISTRY/v2/_catalog | grep -q busybox && echo registry-from-pod-ok
true
EOF
}

cmd2_check() {
  local t0=$SECONDS s=$$ n1=devloop n2=$NODE_NAME side web client ip svc out want failed=0
  node_ready || die "node $NODE_NAME is not Ready"
  kubectl_ -n default delete pod,service -l devloop-check=2 --ignore-not-found --grace-period 1 --wait=true >/dev/null
  # Fresh names every run: a recreated Service gets a new IP, which DNS caches may not know yet.
  web_pod "n1-web-$s" "$n1"
  web_pod "n2-web-$s" "$n2"
  kubectl_ -n default wait pod "n1-web-$s" "n2-web-$s" --for condition=Ready --timeout 120s >/dev/null ||
    { kubectl_ -n default describe pod -l devloop-check=2 >&2; die "web pods not Ready"; }
  log "web pods Ready on both nodes in $((SECONDS - t0))s"
  # The client on each node checks the web pod of the other.
  for side in "$n1 n2-web-$s n1-client-$s" "$n2 n1-web-$s n2-client-$s"; do
    set -- $side
    ip=$(kubectl_ -n default get pod "$2" -o jsonpath='{.status.podIP}')
    svc=$(kubectl_ -n default get service "$2" -o jsonpath='{.spec.clusterIP}')
    check_pod "$3" "$1" "client: \"1\"" "$(client_script "$2" "$ip" "$svc")"
  done
  for side in "$n1 n1-client-$s" "$n2 n2-client-$s"; do
    set -- $side
    kubectl_ -n default wait pod "$2" --for=jsonpath='{.status.phase}'=Succeeded --timeout 120s >/dev/null ||
      { kubectl_ -n default describe pod "$2" >&2; die "check pod $2 on $1 did not finish"; }
    out=$(kubectl_ -n default logs "$2")
    for want in pod-to-pod-ok service-ip-ok service-by-name-ok dns-service-ok dns-kubernetes-ok apiserver-service-ok registry-from-pod-ok; do
      if echo "$out" | grep -qx "$want"; then echo "$1: $want"; else echo "$1: FAILED ${want%-ok}"; failed=1; fi
    done
  done
  kubectl_ -n default exec "n2-web-$s" -- cat /www/index.html | grep -q "hello-from-n2-web-$s" && echo "$n2: kubectl-exec-ok" || failed=1
  kubectl_ -n default delete pod,service -l devloop-check=2 --ignore-not-found --grace-period 1 --wait=false >/dev/null
  [ $failed = 0 ] || die "check failed (see FAILED above)"
  log "check passed in $((SECONDS - t0))s"
}
