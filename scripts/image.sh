#!/usr/bin/env bash
# Builds the project image (Dockerfile) for linux/amd64 and linux/arm64 with docker buildx and pushes
# it as one multi-platform image, in one command:
#   IMAGE=registry.example.com/platform/sidecar-terminator TAG=0.1.0 npm run image
# `--load` builds one platform into the local Docker instead (no registry); `--dry-run` prints the
# commands without running them. `bash scripts/image.sh --help` for everything else.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: IMAGE=REPOSITORY [TAG=TAG] npm run image [-- --load] [-- --dry-run]
   or: IMAGE=REPOSITORY [TAG=TAG] bash scripts/image.sh [--load] [--dry-run]

Builds the project image (Dockerfile) with docker buildx for linux/amd64 and linux/arm64 and pushes
it to REPOSITORY:TAG as one multi-platform image:

  IMAGE=registry.example.com/platform/sidecar-terminator TAG=0.1.0 npm run image

Pushing needs a buildx builder with the docker-container driver: the current one if it has that
driver, else the first listed that has it, else one is created, named sidecar-terminator (it runs
BuildKit in a container, whose image Docker pulls on first use). Log in to the registry first
(docker login). Nothing is emulated: both platforms build on this machine's own.

Options:
  --load      build for one platform only (this builder's, or PLATFORM) and load the image into the
              local Docker instead of pushing it: to try the image without a registry. IMAGE
              defaults to sidecar-terminator.local/sidecar-terminator.
  --dry-run   print the commands that would change something (builder creation, builds) instead of
              running them; only looks up docker, buildx and the builders
  -h, --help  this text

Environment:
  IMAGE             the repository, without tag (required unless --load)
  TAG               the tag (default: the version in package.json)
  PLATFORMS         the platforms pushed (default linux/amd64,linux/arm64)
  PLATFORM          with --load: the one platform built (default: the builder's own)
  QUICK_EXIT_IMAGE  also build the quick-exit image (images/quick-exit) as this repository,
                    the same way (pushed for PLATFORMS, or loaded)
  QUICK_EXIT_TAG    the quick-exit image's tag (default 1)
  QUICK_EXIT_EXTRA_PATHS  more command paths for the quick-exit program (its EXTRA_PATHS build arg)
  SOURCE_COMMIT     the commit the project image reports (build_info metric, --version), passed as
                    its SOURCE_COMMIT build arg (default: git rev-parse HEAD of this checkout;
                    none, with a warning, without git or a checkout)
  BUILDER           the buildx builder for pushing: used if it exists (it must have the
                    docker-container driver), created otherwise
  DOCKER            the docker command (default docker)
EOF
}

die() {
  echo "image.sh: $*" >&2
  exit 1
}

load=0
dry_run=0
for arg in "$@"; do
  case $arg in
    --load) load=1 ;;
    --dry-run) dry_run=1 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "image.sh: unknown argument: $arg" >&2; usage >&2; exit 2 ;;
  esac
done

repo=$(cd "$(dirname "$0")/.." && pwd)
docker=${DOCKER:-docker}
platforms=${PLATFORMS:-linux/amd64,linux/arm64}
if [ "$load" = 1 ]; then
  image=${IMAGE:-sidecar-terminator.local/sidecar-terminator}
else
  image=${IMAGE:-}
  [ -n "$image" ] || { echo "image.sh: IMAGE is not set: the repository to push to" >&2; usage >&2; exit 2; }
fi
tag=${TAG:-$(sed -n 's/^  "version": "\(.*\)",$/\1/p' "$repo/package.json")}
[ -n "$tag" ] || die "TAG is not set and package.json has no version"
for ref in "$image" ${QUICK_EXIT_IMAGE:+"$QUICK_EXIT_IMAGE"}; do
  case ${ref##*/} in
    *:* | *@*) die "$ref: give the repository without a tag (the tag goes in TAG or QUICK_EXIT_TAG)" ;;
  esac
done

# The build context has no .git, so the project image learns its commit only from this build arg.
# The checkout's own .git, not a parent directory's (an unpacked archive inside another repository).
commit=${SOURCE_COMMIT:-}
if [ -z "$commit" ]; then
  if ! command -v git >/dev/null 2>&1; then
    echo "image.sh: git not found: building without SOURCE_COMMIT, the image reports no commit" >&2
  elif [ ! -e "$repo/.git" ] || ! commit=$(git -C "$repo" rev-parse HEAD 2>/dev/null); then
    commit=
    echo "image.sh: $repo is not a git checkout: building without SOURCE_COMMIT, the image reports no commit" >&2
  fi
fi

# Prints a command as a shell would read it back; runs it unless this is a dry run.
run() {
  local arg line=+
  for arg in "$@"; do
    case $arg in
      '' | *[!A-Za-z0-9_./:,=@%+-]*) line+=" '${arg//\'/\'\\\'\'}'" ;;
      *) line+=" $arg" ;;
    esac
  done
  echo "$line"
  [ "$dry_run" = 1 ] || "$@"
}

# docker and buildx are looked up even in a dry run (nothing changes): a dry run without them only
# says so, a real run stops.
have_buildx=1
if ! command -v "$docker" >/dev/null 2>&1; then
  [ "$dry_run" = 1 ] || die "docker not found ($docker): install Docker, or set DOCKER to the docker command"
  echo "image.sh: docker not found ($docker): printing the commands as if no builder existed" >&2
  have_buildx=0
elif ! "$docker" buildx version >/dev/null 2>&1; then
  [ "$dry_run" = 1 ] || die "docker buildx not found: install Docker's buildx plugin (Debian and Ubuntu package docker-buildx, or docker-buildx-plugin from Docker's own packages)"
  echo "image.sh: docker buildx not found: printing the commands as if no builder existed" >&2
  have_buildx=0
fi

# `docker buildx ls`: one line per builder, starting in column 1 ("NAME[*] DRIVER" or "NAME * DRIVER",
# the star marking the current builder), each followed by indented lines for its nodes.
# Prints "CURRENT NAME DRIVER" (CURRENT 1 or 0) for each builder.
builders() {
  [ "$have_buildx" = 1 ] || return 0
  "$docker" buildx ls | awk 'NR > 1 && $0 !~ /^[[:space:]]/ && NF >= 2 {
    name = $1; driver = $2; current = 0
    if (name ~ /\*$/) { sub(/\*$/, "", name); current = 1 }
    else if (driver == "*") { driver = $3; current = 1 }
    print current, name, driver
  }'
}

# The builder to push with: BUILDER, or the current docker-container one, or the first listed, or a
# new one. Sets $builder; creates it when needed.
choose_builder() {
  local list current name driver
  list=$(builders) || die "docker buildx ls failed"
  if [ -n "${BUILDER:-}" ]; then
    builder=$BUILDER
    driver=$(awk -v b="$builder" '$2 == b { print $3 }' <<<"$list")
    case $driver in
      docker-container) return ;;
      "") run "$docker" buildx create --name "$builder" --driver docker-container; return ;;
      *) die "builder $builder has the $driver driver: pushing a multi-platform image needs the docker-container driver (unset BUILDER, or name another)" ;;
    esac
  fi
  builder=
  while read -r current name driver; do
    [ "$driver" = docker-container ] || continue
    if [ -z "$builder" ] || [ "$current" = 1 ]; then builder=$name; fi
  done <<<"$list"
  if [ -z "$builder" ]; then
    builder=sidecar-terminator
    run "$docker" buildx create --name "$builder" --driver docker-container
  fi
}

# build CONTEXT REF [BUILD ARGS...]
build() {
  local context=$1 ref=$2
  shift 2
  if [ "$load" = 1 ]; then
    run "$docker" buildx build ${PLATFORM:+--platform "$PLATFORM"} --load "$@" -t "$ref" "$context"
  else
    run "$docker" buildx build --builder "$builder" --platform "$platforms" --push "$@" -t "$ref" "$context"
  fi
}

printf '+ cd %q\n' "$repo"
cd "$repo"
[ "$load" = 1 ] || choose_builder
build . "$image:$tag" ${commit:+--build-arg "SOURCE_COMMIT=$commit"}
if [ -n "${QUICK_EXIT_IMAGE:-}" ]; then
  build images/quick-exit "$QUICK_EXIT_IMAGE:${QUICK_EXIT_TAG:-1}" \
    ${QUICK_EXIT_EXTRA_PATHS:+--build-arg "EXTRA_PATHS=$QUICK_EXIT_EXTRA_PATHS"}
fi
if [ "$dry_run" = 1 ]; then
  echo "(dry run: nothing was built)" >&2
elif [ "$load" = 1 ]; then
  echo "loaded $image:$tag${QUICK_EXIT_IMAGE:+ and $QUICK_EXIT_IMAGE:${QUICK_EXIT_TAG:-1}} into the local Docker" >&2
else
  echo "pushed $image:$tag${QUICK_EXIT_IMAGE:+ and $QUICK_EXIT_IMAGE:${QUICK_EXIT_TAG:-1}} for $platforms" >&2
fi
