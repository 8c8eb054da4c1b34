#!/usr/bin/env bash
# Renders every config file of the local cluster through configs.sh, with
# fixed sample variables, and compares each with its golden file in
# testdata/configs/: those were written by the heredocs cluster.sh had
# before the templates, so the templates must give the same bytes. The state
# directory is a temporary one, written /STATE in the golden files.
#
# Usage: hack/cluster/render_test.sh   (exit 0: all the same; run by render_test.go)
# shellcheck disable=SC2034 # the templates read the sample variables, through render
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
GOLDEN=$HERE/testdata/configs
# shellcheck source=configs.sh
. "$HERE/configs.sh"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The sample values the golden files were made with.
STATE=$tmp/state
NODE_IP=10.1.2.3 NODE_NAME=sample-node REGISTRY=10.1.2.3:5555
POD_CIDR=10.9.8.0/24 CLUSTER_CIDR=10.9.0.0/16
BRIDGE=samplebr0 CNI_NET=samplenet PAUSE_IMAGE=10.1.2.3:5555/pause:sample
APISERVER=https://127.0.0.1:7443 HOST_RESOLV_CONF=/etc/resolv.conf
PKI=$STATE/pki KCFG=$STATE/kubeconfigs SOCK=$STATE/run/containerd.sock
mkdir -p "$PKI" "$KCFG"
printf 'sample CA certificate\n' >"$PKI/ca.crt"
printf 'sample client certificate\n' >"$PKI/sample.crt"
printf 'sample client key\n' >"$PKI/sample.key"

write_configs
kubeconfig "$KCFG/sample.kubeconfig" sample

# Each file, as the path under $STATE it is written to and its golden file.
expected=(
  "config/registry.yml registry.yml"
  "containerd/certs.d/$REGISTRY/hosts.toml hosts.toml"
  "config/containerd.toml containerd.toml"
  "cni/net.d/10-$CNI_NET.conflist 10-samplenet.conflist"
  "config/kubelet.yaml kubelet.yaml"
  "config/kube-proxy.yaml kube-proxy.yaml"
  "config/Corefile Corefile"
  "config/rbac.yaml rbac.yaml"
  "kubeconfigs/sample.kubeconfig sample.kubeconfig"
)
fail=0
for pair in "${expected[@]}"; do
  read -r file golden <<<"$pair"
  if ! cmp -s <(sed "s|$STATE|/STATE|g" "$STATE/$file") "$GOLDEN/$golden"; then
    echo "FAIL: $file differs from testdata/configs/$golden:" >&2
    diff <(sed "s|$STATE|/STATE|g" "$STATE/$file") "$GOLDEN/$golden" >&2 || true
    fail=1
  fi
done
# Nothing else is written (the PKI is the test's own input).
written=$(find "$STATE" -type f ! -path "$PKI/*" | wc -l)
if [ "$written" != "${#expected[@]}" ]; then
  echo "FAIL: $written files written, want ${#expected[@]}:" >&2
  find "$STATE" -type f ! -path "$PKI/*" >&2
  fail=1
fi
if [ "$(stat -c %a "$KCFG/sample.kubeconfig")" != 600 ]; then
  echo "FAIL: the kubeconfig is mode $(stat -c %a "$KCFG/sample.kubeconfig"), want 600" >&2
  fail=1
fi
# A template naming a variable that is not set is an error, not an empty value.
unset NODE_IP
if render kubelet.yaml >/dev/null 2>&1; then
  echo "FAIL: render succeeded without NODE_IP" >&2
  fail=1
fi
[ $fail = 0 ] && echo "ok: ${#expected[@]} config files as the heredocs wrote them"
exit $fail
