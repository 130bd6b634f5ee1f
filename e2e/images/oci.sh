# Hand-made OCI image archives, for images built without a registry or `docker build`. Sourced by
# build.sh and build-project-image.sh. The archives import with `ctr -n k8s.io images import FILE`.

oci_sha() { sha256sum "$1" | cut -d' ' -f1; }
oci_size() { stat -c %s "$1"; }

# oci_archive OUT_FILE REF LAYER CONFIG_JSON_FRAGMENT: a one-layer OCI image layout, tarred to OUT_FILE.
#   REF       image name, e.g. sidecar-terminator.local/busybox:1 (io.containerd.image.name)
#   LAYER     the layer: a tar, or a gzip-compressed tar when its name ends in .gz
#   CONFIG_JSON_FRAGMENT  more keys of the image config's "config", e.g. '"Entrypoint":["/bin/x"]'
# The image's architecture is $OCI_ARCH (default amd64). Same inputs, same bytes.
oci_archive() {
  local file=$1 ref=$2 layer=$3 config=$4 arch=${OCI_ARCH:-amd64}
  local tmp; tmp=$(mktemp -d)
  local layout="$tmp/layout"
  mkdir -p "$layout/blobs/sha256"
  local layer_sha layer_type diff_id
  layer_sha=$(oci_sha "$layer")
  if [[ $layer == *.gz ]]; then
    layer_type=application/vnd.oci.image.layer.v1.tar+gzip
    diff_id=$(gzip -dc "$layer" | sha256sum | cut -d' ' -f1)
  else
    layer_type=application/vnd.oci.image.layer.v1.tar
    diff_id=$layer_sha
  fi
  cp "$layer" "$layout/blobs/sha256/$layer_sha"
  printf '{"architecture":"%s","os":"linux","config":{"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],%s},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
    "$arch" "$config" "$diff_id" > "$tmp/config.json"
  local config_sha; config_sha=$(oci_sha "$tmp/config.json")
  mv "$tmp/config.json" "$layout/blobs/sha256/$config_sha"
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"%s","digest":"sha256:%s","size":%s}]}' \
    "$config_sha" "$(oci_size "$layout/blobs/sha256/$config_sha")" "$layer_type" "$layer_sha" "$(oci_size "$layer")" > "$tmp/manifest.json"
  local manifest_sha; manifest_sha=$(oci_sha "$tmp/manifest.json")
  local manifest_size; manifest_size=$(oci_size "$tmp/manifest.json")
  mv "$tmp/manifest.json" "$layout/blobs/sha256/$manifest_sha"
  printf '{"imageLayoutVersion":"1.0.0"}' > "$layout/oci-layout"
  printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{"architecture":"%s","os":"linux"},"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
    "$manifest_sha" "$manifest_size" "$arch" "$ref" "${ref##*:}" > "$layout/index.json"
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf "$file" -C "$layout" .
  rm -rf "$tmp"
}
