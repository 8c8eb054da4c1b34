# shellcheck shell=bash disable=SC2034 # the templates read these variables, through render
# Sourced by cluster.sh (and render_test.sh): the cluster's config files,
# rendered from the templates in hack/cluster/config/. A template names the
# shell variables it needs as ${NAME}; nothing else in it is special.
#
# Reads the variables cluster.sh sets (STATE, PKI, KCFG, SOCK, NODE_IP,
# NODE_NAME, REGISTRY, APISERVER, POD_CIDR, CLUSTER_CIDR, BRIDGE, CNI_NET,
# PAUSE_IMAGE) and HOST_RESOLV_CONF.

CONFIG_TEMPLATES=$(cd "$(dirname "${BASH_SOURCE[0]}")/config" && pwd)

# render TEMPLATE: prints hack/cluster/config/TEMPLATE with every ${NAME}
# replaced by the value of the shell variable NAME (locals of the caller
# included). Plain bash, not envsubst: that is not on every Debian machine.
render() {
  local text='' out='' ref name
  IFS= read -r -d '' text <"$CONFIG_TEMPLATES/$1" || true
  while [[ $text =~ \$\{([A-Za-z_][A-Za-z0-9_]*)\} ]]; do
    ref=${BASH_REMATCH[0]} name=${BASH_REMATCH[1]}
    if [ -z "${!name+set}" ]; then
      echo "render: $1 uses \${$name}, which is not set" >&2
      return 1
    fi
    out+=${text%%"$ref"*}${!name}
    text=${text#*"$ref"}
  done
  printf '%s' "$out$text"
}

# kubeconfig FILE CERTNAME: a kubeconfig for the apiserver with embedded
# credentials ($PKI/CERTNAME.crt and .key), readable by root only.
kubeconfig() {
  local file=$1 CERT_NAME=$2 CA_DATA CERT_DATA KEY_DATA
  CA_DATA=$(base64 -w0 "$PKI/ca.crt")
  CERT_DATA=$(base64 -w0 "$PKI/$CERT_NAME.crt")
  KEY_DATA=$(base64 -w0 "$PKI/$CERT_NAME.key")
  render kubeconfig.yaml >"$file.tmp"
  chmod 600 "$file.tmp"
  mv "$file.tmp" "$file"
}

# write_configs: every component's config file, under $STATE.
write_configs() {
  local POD_GATEWAY=${POD_CIDR%.0/24}.1
  mkdir -p "$STATE/config" "$STATE/registry" "$STATE/containerd/certs.d/$REGISTRY" "$STATE/cni/net.d" "$STATE/run" "$STATE/pod-logs"
  render registry.yml >"$STATE/config/registry.yml"
  render hosts.toml >"$STATE/containerd/certs.d/$REGISTRY/hosts.toml"
  render containerd.toml >"$STATE/config/containerd.toml"
  render cni.conflist >"$STATE/cni/net.d/10-$CNI_NET.conflist"
  render kubelet.yaml >"$STATE/config/kubelet.yaml"
  render kube-proxy.yaml >"$STATE/config/kube-proxy.yaml"
  render Corefile >"$STATE/config/Corefile"
  render rbac.yaml >"$STATE/config/rbac.yaml"
}
