#!/usr/bin/env bash
# setup.sh installs what building and testing gazconsumer needs, and only what
# is missing: Debian packages (RocksDB, protoc and its well-known types,
# Prometheus' promtool), buf
# from npm, and protoc-gen-go, gazctl and gazette built from the versions in
# go.mod.
# It is idempotent: a second run changes nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

TOOLS="$PWD/.tools"
BUF_VERSION=1.75.0
# prometheus: promtool, for go test ./deploy/; buildah and mmdebstrap build the
# image without a Docker engine (scripts/build-image.sh, make test-image);
# chromium: the headless browser of the web console's test
# (example/console_test.go).
APT_PACKAGES=(librocksdb-dev protobuf-compiler libprotobuf-dev prometheus buildah mmdebstrap chromium)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

mkdir -p "$TOOLS/bin"
if [ "$("$TOOLS/bin/buf" --version 2>/dev/null || true)" != "$BUF_VERSION" ]; then
  echo "setup: installing buf $BUF_VERSION"
  npm install --silent --no-audit --no-fund --prefix "$TOOLS/npm" "@bufbuild/buf@$BUF_VERSION" >/dev/null
  ln -sf "$TOOLS/npm/node_modules/.bin/buf" "$TOOLS/bin/buf"
fi

# Go tools come from go.mod's tool directives; go build is a no-op when they
# are up to date.
go build -o "$TOOLS/bin/" google.golang.org/protobuf/cmd/protoc-gen-go go.gazette.dev/core/cmd/gazctl go.gazette.dev/core/cmd/gazette
