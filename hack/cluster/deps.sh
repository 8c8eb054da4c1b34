#!/usr/bin/env bash
# Installs the Debian packages the local cluster needs, only those missing.
# Usage: hack/cluster/deps.sh   (root)
set -euo pipefail

# git and make also go into the sample Go builder image (internal/devcluster/images_tools.go).
PKGS=(containerd runc containernetworking-plugins docker-registry openssl iptables conntrack busybox-static git make iproute2 procps)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "cluster: missing Debian packages (${missing[*]}); run as root or install them" >&2
  exit 1
fi
echo "cluster: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# --no-install-recommends: containerd recommends nothing we need; keep the machine small.
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# Debian's containerd package enables and starts its own systemd service where
# systemd runs; the cluster runs its own containerd with its own config and
# socket, so the packaged service is left alone (it does not run here: no systemd).
