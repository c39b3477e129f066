#!/usr/bin/env bash
# build-image.sh builds deploy/Dockerfile with buildah, without a Docker engine
# or BuildKit, and, unless told to pull them, without a container registry:
# it makes the Dockerfile's two base images itself from Debian packages with
# mmdebstrap, and passes them as its build arguments GO_IMAGE and
# RUNTIME_IMAGE.
#
#   scripts/build-image.sh [-t IMAGE] [--consumer-cmd PKG] [--registry-bases] [--rebuild-bases]
#
#   -t IMAGE          the image to build (default localhost/gazconsumer/ledger:dev)
#   --consumer-cmd    the package of the consumer command, the Dockerfile's
#                     CONSUMER_CMD (default ./example/cmd/ledger)
#   --context DIR     the build context (default the repository's root)
#   --registry-bases  use the Dockerfile's own bases (golang:1.26-bookworm,
#                     debian:bookworm-slim), pulled from Docker Hub
#   --rebuild-bases   make the local bases again even if they exist
#
# The local bases (made once, then reused; they live in buildah's storage):
#
#   localhost/gazconsumer-base/debian:bookworm-slim
#       Debian bookworm, variant minbase (what debian:bookworm-slim is), from
#       deb.debian.org with bookworm-updates and bookworm-security, or the
#       mirror MMDEBSTRAP_MIRROR names (a URL, or a file of apt sources).
#   localhost/gazconsumer-base/golang:<go version>-bookworm
#       the same, with the compilers and tools of golang:1.26-bookworm (gcc,
#       g++, libc6-dev, make, pkg-config, git, ca-certificates) and this
#       machine's Go toolchain (`go env GOROOT`, which must be a go1.26)
#       copied to /usr/local/go, GOPATH=/go, as the official image has it.
#       No image of a registry holds a Go toolchain here, so it is the host's.
#       Its /etc/ssl/certs/ca-certificates.crt is this machine's, so that
#       `go mod download` trusts the module proxy as this machine does (where
#       an egress proxy signs with a CA of its own, Debian's bundle does
#       not). The builder stage is thrown away: the image keeps Debian's.
#
# Everything else is the Dockerfile's: its builder stage installs
# librocksdb-dev with apt, downloads the modules from the Go module proxy
# (GOPROXY as `go env` gives it here) and builds the consumer and gazctl; its
# runtime stage installs librocksdb7.8 and ca-certificates. So the build
# needs Debian's mirrors and the module proxy, and root (buildah's chroot
# isolation, with the host's network).
#
# Needs buildah and mmdebstrap (scripts/setup.sh installs them). Run as root.
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE=localhost/gazconsumer/ledger:dev
CONSUMER_CMD=./example/cmd/ledger
CONTEXT=$PWD
BASES=local
REBUILD_BASES=
while [ $# -gt 0 ]; do
  case "$1" in
    -t | --tag) IMAGE=$2; shift 2 ;;
    --consumer-cmd) CONSUMER_CMD=$2; shift 2 ;;
    --context) CONTEXT=$2; shift 2 ;;
    --registry-bases) BASES=registry; shift ;;
    --rebuild-bases) REBUILD_BASES=1; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "build-image: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

for tool in buildah $([ "$BASES" = local ] && echo mmdebstrap); do
  command -v "$tool" >/dev/null || { echo "build-image: $tool is not installed (run scripts/setup.sh, or apt-get install $tool)" >&2; exit 1; }
done
[ "$(id -u)" -eq 0 ] || { echo "build-image: run as root (buildah's chroot isolation)" >&2; exit 1; }

# The packages of golang:1.26-bookworm that a cgo build uses.
BUILDER_PACKAGES=ca-certificates,netbase,git,gcc,g++,libc6-dev,make,pkg-config
# What debian:bookworm-slim leaves out.
SLIM_OPTS=(--dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*'
  --dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/locale/*'
  --dpkgopt='path-exclude=/usr/share/info/*')
MIRRORS=()
[ -z "${MMDEBSTRAP_MIRROR:-}" ] || MIRRORS=("$MMDEBSTRAP_MIRROR")

has_image() { buildah inspect --type image "$1" >/dev/null 2>&1; }

# base NAME DESCRIPTION [mmdebstrap options...] makes the image NAME from a
# minbase bookworm made by mmdebstrap with the options, unless it exists.
base() {
  local name=$1 desc=$2; shift 2
  if [ -z "$REBUILD_BASES" ] && has_image "$name"; then
    echo "build-image: base $name exists"
    return
  fi
  echo "build-image: making base $name ($desc) with mmdebstrap"
  local start; start=$(date +%s)
  local tmp; tmp=$(mktemp -d -t gazconsumer-base.XXXXXX)
  # shellcheck disable=SC2064
  trap "rm -rf '$tmp'" RETURN
  mmdebstrap --quiet --variant=minbase --format=tar "${SLIM_OPTS[@]}" "$@" bookworm "$tmp/rootfs.tar" "${MIRRORS[@]}"
  local ctr; ctr=$(buildah from --quiet scratch)
  buildah add --quiet "$ctr" "$tmp/rootfs.tar" / >/dev/null
  buildah config --os linux --arch "$(dpkg --print-architecture)" \
    --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --cmd bash --label "io.gazconsumer.base=$desc" "$ctr"
  if [ "$name" = "$GO_IMAGE" ]; then
    buildah config --env PATH=/usr/local/go/bin:/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      --env GOLANG_VERSION="${GO_VERSION#go}" --env GOPATH=/go --workingdir /go "$ctr"
  fi
  buildah commit --quiet --rm "$ctr" "$name" >/dev/null
  echo "build-image: made base $name in $(( $(date +%s) - start )) s"
}

BUILD_ARGS=(--build-arg "CONSUMER_CMD=$CONSUMER_CMD")
if [ "$BASES" = local ]; then
  GOROOT_HOST=$(go env GOROOT)
  GO_VERSION=$(go env GOVERSION)
  case "$GO_VERSION" in
    go1.26 | go1.26.*) ;;
    *) echo "build-image: this machine's Go is $GO_VERSION; the builder base needs a go1.26 (the Dockerfile's golang:1.26-bookworm)" >&2; exit 1 ;;
  esac
  GO_IMAGE=localhost/gazconsumer-base/golang:$GO_VERSION-bookworm
  RUNTIME_IMAGE=localhost/gazconsumer-base/debian:bookworm-slim
  base "$RUNTIME_IMAGE" "Debian bookworm minbase, made by gazconsumer's scripts/build-image.sh"
  base "$GO_IMAGE" "Debian bookworm with $GO_VERSION from $GOROOT_HOST and a C toolchain, made by gazconsumer's scripts/build-image.sh" \
    --include="$BUILDER_PACKAGES" \
    --customize-hook='mkdir -p "$1/usr/local" "$1/go/bin" "$1/go/src"' \
    --customize-hook="copy-in $GOROOT_HOST /usr/local" \
    --customize-hook='copy-in /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs' \
    --customize-hook="[ -d \"\$1/usr/local/go\" ] || mv \"\$1/usr/local/$(basename "$GOROOT_HOST")\" \"\$1/usr/local/go\""
  BUILD_ARGS+=(--build-arg "GO_IMAGE=$GO_IMAGE" --build-arg "RUNTIME_IMAGE=$RUNTIME_IMAGE" --pull=never)
fi

echo "build-image: building $IMAGE ($CONSUMER_CMD) from deploy/Dockerfile"
start=$(date +%s)
# The builder's `go mod download` uses this machine's module proxy.
! command -v go >/dev/null || BUILD_ARGS+=(--build-arg "GOPROXY=$(go env GOPROXY)")
buildah bud --isolation chroot --layers --force-rm \
  --file "$PWD/deploy/Dockerfile" --ignorefile "$PWD/deploy/Dockerfile.dockerignore" \
  "${BUILD_ARGS[@]}" \
  --tag "$IMAGE" "$CONTEXT"
echo "build-image: built $IMAGE in $(( $(date +%s) - start )) s"
