#!/usr/bin/env bash
# generate.sh regenerates the benchmark's committed generated code with protoc:
#   - ours: proto/gazconsumer/bench/v1/sums.proto through protoc-gen-go and
#     this repository's protoc-gen-gazconsumer (with its fast codecs, which
#     runtime/codec uses; scaffolding the handlers into internal/ and the
#     consumer's command into cmd/, once), as the quick start's
#     buf.gen.yaml does;
#   - the anchor: anchor/anchorpb/sums.proto through protoc-gen-gogo, as
#     Gazette's own examples are generated.
# It needs protoc and the well-known types (`make setup` installs both).
set -euo pipefail
cd "$(dirname "$0")"

PLUGINS="$(mktemp -d)"
trap 'rm -rf "$PLUGINS"' EXIT
go build -o "$PLUGINS/" google.golang.org/protobuf/cmd/protoc-gen-go github.com/gogo/protobuf/protoc-gen-gogo \
  github.com/gazconsumer/gazconsumer/cmd/protoc-gen-gazconsumer
GOGO="$(go list -m -f '{{.Dir}}' github.com/gogo/protobuf)"
WKT=/usr/include

protoc -I proto -I ../proto -I "$WKT" \
  --plugin=protoc-gen-go="$PLUGINS/protoc-gen-go" \
  --plugin=protoc-gen-gazconsumer="$PLUGINS/protoc-gen-gazconsumer" \
  --go_out=gen --go_opt=module=github.com/gazconsumer/gazconsumer/bench/gen \
  --gazconsumer_out=gen \
  --gazconsumer_opt=module=github.com/gazconsumer/gazconsumer/bench/gen,scaffold=internal,scaffold_main=cmd \
  gazconsumer/bench/v1/sums.proto

protoc -I anchor/anchorpb -I "$GOGO" -I "$GOGO/protobuf" \
  --plugin=protoc-gen-gogo="$PLUGINS/protoc-gen-gogo" \
  --gogo_out=paths=source_relative:anchor/anchorpb \
  sums.proto
