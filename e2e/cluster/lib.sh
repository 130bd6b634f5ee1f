# Settings and helpers shared by up.sh and down.sh (sourced, not run).
# shellcheck shell=bash

CLUSTER_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
E2E_SRC=$(cd "$CLUSTER_SRC/.." && pwd)
# shellcheck source=versions.env
source "$CLUSTER_SRC/versions.env"

ST=${ST_CLUSTER_DIR:-/tmp/sidecar-terminator-cluster}
ST_LOGS=$ST/logs
ST_RUN=$ST/run
ST_PKI=$ST/pki
DEFAULT_BIN=${K8S_BIN_DIR:-$HOME/.cache/sidecar-terminator/k8s-$K8S_VERSION/bin}

ETCD_PORT=${ST_ETCD_PORT:-23790}
ETCD_PEER_PORT=${ST_ETCD_PEER_PORT:-23800}
APISERVER_PORT=${ST_APISERVER_PORT:-6443}
SERVICE_CIDR=10.0.0.0/24
SERVICE_IP=10.0.0.1
POD_CIDR=10.88.0.0/16
CNI_NETWORK=sidecar-terminator
CNI_BRIDGE=st-cni0
CONTAINERD_DIR=$ST/containerd
CONTAINERD_SOCK=$CONTAINERD_DIR/containerd.sock
# Which containerd runs the node: Debian's 1.6 (config version 2), or containerd 2 (config version 3)
# built from its Go module by build-containerd.sh, from CONTAINERD2_FROM_MINOR (versions.env) on.
# ST_CONTAINERD=1.6 or 2 picks one for any release.
K8S_MINOR=${K8S_VERSION#v1.}; K8S_MINOR=${K8S_MINOR%%.*}
if [ -z "${ST_CONTAINERD:-}" ]; then
  if [ "$K8S_MINOR" -ge "$CONTAINERD2_FROM_MINOR" ]; then ST_CONTAINERD=2; else ST_CONTAINERD=1.6; fi
fi
case $ST_CONTAINERD in
  1.6) CONTAINERD_TEMPLATE=containerd.toml.tmpl ;;
  2) CONTAINERD_TEMPLATE=containerd2.toml.tmpl ;;
  *) echo "ST_CONTAINERD=$ST_CONTAINERD: expected 1.6 or 2" >&2; exit 1 ;;
esac

# Kernel settings that kubelet (and kube-proxy) may change. The machine's are one for every cluster on
# it: the first cluster up saves them and the last one down restores them (claim_host,
# release_host). A network's are its own: each cluster saves them in up.sh and restores them in
# down.sh (a cluster in a network namespace of its own, own-network.sh, has fresh ones).
MACHINE_SYSCTLS=(
  vm.overcommit_memory kernel.panic kernel.panic_on_oops vm.panic_on_oom
  kernel.keys.root_maxkeys kernel.keys.root_maxbytes
)
NETWORK_SYSCTLS=(
  net.ipv4.conf.all.route_localnet net.bridge.bridge-nf-call-iptables net.ipv4.ip_forward
  net.netfilter.nf_conntrack_max net.netfilter.nf_conntrack_tcp_timeout_established
  net.netfilter.nf_conntrack_tcp_timeout_close_wait
)
# What these machines are expected to have when no saved copy exists.
DEFAULT_SYSCTLS=(vm.overcommit_memory=0 kernel.panic=1 kernel.panic_on_oops=0)

# The clusters up on this machine, one file each, and the machine's settings from before the first.
HOST_CLAIMS=${ST_HOST_CLAIMS:-/tmp/sidecar-terminator-host}
# save_sysctls NAME...: NAME=VALUE lines for the ones this kernel has.
save_sysctls() {
  local s v
  for s in "$@"; do v=$(sysctl -n "$s" 2>/dev/null) && echo "$s=$v"; done
}
# restore_sysctls FILE: back to the NAME=VALUE lines in FILE.
restore_sysctls() {
  local kv k v rc=0
  while IFS= read -r kv; do
    [ -n "$kv" ] || continue
    k=${kv%%=*} v=${kv#*=}
    [ "$(sysctl -n "$k" 2>/dev/null)" = "$v" ] || sysctl -qw "$k=$v" >/dev/null 2>&1 || { log "WARNING: could not restore $kv"; rc=1; }
  done <"$1"
  return "$rc"
}
# claim_host: this cluster is up; the first one saves the machine's settings.
claim_host() {
  mkdir -p "$HOST_CLAIMS/clusters"
  (
    flock 8
    [ -n "$(ls -A "$HOST_CLAIMS/clusters")" ] || save_sysctls "${MACHINE_SYSCTLS[@]}" >"$HOST_CLAIMS/sysctl.orig"
    touch "$HOST_CLAIMS/clusters/$(echo "$ST" | tr / _)"
  ) 8>>"$HOST_CLAIMS.lock"
}
# release_host: this cluster is down; the last one restores the machine's settings (or, with no
# saved copy, the expected ones) and removes the claims.
release_host() {
  (
    flock 8
    rm -f "$HOST_CLAIMS/clusters/$(echo "$ST" | tr / _)"
    [ -z "$(ls -A "$HOST_CLAIMS/clusters" 2>/dev/null)" ] || exit 0
    if [ -f "$HOST_CLAIMS/sysctl.orig" ]; then
      restore_sysctls "$HOST_CLAIMS/sysctl.orig"
    else
      restore_sysctls <(printf '%s\n' "${DEFAULT_SYSCTLS[@]}")
    fi
    local rc=$?
    rm -rf "$HOST_CLAIMS"
    exit "$rc"
  ) 8>>"$HOST_CLAIMS.lock"
}

# Paths outside $ST that the cluster creates if they are missing; down.sh removes the ones up.sh
# found missing (their contents are ours then).
OUTSIDE_PATHS=(/var/lib/kubelet /var/lib/cni /var/log/containers /var/log/pods /run/mount)

# Components in start order; down.sh stops them in reverse.
COMPONENTS=(etcd containerd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy)

# Nodes: ST_NODES=1 (the default) is one node on the host's own mounts. Each further node k (2..4)
# runs its own containerd and kubelet in a mount namespace of its own (components node-k,
# containerd-k, kubelet-k), where its state shows at node 1's paths: the agent DaemonSet's one
# hostPath reaches each node's own runtime socket, as on real nodes. Kubelet on 1.30+ only
# (podLogsDir): older kubelets share /var/log/pods, and each one's log GC deletes the others' logs.
NODES=${ST_NODES:-1}
case $NODES in
  1 | 2 | 3 | 4) ;;
  *) echo "ST_NODES=$NODES: expected 1 to 4" >&2; exit 1 ;;
esac
if [ "$NODES" -gt 1 ] && [ "$K8S_MINOR" -lt 30 ]; then
  echo "ST_NODES=$NODES needs Kubernetes 1.30 or later (kubelet's podLogsDir); $K8S_VERSION has none" >&2; exit 1
fi
# node_dir K: node K's own state (node 1's is $ST itself).
node_dir() { if [ "$1" = 1 ]; then echo "$ST"; else echo "$ST/nodes/$1"; fi; }
# containerd_sock K: node K's containerd socket, as the host sees it.
containerd_sock() { if [ "$1" = 1 ]; then echo "$CONTAINERD_SOCK"; else echo "$(node_dir "$1")/containerd/containerd.sock"; fi; }
# node_component NAME K: the component's name on node K (containerd, containerd-2, ...).
node_component() { if [ "$2" = 1 ]; then echo "$1"; else echo "$1-$2"; fi; }
# The cgroup under which node K's kubelet puts its Pods: node 1's is the root, as usual, except in a
# network of its own (own-network.sh), where a cluster runs beside one on the host's network and
# takes a cgroup named after its state directory.
CLUSTER_CGROUP=""
[ "${ST_IN_OWN_NETWORK:-0}" != 1 ] || CLUSTER_CGROUP=/$(basename "$ST")
# cluster_cgroups: the cgroups (in every hierarchy) under which this cluster's Pods run.
cluster_cgroups() {
  if [ -n "$CLUSTER_CGROUP" ]; then
    ls -d /sys/fs/cgroup/*"$CLUSTER_CGROUP" 2>/dev/null
  else
    ls -d /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/*/sidecar-terminator-node-* 2>/dev/null
  fi
  return 0
}
node_cgroup_root() { if [ "$1" = 1 ]; then echo "${CLUSTER_CGROUP:-/}"; else echo "$CLUSTER_CGROUP/sidecar-terminator-node-$1"; fi; }
# Host paths a kubelet or libcni uses whatever its flags say: a private copy each on nodes 2..N.
NODE_PRIVATE_PATHS=(/var/lib/kubelet /var/lib/cni /var/log/containers /var/log/pods)

log() { echo "[cluster $(date +%H:%M:%S)] $*" >&2; }

# pid_of NAME: the recorded pid if that process is still ours (its command line names $ST).
pid_of() {
  local f=$ST_RUN/$1.pid pid
  [ -f "$f" ] || return 1
  pid=$(cat "$f")
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF "$ST" || return 1
  echo "$pid"
}

# wait_gone PID SECONDS: 0 once the process is gone (zombies count as gone).
wait_gone() {
  local pid=$1 deadline=$(( $(date +%s) + $2 ))
  while [ -e "/proc/$pid" ] && [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ]; do
    [ "$(date +%s)" -ge "$deadline" ] && return 1
    sleep 0.2
  done
}

# stop_component NAME [GRACE_SECONDS]: SIGTERM, then SIGKILL after the grace period.
stop_component() {
  local name=$1 grace=${2:-10} pid
  pid=$(pid_of "$name") || { rm -f "$ST_RUN/$name.pid"; return 0; }
  log "stopping $name (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  if ! wait_gone "$pid" "$grace"; then
    log "$name did not stop in ${grace}s: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    wait_gone "$pid" 5 || log "WARNING: $name (pid $pid) still present"
  fi
  rm -f "$ST_RUN/$name.pid"
}
