#!/usr/bin/env bash
# Tears down the cluster started by up.sh; idempotent, safe to run when nothing is up.
# Leaves no process, mount, cgroup, iptables chain, network link or changed sysctl behind.
# Keeps $ST/logs for inspection; everything else in $ST is removed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

if [ "$(id -u)" != 0 ]; then echo "down.sh: must run as root" >&2; exit 1; fi
t0=$(date +%s)
BIN=$(cat "$ST_RUN/bin-dir" 2>/dev/null || echo "$DEFAULT_BIN")
KUBECTL=("$BIN/kubectl" --kubeconfig "$ST/admin.kubeconfig" --request-timeout=10s)
problems=0

# 1. Let Kubernetes itself tear the Pods down while everything still runs, so the kubelet stops
#    the sandboxes (CNI DEL) and unmounts volumes. Best effort, bounded in time.
if pid_of kube-apiserver >/dev/null && pid_of kubelet >/dev/null && [ -f "$ST/admin.kubeconfig" ] \
    && "${KUBECTL[@]}" get --raw /readyz >/dev/null 2>&1; then
  for ns in $("${KUBECTL[@]}" get namespaces -o name 2>/dev/null | sed 's|^namespace/||'); do
    case $ns in default | kube-system | kube-public | kube-node-lease) ;;
      *) "${KUBECTL[@]}" delete namespace "$ns" --wait=false >/dev/null 2>&1 ;;
    esac
  done
  "${KUBECTL[@]}" delete pods --all -n default --grace-period=2 --wait=false >/dev/null 2>&1
  "${KUBECTL[@]}" delete pods --all -n kube-system --grace-period=2 --wait=false >/dev/null 2>&1
  t_drain=$(date +%s)
  deadline=$(( t_drain + 60 ))
  while [ -n "$("${KUBECTL[@]}" get pods -A -o name 2>/dev/null)" ]; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      log "Pods still present after 60s; forcing"
      break
    fi
    sleep 1
  done
  log "Pods deleted through the API in $(( $(date +%s) - t_drain ))s"
fi

# 2. Stop the components, newest first.
stop_component kube-scheduler 10
stop_component kube-controller-manager 10
stop_component kube-proxy 10
for k in 4 3 2 1; do stop_component "$(node_component kubelet "$k")" 15; done

# 3. Containers the kubelet did not stop: kill and delete their tasks through containerd, so the
#    shims exit cleanly.
for k in 4 3 2 1; do
  pid_of "$(node_component containerd "$k")" >/dev/null || continue
  ctr_=("$(cat "$ST_RUN/containerd-bin-dir" 2>/dev/null || echo /usr/bin)/ctr" -a "$(containerd_sock "$k")" -n k8s.io --timeout 10s)
  tasks=$("${ctr_[@]}" tasks ls -q 2>/dev/null)
  if [ -n "$tasks" ]; then
    log "killing $(echo "$tasks" | wc -l) leftover container task(s) of $(node_component containerd "$k")"
    for t in $tasks; do "${ctr_[@]}" tasks kill -s SIGKILL "$t" >/dev/null 2>&1; done
    sleep 1
    for t in $tasks; do "${ctr_[@]}" tasks delete -f "$t" >/dev/null 2>&1; done
  fi
done
for k in 4 3 2 1; do stop_component "$(node_component containerd "$k")" 15; done
# Nodes 2..N: their mount namespaces (and every mount in them) end with their last process (step 4).
for k in 4 3 2; do stop_component "$(node_component node "$k")" 5; done
stop_component kube-apiserver 15
stop_component etcd 15

# 4. Any process still ours: shims and containers (by our cgroups or state paths in their
#    command lines). Never this script or its callers.
protected=" $$ "
p=$$
while [ "$p" -gt 1 ] 2>/dev/null; do
  p=$(awk '{print $4}' "/proc/$p/stat" 2>/dev/null) || break
  protected+="$p "
done
our_pids() {
  local pid cgroups
  for pid in /proc/[0-9]*; do
    pid=${pid#/proc/}
    case $protected in *" $pid "*) continue ;; esac
    if { tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null | grep -qF "$ST/"; then echo "$pid"; fi
  done
  # Container processes (reparented to PID 1 if their shim died) sit in kubelets' cgroups.
  cgroups=$(cluster_cgroups)
  [ -z "$cgroups" ] || find $cgroups -name cgroup.procs -exec cat {} + 2>/dev/null
}
for sig in TERM KILL KILL; do
  pids=$(our_pids | sort -un)
  [ -z "$pids" ] && break
  log "SIG$sig to leftover processes: $(echo "$pids" | tr '\n' ' ')"
  for pid in $pids; do
    log "  $pid: $({ tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null | cut -c1-160)"
    kill -"$sig" "$pid" 2>/dev/null
  done
  sleep 2
done
pids=$(our_pids | sort -un)
if [ -n "$pids" ]; then log "WARNING: processes left: $pids"; problems=1; fi

# 5. Mounts under $ST (container rootfs, shm, netns, kubelet volumes), deepest first, then $ST's
#    own shared bind mount (up.sh).
unmount_all() {
  awk -v st="$ST/" '{ if (index($5 "/", st) == 1) print $5 }' /proc/self/mountinfo | sort -r | uniq
}
for attempt in 1 2 3; do
  mounts=$(unmount_all)
  [ -z "$mounts" ] && break
  for m in $mounts; do
    if [ "$attempt" -lt 3 ]; then umount "$m" 2>/dev/null; else umount -l "$m" 2>/dev/null; fi
  done
done
mounts=$(unmount_all)
if [ -n "$mounts" ]; then log "WARNING: mounts left: $mounts"; problems=1; fi

# 6. iptables: kube-proxy's own cleanup, then kubelet's canary/hint chains and the CNI bridge
#    plugin's masquerade chains (recognised by our network name in their comments).
if [ -x "$BIN/kube-proxy" ] && iptables -t nat -S 2>/dev/null | grep -q 'KUBE-'; then
  "$BIN/kube-proxy" --cleanup >>"$ST_LOGS/kube-proxy-cleanup.log" 2>&1 || true
fi
clean_chains() {
  local ipt=$1 table chain rule
  for table in filter nat mangle; do
    "$ipt" -t "$table" -S >/dev/null 2>&1 || continue
    # Rules in any chain that jump to our chains, or carry our CNI network's comment.
    "$ipt" -t "$table" -S 2>/dev/null \
      | grep -E "^-A .*(-j (KUBE-[A-Z0-9-]+|CNI-[0-9a-f]+)( |$)|name: \\\\\"$CNI_NETWORK\\\\\")" \
      | while read -r rule; do
          eval "\"$ipt\" -t $table -D ${rule#-A }" 2>/dev/null
        done
    for chain in $("$ipt" -t "$table" -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^KUBE-/ {print $2}'); do
      "$ipt" -t "$table" -F "$chain" 2>/dev/null
    done
    for chain in $("$ipt" -t "$table" -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^KUBE-/ {print $2}'); do
      "$ipt" -t "$table" -X "$chain" 2>/dev/null
    done
    # CNI-<hash> chains that are now empty (their rules carried our comment) or only ours.
    for chain in $("$ipt" -t "$table" -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^CNI-[0-9a-f]+$/ {print $2}'); do
      if ! "$ipt" -t "$table" -S "$chain" 2>/dev/null | grep -v "^-N" | grep -qv "name: \\\\\"$CNI_NETWORK\\\\\""; then
        "$ipt" -t "$table" -F "$chain" 2>/dev/null; "$ipt" -t "$table" -X "$chain" 2>/dev/null
      fi
    done
  done
}
clean_chains iptables
clean_chains ip6tables
# nftables tables that iptables-nft created for us and that are empty now.
if [ -f "$ST_RUN/nft-tables.orig" ]; then
  nft list tables 2>/dev/null | while read -r _ family name; do
    grep -qx "table $family $name" "$ST_RUN/nft-tables.orig" && continue
    if ! nft list table "$family" "$name" 2>/dev/null | grep -vE '^\s*(table .*\{|chain .*\{|type .*;|\}|)\s*$' | grep -q .; then
      nft delete table "$family" "$name" 2>/dev/null
    fi
  done
fi
# kube-proxy's nfacct counters (used by its iptables rules, not removed by --cleanup).
if command -v nfacct >/dev/null; then
  for name in $(nfacct list 2>/dev/null | sed -n 's/.* = \(.*\);$/\1/p'); do
    grep -qx "$name" "$ST_RUN/nfacct.orig" 2>/dev/null && continue
    case $name in
      ct_state_invalid_dropped_pkts | localhost_nps_accepted_pkts) nfacct delete "$name" >/dev/null 2>&1 \
        || { log "WARNING: could not delete nfacct object $name"; problems=1; } ;;
    esac
  done
fi
left=$( (iptables-save; ip6tables-save) 2>/dev/null | grep -E "KUBE-|CNI-|$CNI_NETWORK" )
if [ -n "$left" ]; then log "WARNING: iptables rules left:"; echo "$left" >&2; problems=1; fi

# 7. Links: the CNI bridge (pod veths vanish with their network namespaces).
for link in $(ip -o link show master "$CNI_BRIDGE" 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do
  ip link delete "$link" 2>/dev/null
done
if ip link show "$CNI_BRIDGE" >/dev/null 2>&1; then ip link delete "$CNI_BRIDGE" || problems=1; fi
conntrack -D -s "$POD_CIDR" >/dev/null 2>&1
conntrack -D -d "$POD_CIDR" >/dev/null 2>&1
conntrack -D -d "$SERVICE_IP" >/dev/null 2>&1

# 8. Cgroups the kubelet and runc created (empty once the processes are gone), deepest first.
for root in $(cluster_cgroups); do
  [ -d "$root" ] || continue
  find "$root" -depth -type d -exec rmdir {} \; 2>/dev/null
  if [ -d "$root" ]; then log "WARNING: cgroup $root left"; problems=1; fi
done

# 9. Kernel settings kubelet and kube-proxy change: the network's back to what they were before
#    up.sh; the machine's when no other cluster is up (lib.sh).
if [ -f "$ST_RUN/sysctl.orig" ]; then restore_sysctls "$ST_RUN/sysctl.orig" || problems=1; fi
release_host || problems=1

# 10. Files outside $ST: kubelet's /var/log/containers symlinks into $ST, its device-plugins
#     socket, libcni's result cache; directories up.sh found missing are removed entirely.
if [ -d /var/log/containers ]; then
  find /var/log/containers -maxdepth 1 -type l -lname "$ST/*" -delete 2>/dev/null
fi
rm -f /var/lib/kubelet/device-plugins/kubelet.sock "/var/lib/cni/results/$CNI_NETWORK-"* 2>/dev/null
if [ -f "$ST_RUN/created-paths" ]; then
  while IFS= read -r p; do
    case $p in
      /run/mount) rmdir "$p" 2>/dev/null ;;  # only if empty: libmount may keep utab there
      /var/log/containers) rmdir "$p" 2>/dev/null ;;
      /var/lib/kubelet | /var/lib/cni | /var/log/pods) rm -rf "$p" ;;
    esac
  done <"$ST_RUN/created-paths"
fi

# 11. The state directory, except the logs.
if [ -d "$ST" ]; then
  find "$ST" -mindepth 1 -maxdepth 1 ! -name logs -exec rm -rf {} + 2>/dev/null \
    || { log "WARNING: could not remove all of $ST"; problems=1; }
fi

log "down in $(( $(date +%s) - t0 ))s$([ "$problems" = 0 ] || echo ' WITH PROBLEMS (see warnings)')"
exit "$problems"
