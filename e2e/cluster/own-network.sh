#!/usr/bin/env bash
# Runs COMMAND (an e2e run: its cluster, its tests and its teardown) in a network and a mount
# namespace of its own, so that it can run beside a cluster on the host's network: its own links,
# addresses, ports, iptables rules (kube-proxy's, the CNI bridge's) and conntrack table, and its own
# /run, /var/lib and /var/log, where kubelet and libcni keep what their flags do not move. lib.sh
# gives its Pods a cgroup of their own; the machine's kernel settings stay shared (claim_host).
# Nothing mounted in it shows on the host, and both namespaces end with its last process.
# Nothing outside is reached from it: what COMMAND builds (build-k8s.sh, build-helm.sh,
# build-containerd.sh) must be built first.
# Usage: own-network.sh COMMAND...
set -euo pipefail
if [ "${ST_IN_OWN_NETWORK:-0}" != 1 ]; then
  [ "$(id -u)" = 0 ] || { echo "own-network.sh: must run as root" >&2; exit 1; }
  exec unshare --net --mount --propagation private -- env ST_IN_OWN_NETWORK=1 bash "$0" "$@"
fi
# The node's address: up.sh takes the default route's, and kubelet refuses a loopback one. The
# link's other end stays here too: nothing outside is reached.
ip link set lo up
ip link add st-node type veth peer name st-node-peer
ip addr add 10.211.0.2/24 dev st-node
ip link set st-node up
ip link set st-node-peer up
ip route add default via 10.211.0.1 dev st-node onlink
# The host's clusters' mounts (copied into this namespace) would keep their Pods' filesystems and
# network namespaces alive here after those clusters remove them.
awk '$5 ~ /^\/tmp\/sidecar-terminator-cluster/ { print $5 }' /proc/self/mountinfo | sort -r \
  | while read -r m; do umount -l "$m" 2>/dev/null || true; done
for dir in /run /var/lib /var/log; do mount -t tmpfs -o mode=0755 sidecar-terminator-own-network "$dir"; done
exec "$@"
