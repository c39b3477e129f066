#!/usr/bin/env bash
# sync-gazette-bases.sh copies Gazette's kustomize bases of its brokers and of
# etcd, kustomize/bases/{broker,etcd} of the go.gazette.dev/core module that
# go.mod requires, into deploy/k8s/gazette/, unchanged, and writes the README
# there naming the version copied.
#
# kustomize loads bases only by paths inside the repository (or over the
# network), so the overlays reference this verbatim copy. Run it after
# changing the version of go.gazette.dev/core in go.mod, and commit the
# result; `go test ./deploy/` fails while the copy differs from the module's.
set -euo pipefail
cd "$(dirname "$0")/../.."

go mod download go.gazette.dev/core
dir="$(go list -m -f '{{.Dir}}' go.gazette.dev/core)"
version="$(go list -m -f '{{.Version}}' go.gazette.dev/core)"
dest=deploy/k8s/gazette

for base in broker etcd; do
  rm -rf "${dest:?}/$base"
  mkdir -p "$dest/$base"
  cp -R "$dir/kustomize/bases/$base/." "$dest/$base/"
done
# The module cache is read-only; the copy is an ordinary checked-in tree.
find "$dest/broker" "$dest/etcd" -type d -exec chmod 0755 {} +
find "$dest/broker" "$dest/etcd" -type f -exec chmod 0644 {} +

cat >"$dest/README.md" <<README
# Gazette's kustomize bases (vendored)

\`broker/\` and \`etcd/\` are a verbatim copy of Gazette ${version}'s
\`kustomize/bases/broker\` and \`kustomize/bases/etcd\` (module
go.gazette.dev/core ${version}): do not edit them. Overlays change them with
patches (see \`../overlays/bank\`).

They are copied because kustomize loads bases only from paths inside the
repository. To refresh them after changing the version of go.gazette.dev/core
in go.mod, run \`deploy/k8s/sync-gazette-bases.sh\` and commit the result;
\`go test ./deploy/\` fails while they differ from the module's.
README
echo "sync-gazette-bases: copied Gazette ${version}'s bases broker and etcd into $dest"
