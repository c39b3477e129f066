#!/usr/bin/env bash
# demo.sh runs gazconsumer's main job on the in-process stack: it starts
# `gazconsumer dev`, applies the sample journals with Gazette's own gazctl,
# appends to a journal, reads it back, checks what it read, and exits.
set -euo pipefail
cd "$(dirname "$0")/.."

dir=$(mktemp -d)
trap 'kill "$dev" 2>/dev/null || true; wait "$dev" 2>/dev/null || true; rm -rf "$dir"' EXIT

./bin/gazconsumer dev --dir "$dir/stack" --broker-port 0 --env-file "$dir/env" >"$dir/dev.log" 2>&1 &
dev=$!
for _ in $(seq 600); do
  [ -s "$dir/env" ] && break
  kill -0 "$dev" 2>/dev/null || { cat "$dir/dev.log"; echo "demo: gazconsumer dev exited" >&2; exit 1; }
  sleep 0.1
done
[ -s "$dir/env" ] || { cat "$dir/dev.log"; echo "demo: gazconsumer dev did not start" >&2; exit 1; }
cat "$dir/dev.log"
# shellcheck disable=SC1091
source "$dir/env"

echo "demo: applying journals from scripts/demo-journals.yaml"
./bin/gazctl journals apply --specs scripts/demo-journals.yaml
./bin/gazctl journals list -L app.gazette.dev/message-type

want=$(printf 'hello, gazette\nfrom the gazconsumer demo\n')
printf '%s\n' "$want" | ./bin/gazctl journals append -l name=demo/greetings
got=$(./bin/gazctl journals read -l name=demo/greetings --file-root "$dir/stack/fragments")
echo "demo: read back:"
echo "$got"
if [ "$got" != "$want" ]; then
  echo "demo: FAILED: read back something other than what was appended" >&2
  exit 1
fi
echo "demo: OK"
