#!/usr/bin/env bash
# Brings up a real Kubernetes cluster on this machine, with no manual steps: etcd, kube-apiserver
# (Node,RBAC), kube-controller-manager, kube-scheduler, a private containerd (CRI) with offline
# images and a CNI bridge, kubelet and kube-proxy (iptables); one node, or ST_NODES (lib.sh).
# State, certificates, logs and kubeconfigs live in ${ST_CLUSTER_DIR:-/tmp/sidecar-terminator-cluster}.
# Writes $ST/env (KUBECONFIG and paths) for tests. Undo with down.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

t_start=$(date +%s.%N)
elapsed() { awk -v a="$t_start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

if [ "$(id -u)" != 0 ]; then echo "up.sh: must run as root" >&2; exit 1; fi
for cmd in etcd containerd ctr runc iptables ip6tables nft nfacct ip openssl curl conntrack base64 unshare nsenter \
    /usr/lib/cni/bridge /usr/lib/cni/host-local /usr/lib/cni/loopback; do
  command -v "$cmd" >/dev/null || { echo "up.sh: missing $cmd (Debian packages: etcd-server containerd runc iptables nftables nfacct iproute2 openssl curl conntrack util-linux containernetworking-plugins)" >&2; exit 1; }
done

BIN=${K8S_BIN_DIR:-$("$here/build-k8s.sh")}
for c in kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubelet kubectl; do
  [ -x "$BIN/$c" ] || { echo "up.sh: $BIN/$c missing (run build-k8s.sh)" >&2; exit 1; }
done

# containerd: Debian's 1.6, or containerd 2 built (or reused) now (lib.sh says which).
if [ "$ST_CONTAINERD" = 2 ]; then CONTAINERD_BIN=$("$here/build-containerd.sh"); else CONTAINERD_BIN=/usr/bin; fi
CTR=$CONTAINERD_BIN/ctr

# A previous cluster (or a crashed run) is cleaned up first.
"$here/down.sh" >/dev/null 2>&1 || true
rm -rf "$ST"
mkdir -p "$ST_LOGS" "$ST_RUN" "$ST_PKI" "$ST/etcd" "$CONTAINERD_DIR/cni" "$ST/kubelet" \
  "$ST/images" "$ST/cni-ipam"
for k in $(seq 2 "$NODES"); do
  nd=$(node_dir "$k")
  mkdir -p "$nd/containerd/cni" "$nd/kubelet" "$nd/cni-ipam"
  for p in "${NODE_PRIVATE_PATHS[@]}"; do mkdir -p "$nd/host$p"; done
done
# Like / on a systemd host, the state dir is a shared mount, so hostPath volumes with mount
# propagation (the agent's HostToContainer mount of the runtime directory) work as on real nodes.
mountpoint -q "$ST" || mount --bind "$ST" "$ST"
mount --make-rshared "$ST"
echo "$BIN" >"$ST_RUN/bin-dir"
echo "$CONTAINERD_BIN" >"$ST_RUN/containerd-bin-dir"

on_failure() {
  local rc=$?
  trap - ERR EXIT
  [ "$rc" = 0 ] && return 0
  echo "up.sh: FAILED after $(elapsed)s (exit $rc). Component logs:" >&2
  for f in "$ST_LOGS"/*.log; do
    [ -f "$f" ] || continue
    echo "==== $f (last 25 lines)" >&2
    tail -n 25 "$f" >&2
  done
  if [ "${ST_KEEP_ON_FAILURE:-0}" != 1 ]; then "$here/down.sh" >&2 || true; fi
  exit "$rc"
}
trap on_failure EXIT

# Everything we may change outside $ST is recorded so down.sh can undo exactly that.
claim_host
save_sysctls "${NETWORK_SYSCTLS[@]}" >"$ST_RUN/sysctl.orig"
nft list tables >"$ST_RUN/nft-tables.orig" 2>/dev/null || true
nfacct list 2>/dev/null | sed -n 's/.* = \(.*\);$/\1/p' >"$ST_RUN/nfacct.orig" || true
# Paths outside $ST that kubelet, libcni or mount(8) create regardless of our flags
# (device-plugins socket, CNI result cache, container log symlinks, libmount's utab dir).
for p in "${OUTSIDE_PATHS[@]}"; do [ -e "$p" ] || echo "$p"; done >"$ST_RUN/created-paths"

# The node's address: the default-route interface's IPv4 address (the hostname resolves to
# 127.0.0.1 here, and kubelet rejects a loopback node IP).
dev=$(ip -4 route show default | awk '{for (i = 1; i < NF; i++) if ($i == "dev") { print $(i + 1); exit }}')
[ -n "$dev" ] || { echo "up.sh: no IPv4 default route to find the node IP" >&2; exit 1; }
NODE_IP=$(ip -4 -o addr show dev "$dev" scope global | awk '{split($4, a, "/"); print a[1]; exit}')
[ -n "$NODE_IP" ] || { echo "up.sh: no IPv4 address on $dev" >&2; exit 1; }
NODE_NAME=$(hostname | tr '[:upper:]' '[:lower:]')
# node_name K: node 1 is named after the host, the others after it with their number.
node_name() { if [ "$1" = 1 ]; then echo "$NODE_NAME"; else echo "$NODE_NAME-$1"; fi; }
NODE_NAMES=()
for k in $(seq 1 "$NODES"); do NODE_NAMES+=("$(node_name "$k")"); done
log "nodes ${NODE_NAMES[*]}, IP $NODE_IP (on $dev), state in $ST, binaries in $BIN, containerd $ST_CONTAINERD from $CONTAINERD_BIN"

# ---------------------------------------------------------------- certificates
pki() { openssl "$@" 2>>"$ST_LOGS/openssl.log"; }
pki req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 \
  -subj "/CN=sidecar-terminator-e2e-ca" -keyout "$ST_PKI/ca.key" -out "$ST_PKI/ca.crt" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature"

# cert NAME SUBJECT USAGE(serverAuth|clientAuth) [SANS]
cert() {
  local name=$1 subj=$2 usage=$3 sans=${4:-} ca=${ca:-ca}
  pki req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "$subj" \
    -keyout "$ST_PKI/$name.key" -out "$ST_PKI/$name.csr"
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$usage"
    [ -z "$sans" ] || echo "subjectAltName=$sans"
  } >"$ST_PKI/$name.ext"
  pki x509 -req -in "$ST_PKI/$name.csr" -CA "$ST_PKI/$ca.crt" -CAkey "$ST_PKI/$ca.key" \
    -set_serial "0x$(openssl rand -hex 16)" -days 30 -extfile "$ST_PKI/$name.ext" -out "$ST_PKI/$name.crt"
  rm -f "$ST_PKI/$name.csr" "$ST_PKI/$name.ext"
}
cert apiserver "/CN=kube-apiserver" serverAuth \
  "DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost,DNS:$NODE_NAME,IP:127.0.0.1,IP:$NODE_IP,IP:$SERVICE_IP"
cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
cert admin "/O=system:masters/CN=kubernetes-admin" clientAuth
# Each node's kubelet: its own client identity (the Node authorizer and NodeRestriction hold it to
# its node) and serving certificate.
for k in $(seq 1 "$NODES"); do
  n=$(node_name "$k") c=$(node_component kubelet "$k")
  cert "$c-client" "/O=system:nodes/CN=system:node:$n" clientAuth
  cert "$c-serving" "/CN=$n" serverAuth "DNS:$n,DNS:localhost,IP:$NODE_IP,IP:127.0.0.1"
done
cert controller-manager "/CN=system:kube-controller-manager" clientAuth
cert scheduler "/CN=system:kube-scheduler" clientAuth
cert kube-proxy "/CN=system:kube-proxy" clientAuth
# Front proxy (aggregation layer) CA and client: the apiserver publishes this CA in
# kube-system/extension-apiserver-authentication, which the controller-manager and scheduler read.
pki req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 \
  -subj "/CN=sidecar-terminator-e2e-front-proxy-ca" -keyout "$ST_PKI/front-proxy-ca.key" -out "$ST_PKI/front-proxy-ca.crt" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature"
ca=front-proxy-ca cert front-proxy-client "/CN=front-proxy-client" clientAuth
pki genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$ST_PKI/sa.key"
pki pkey -in "$ST_PKI/sa.key" -pubout -out "$ST_PKI/sa.pub"
chmod 600 "$ST_PKI"/*.key

# kubeconfig FILE NAME: client cert/key pki/NAME.{crt,key}
kubeconfig() {
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: sidecar-terminator-e2e
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority-data: $(base64 -w0 "$ST_PKI/ca.crt")
users:
- name: $2
  user:
    client-certificate-data: $(base64 -w0 "$ST_PKI/$2.crt")
    client-key-data: $(base64 -w0 "$ST_PKI/$2.key")
contexts:
- name: $2@sidecar-terminator-e2e
  context:
    cluster: sidecar-terminator-e2e
    user: $2
current-context: $2@sidecar-terminator-e2e
EOF
  chmod 600 "$1"
}
for u in admin controller-manager scheduler kube-proxy; do
  kubeconfig "$ST/$u.kubeconfig" "$u"
done
for k in $(seq 1 "$NODES"); do
  kubeconfig "$ST/$(node_component kubelet "$k")-client.kubeconfig" "$(node_component kubelet "$k")-client"
done
KUBECTL=("$BIN/kubectl" --kubeconfig "$ST/admin.kubeconfig" --request-timeout=15s)

# start NAME COMMAND...: runs in its own session, output to logs/NAME.log, pid in run/NAME.pid.
start() {
  local name=$1; shift
  setsid "$@" </dev/null >"$ST_LOGS/$name.log" 2>&1 &
  echo $! >"$ST_RUN/$name.pid"
  log "started $name (pid $!), log $ST_LOGS/$name.log"
}
# wait_until DESCRIPTION SECONDS COMPONENT|- COMMAND...: polls COMMAND; fails early if COMPONENT died.
wait_until() {
  local what=$1 secs=$2 comp=$3; shift 3
  local deadline=$(( $(date +%s) + secs ))
  until "$@" >/dev/null 2>&1; do
    if [ "$comp" != - ] && ! pid_of "$comp" >/dev/null; then
      echo "up.sh: $comp exited while waiting for $what" >&2; return 1
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
      echo "up.sh: timed out after ${secs}s waiting for $what" >&2; return 1
    fi
    sleep 0.5
  done
  log "$what ($(elapsed)s)"
}

# ---------------------------------------------------------------- etcd + containerd
start etcd etcd --name=sidecar-terminator-e2e --data-dir="$ST/etcd" \
  --listen-client-urls="http://127.0.0.1:$ETCD_PORT" --advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster="sidecar-terminator-e2e=http://127.0.0.1:$ETCD_PEER_PORT" --initial-cluster-state=new \
  --listen-metrics-urls="" --logger=zap --log-outputs=stderr

# node_runtime K: node K's containerd config and CNI network. The shared template, plus two
# cluster-only settings: network namespaces and runc's state inside the node's directory instead
# of /var/run/netns and /run/containerd/runc.
node_runtime() {
  local k=$1 dir range=""
  dir=$(dirname "$(containerd_sock "$k")")
  sed -e "s|@DIR@|$dir|g" "$E2E_SRC/runtime/$CONTAINERD_TEMPLATE" \
    | sed -e 's|^\(\s*\)restrict_oom_score_adj = true|&\n\1netns_mounts_under_state_dir = true|' \
          -e "s|^\(\s*\)SystemdCgroup = false|&\n\1Root = \"$dir/runc\"|" \
    >"$dir/config.toml"
  grep -q netns_mounts_under_state_dir "$dir/config.toml" && grep -q "Root = " "$dir/config.toml" \
    || { echo "up.sh: could not adapt $CONTAINERD_TEMPLATE" >&2; exit 1; }
  # One bridge and subnet for all nodes (Pods reach each other as on one L2 network); each node
  # hands out addresses from its own quarter of it.
  if [ "$NODES" -gt 1 ]; then
    range=", \"rangeStart\": \"10.88.$(( (k - 1) * 64 )).2\", \"rangeEnd\": \"10.88.$(( k * 64 - 1 )).254\""
  fi
  cat >"$dir/cni/10-$CNI_NETWORK.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "$CNI_NETWORK",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$CNI_BRIDGE",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{ "subnet": "$POD_CIDR"$range }]],
        "routes": [{ "dst": "0.0.0.0/0" }],
        "dataDir": "$(node_dir "$k")/cni-ipam"
      }
    }
  ]
}
EOF
}

# node_namespace K: the mount namespace of node K (2..N), held by a process named after the node.
# In it, node K's containerd directory shows at node 1's path (where the agent's hostPath points),
# the paths kubelets and libcni use regardless of flags are private, and the node's directory is a
# shared mount of its own, like $ST on the host. Nothing mounted in it shows on the host.
node_namespace() {
  local k=$1 nd
  nd=$(node_dir "$k")
  for p in "${NODE_PRIVATE_PATHS[@]}"; do mkdir -p "$p"; done
  # shellcheck disable=SC2016
  start "$(node_component node "$k")" unshare --mount --propagation private -- bash -c '
    set -e
    nd=$1 containerd_dir=$2; shift 2
    mount --bind "$nd/containerd" "$containerd_dir"
    for p in "$@"; do mount --bind "$nd/host$p" "$p"; done
    mount --bind "$nd" "$nd"
    mount --make-rshared "$nd"
    touch "$nd/namespace-ready"
    exec -a "sidecar-terminator-node $nd" sleep infinity' node-namespace "$nd" "$CONTAINERD_DIR" "${NODE_PRIVATE_PATHS[@]}"
  wait_until "node $k's mount namespace" 10 "$(node_component node "$k")" test -e "$nd/namespace-ready"
}
# in_node K: the command prefix that runs a command in node K's mount namespace (none on node 1).
in_node() {
  IN_NODE=()
  [ "$1" = 1 ] || IN_NODE=(nsenter --target "$(pid_of "$(node_component node "$1")")" --mount --)
}

# Its runc shim is found on its PATH: containerd 2's own before Debian's.
for k in $(seq 1 "$NODES"); do
  node_runtime "$k"
  [ "$k" = 1 ] || node_namespace "$k"
  in_node "$k"
  start "$(node_component containerd "$k")" "${IN_NODE[@]}" env PATH="$CONTAINERD_BIN:$PATH" "$CONTAINERD_BIN/containerd" \
    --config "$(dirname "$(containerd_sock "$k")")/config.toml" --log-level info
done

bash "$E2E_SRC/images/build.sh" "$ST/images" >"$ST_LOGS/images.log" 2>&1

wait_until "etcd healthy" 60 etcd curl -sf "http://127.0.0.1:$ETCD_PORT/health"

# ---------------------------------------------------------------- control plane
# ContainerStopSignals (lifecycle.stopSignal) is alpha from 1.33 and off by default: on for the
# e2e tests of it (e2e/stop-semantics.test.ts), on the API server and kubelet alike.
FEATURE_GATES=""
if [ "$K8S_MINOR" -ge 33 ]; then FEATURE_GATES="ContainerStopSignals=true"; fi
start kube-apiserver "$BIN/kube-apiserver" ${FEATURE_GATES:+--feature-gates="$FEATURE_GATES"} \
  --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
  --bind-address=0.0.0.0 --secure-port="$APISERVER_PORT" --advertise-address="$NODE_IP" \
  --cert-dir="$ST/apiserver-certs" \
  --tls-cert-file="$ST_PKI/apiserver.crt" --tls-private-key-file="$ST_PKI/apiserver.key" \
  --client-ca-file="$ST_PKI/ca.crt" \
  --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
  --allow-privileged=true \
  --service-cluster-ip-range="$SERVICE_CIDR" \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="$ST_PKI/sa.pub" --service-account-signing-key-file="$ST_PKI/sa.key" \
  --kubelet-client-certificate="$ST_PKI/apiserver-kubelet-client.crt" \
  --kubelet-client-key="$ST_PKI/apiserver-kubelet-client.key" \
  --kubelet-certificate-authority="$ST_PKI/ca.crt" --kubelet-preferred-address-types=InternalIP \
  --requestheader-client-ca-file="$ST_PKI/front-proxy-ca.crt" --requestheader-allowed-names=front-proxy-client \
  --requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group \
  --requestheader-extra-headers-prefix=X-Remote-Extra- \
  --proxy-client-cert-file="$ST_PKI/front-proxy-client.crt" --proxy-client-key-file="$ST_PKI/front-proxy-client.key" \
  --profiling=false --v=1

for k in $(seq 1 "$NODES"); do
  sock=$(containerd_sock "$k")
  wait_until "$(node_component containerd "$k") serving" 60 "$(node_component containerd "$k")" "$CTR" -a "$sock" version
  for img in pause busybox quick-exit; do
    "$CTR" -a "$sock" -n k8s.io images import "$ST/images/$img.tar" >>"$ST_LOGS/images.log" 2>&1
  done
  log "images imported: $("$CTR" -a "$sock" -n k8s.io images ls -q 2>>"$ST_LOGS/images.log" | grep -v '^sha256:' | tr '\n' ' ')"
done

wait_until "kube-apiserver ready" 120 kube-apiserver curl -sf --cacert "$ST_PKI/ca.crt" \
  --cert "$ST_PKI/admin.crt" --key "$ST_PKI/admin.key" "https://127.0.0.1:$APISERVER_PORT/readyz"

# Many nodes: a node whose kubelet stops renewing its Lease is marked NotReady after 30 s instead of
# the default 40 to 50 s, for the tests of a node going away (e2e/nodes/).
NODE_MONITOR_GRACE=""
if [ "$NODES" -gt 1 ]; then NODE_MONITOR_GRACE="--node-monitor-grace-period=30s"; fi
start kube-controller-manager "$BIN/kube-controller-manager" \
  --kubeconfig="$ST/controller-manager.kubeconfig" \
  --authentication-kubeconfig="$ST/controller-manager.kubeconfig" \
  --authorization-kubeconfig="$ST/controller-manager.kubeconfig" \
  --bind-address=127.0.0.1 --secure-port=10257 --cert-dir="$ST/controller-manager-certs" \
  --leader-elect=false --controllers='*' --use-service-account-credentials=true \
  --service-account-private-key-file="$ST_PKI/sa.key" --root-ca-file="$ST_PKI/ca.crt" \
  --cluster-signing-cert-file="$ST_PKI/ca.crt" --cluster-signing-key-file="$ST_PKI/ca.key" \
  --cluster-name=sidecar-terminator-e2e --allocate-node-cidrs=false ${NODE_MONITOR_GRACE:+"$NODE_MONITOR_GRACE"} \
  --service-cluster-ip-range="$SERVICE_CIDR" --profiling=false --v=1

cat >"$ST/scheduler.yaml" <<EOF
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: $ST/scheduler.kubeconfig
leaderElection:
  leaderElect: false
EOF
start kube-scheduler "$BIN/kube-scheduler" --config="$ST/scheduler.yaml" \
  --authentication-kubeconfig="$ST/scheduler.kubeconfig" --authorization-kubeconfig="$ST/scheduler.kubeconfig" \
  --bind-address=127.0.0.1 --secure-port=10259 --cert-dir="$ST/scheduler-certs" --v=1

# ---------------------------------------------------------------- nodes
# node_kubelet K: node K's kubelet. Nodes 2..N differ from node 1 in what cannot be shared on one
# host: ports, directories, certificates, the cgroup under which their Pods run (two kubelets
# under the same /kubepods remove each other's Pods), and their mount namespace.
node_kubelet() {
  local k=$1 nd c cgroup_root port healthz_port
  nd=$(node_dir "$k") c=$(node_component kubelet "$k") cgroup_root=$(node_cgroup_root "$k")
  port=10250 healthz_port=10248
  [ "$k" = 1 ] || port=$(( 12000 + 10 * k )) healthz_port=$(( 12000 + 10 * k + 8 ))
  if [ "$cgroup_root" != / ]; then
    # Its cgroup (below the cluster's, if any) in every v1 hierarchy, with cpuset's CPUs and memory
    # nodes from its parent's.
    local h dir parent dirs=()
    [ -z "$CLUSTER_CGROUP" ] || [ "$CLUSTER_CGROUP" = "$cgroup_root" ] || dirs+=("$CLUSTER_CGROUP")
    dirs+=("$cgroup_root")
    for h in $(awk '$3 == "cgroup" { print $2 }' /proc/mounts); do
      parent=$h
      for dir in "${dirs[@]}"; do
        mkdir -p "$h$dir"
        if [ -f "$h/cpuset.cpus" ]; then
          cat "$parent/cpuset.cpus" >"$h$dir/cpuset.cpus"
          cat "$parent/cpuset.mems" >"$h$dir/cpuset.mems"
        fi
        parent=$h$dir
      done
    done
  fi
  cat >"$nd/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# No systemd here, and cgroup v1 (accepted by 1.33 while failCgroupV1 is false).
cgroupDriver: cgroupfs
failCgroupV1: false
# Root lacks CAP_SYS_RESOURCE and the open-files limit is fixed at 20000.
oomScoreAdj: 0
maxOpenFiles: 20000
containerRuntimeEndpoint: unix://$(containerd_sock "$k")
$([ "$cgroup_root" = / ] || echo "cgroupRoot: $cgroup_root")
port: $port
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: $ST_PKI/ca.crt
authorization:
  mode: Webhook
tlsCertFile: $ST_PKI/$c-serving.crt
tlsPrivateKeyFile: $ST_PKI/$c-serving.key
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $healthz_port
# Disks can run low here: explicit low thresholds, and image GC must never remove the
# hand-imported images (nothing can be pulled again).
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  nodefs.inodesFree: 1%
  imagefs.available: 1%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
failSwapOn: false
podLogsDir: $nd/pod-logs
volumePluginDir: $nd/kubelet/volume-plugins
clusterDomain: cluster.local
serializeImagePulls: false
rotateCertificates: false
serverTLSBootstrap: false
EOF
  in_node "$k"
  start "$c" "${IN_NODE[@]}" "$BIN/kubelet" ${FEATURE_GATES:+--feature-gates="$FEATURE_GATES"} --config="$nd/kubelet/config.yaml" \
    --kubeconfig="$ST/$c-client.kubeconfig" --root-dir="$nd/kubelet" --cert-dir="$nd/kubelet/pki" \
    --node-ip="$NODE_IP" --hostname-override="$(node_name "$k")" --v=2
}
for k in $(seq 1 "$NODES"); do node_kubelet "$k"; done

cat >"$ST/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: $ST/kube-proxy.kubeconfig
mode: iptables
hostnameOverride: $NODE_NAME
clusterCIDR: $POD_CIDR
oomScoreAdj: 0
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: ["$NODE_IP/32"]
# Leave the machine's conntrack and route_localnet settings alone.
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
iptables:
  localhostNodePorts: false
  syncPeriod: 30s
  minSyncPeriod: 1s
EOF
start kube-proxy "$BIN/kube-proxy" --config="$ST/kube-proxy.yaml" --oom-score-adj=0 --v=1

# ---------------------------------------------------------------- readiness
node_ready() {
  [ "$("${KUBECTL[@]}" get node "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
}
for k in $(seq 1 "$NODES"); do
  wait_until "node $(node_name "$k") Ready" 180 "$(node_component kubelet "$k")" node_ready "$(node_name "$k")"
done
wait_until "default ServiceAccount" 60 kube-controller-manager "${KUBECTL[@]}" -n default get serviceaccount default
wait_until "kube-root-ca.crt ConfigMap" 60 kube-controller-manager "${KUBECTL[@]}" -n default get configmap kube-root-ca.crt
wait_until "kube-proxy healthy" 60 kube-proxy curl -sf http://127.0.0.1:10256/healthz

# A test Pod through the whole path on each node: scheduler (node 1), kubelet, CNI, image,
# container, logs via kubelet.
for k in $(seq 1 "$NODES"); do
  "${KUBECTL[@]}" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: cluster-up-check-$k
  namespace: default
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
$([ "$k" = 1 ] || echo "  nodeName: $(node_name "$k")")
  containers:
  - name: check
    image: sidecar-terminator.local/busybox:1
    imagePullPolicy: Never
    command: ["sh", "-c", "echo cluster-up-check-ok"]
EOF
done
pod_done() {
  local phase
  phase=$("${KUBECTL[@]}" -n default get pod "$1" -o jsonpath='{.status.phase}')
  [ "$phase" = Failed ] && { echo "up.sh: test Pod $1 failed" >&2; "${KUBECTL[@]}" -n default describe pod "$1" >&2; exit 1; }
  [ "$phase" = Succeeded ]
}
for k in $(seq 1 "$NODES"); do
  check=cluster-up-check-$k
  wait_until "test Pod on $(node_name "$k") succeeded" 120 "$(node_component kubelet "$k")" pod_done "$check"
  pod_ip=$("${KUBECTL[@]}" -n default get pod "$check" -o jsonpath='{.status.podIP}')
  "${KUBECTL[@]}" -n default logs "$check" | grep -q cluster-up-check-ok \
    || { echo "up.sh: kubectl logs of the test Pod on $(node_name "$k") failed" >&2; exit 1; }
  "${KUBECTL[@]}" -n default delete pod "$check" --wait=true --timeout=60s >/dev/null
  log "test Pod ran on $(node_name "$k") (pod IP $pod_ip), kubectl logs works"
done

cat >"$ST/env" <<EOF
export ST_CLUSTER_DIR=$ST
export KUBECONFIG=$ST/admin.kubeconfig
export ST_NODE_NAME=$NODE_NAME
export ST_NODE_NAMES="${NODE_NAMES[*]}"
export ST_CONTAINERD_SOCKS="$(for k in $(seq 1 "$NODES"); do containerd_sock "$k"; done | tr '\n' ' ' | sed 's/ $//')"
export ST_NODE_IP=$NODE_IP
export ST_CONTAINERD_SOCK=$CONTAINERD_SOCK
export ST_CONTAINERD_VERSION=$("$CTR" -a "$CONTAINERD_SOCK" version 2>/dev/null | awk '/^Server:/ { s = 1 } s && $1 == "Version:" { print $2; exit }')
$(if [ "$CONTAINERD_BIN" != /usr/bin ]; then
  # containerd 2's own ctr first. Only its directory: /usr/bin first would put Debian's Node before the project's.
  echo "export PATH=$CONTAINERD_BIN:\$PATH"
fi)
export ST_CONTAINERD_NAMESPACE=k8s.io
export ST_K8S_BIN=$BIN
export ST_K8S_VERSION=$K8S_VERSION
export ST_IMAGES_DIR=$ST/images
export ST_POD_CIDR=$POD_CIDR
export ST_SERVICE_IP=$SERVICE_IP
export ST_LOGS_DIR=$ST_LOGS
EOF
trap - EXIT
log "cluster up in $(elapsed)s; env file $ST/env; kubeconfig $ST/admin.kubeconfig"
echo "cluster start-up time: $(elapsed)s"
