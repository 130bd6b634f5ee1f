# The Node 24 runtime of the images built on this machine, in the layout of
# gcr.io/distroless/nodejs24-debian12:nonroot. Sourced by build-project-image.sh and
# build-dockerfile.sh.

# node_runtime_binary: prints the path of the Node 24 binary of the `node` npm package (our
# devDependency), or fails saying why.
node_runtime_binary() {
  local repo=$1 bin version
  bin=$(readlink -f "$repo/node_modules/node/bin/node" 2>/dev/null || true)
  [ -x "$bin" ] || { echo "${0##*/}: no Node binary at node_modules/node/bin/node: run scripts/setup.sh" >&2; return 1; }
  version=$("$bin" --version)
  case $version in v24.*) ;; *) echo "${0##*/}: expected Node 24 at $bin, found $version" >&2; return 1 ;; esac
  echo "$bin"
}

# node_runtime_arch: the OCI architecture of this machine (amd64, arm64), or fails.
node_runtime_arch() {
  case $(uname -m) in
    x86_64) echo amd64 ;;
    aarch64) echo arm64 ;;
    *) echo "${0##*/}: unsupported architecture $(uname -m)" >&2; return 1 ;;
  esac
}

# node_runtime ROOT NODE_BIN: NODE_BIN at ROOT/nodejs/bin/node with the shared libraries `ldd` names
# for it (copied from this machine), /etc/passwd and /etc/group with root and nonroot (65532),
# /etc/nsswitch.conf and /tmp. No shell.
node_runtime() {
  local root=$1 bin=$2 first second third lib
  mkdir -p "$root/nodejs/bin" "$root/etc" "$root/tmp"
  cp "$bin" "$root/nodejs/bin/node"
  local pkg; pkg=$(dirname "$(dirname "$bin")")
  [ ! -f "$pkg/LICENSE" ] || cp "$pkg/LICENSE" "$root/nodejs/LICENSE"
  while read -r first second third _; do
    lib=
    if [ "$second" = "=>" ]; then lib=$third; elif [[ $first == /* ]]; then lib=$first; fi
    [ -n "$lib" ] && [[ $lib == /* ]] || continue
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
  done < <(ldd "$bin")
  [ -e "$root/lib64/ld-linux-x86-64.so.2" ] || [ -e "$root/lib/ld-linux-aarch64.so.1" ] ||
    { echo "${0##*/}: ldd named no dynamic loader for $bin" >&2; return 1; }
  cat > "$root/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
PASSWD
  cat > "$root/etc/group" <<'GROUP'
root:x:0:
nonroot:x:65532:
GROUP
  echo 'hosts: files dns' > "$root/etc/nsswitch.conf"
  chmod 1777 "$root/tmp"
  chmod -R u+rwX,go+rX,go-w "$root/nodejs"
}
