#!/usr/bin/env bash
# demo.sh runs gazconsumer's main job, the example bank (example/), on the
# in-process stack, exactly as its README shows by hand:
#   - starts `gazconsumer dev` and applies the bank's journals with gazctl
#     (example/specs, generated from its annotations by `gazconsumer specs`);
#   - starts the two consumers built from example/cmd, ledger and
#     leaderboard, and applies their shards with `gazctl shards apply`;
#   - publishes orders and payments exactly once with bankctl (at DEMO_RATE
#     messages a second, 4000 by default), querying the consumers live
#     meanwhile (bankctl top and balances: their queries services), then
#     shows their progress until they have caught up;
#   - prints results, and checks them against the outcome the load recorded:
#     among them, the holds of the orders never paid, which the ledger
#     releases DEMO_HOLD_WINDOW (10 s) after each, the accounts fallen idle
#     (5 s after their last change: RecentAccount's ttl in ledger.proto), and
#     the DEMO_POISON (5) invalid payments, the ledger's dead letters.
# It prints "demo: OK" and exits 0 if they match, or "demo: FAIL" and exits 1.
# DEMO_ORDERS and DEMO_PAYMENTS set the volume (default 10000 each);
# DEMO_STOP_GRACE how long each process it started may take to exit on
# SIGTERM before it is killed (default 30 s).
set -euo pipefail
cd "$(dirname "$0")/.."

ORDERS=${DEMO_ORDERS:-10000}
PAYMENTS=${DEMO_PAYMENTS:-10000}
RATE=${DEMO_RATE:-4000}
HOLD_WINDOW=${DEMO_HOLD_WINDOW:-10s}
POISON=${DEMO_POISON:-5}
dir=$(mktemp -d)
pids=() # Of every process started in the background, in order.
cleanup() {
  # Every process this script started, last first: the publisher, then the
  # consumers (they hand off nothing: each is its group's last member), then
  # the stack, which persists journal fragments as it stops. Each is given
  # DEMO_STOP_GRACE seconds to exit on SIGTERM, then killed, so that nothing
  # outlives the script, on any exit path.
  local i pid
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    pid=${pids[i]}
    kill -TERM "$pid" 2>/dev/null || continue
    for _ in $(seq $((${DEMO_STOP_GRACE:-30} * 10))); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
      echo "demo: process $pid did not exit within ${DEMO_STOP_GRACE:-30}s of SIGTERM: killing it" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$dir"
}
trap cleanup EXIT
# Interrupted or terminated, the script exits, which runs cleanup.
trap 'exit 130' INT
trap 'exit 143' TERM
fail() {
  echo "demo: $*" >&2
  for log in "$dir"/*.log; do
    [ -s "$log" ] && { echo "--- $log" >&2; tail -n 40 "$log" >&2; }
  done
  echo "demo: FAIL"
  exit 1
}

# wait_for FILE PATTERN PID: wait until FILE holds PATTERN, while PID lives.
wait_for() {
  for _ in $(seq 600); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    kill -0 "$3" 2>/dev/null || fail "$(basename "$1" .log) exited"
    sleep 0.1
  done
  fail "$(basename "$1" .log) did not start"
}

echo "demo: starting gazconsumer dev"
./bin/gazconsumer dev --dir "$dir/stack" --broker-port 0 --env-file "$dir/env" >"$dir/dev.log" 2>&1 &
pids+=($!)
for _ in $(seq 600); do
  [ -s "$dir/env" ] && break
  kill -0 "${pids[0]}" 2>/dev/null || fail "gazconsumer dev exited"
  sleep 0.1
done
[ -s "$dir/env" ] || fail "gazconsumer dev did not start"
# shellcheck disable=SC1091
source "$dir/env"
echo "demo: brokers at $BROKER_ADDRESS, etcd at $ETCD_ADDRESS"

echo "demo: gazctl journals apply --specs example/specs/journals.yaml"
./bin/gazctl journals apply --specs example/specs/journals.yaml
./bin/gazctl journals list --primary

for app in ledger leaderboard; do
  echo "demo: starting $app"
  flags=()
  [ "$app" = ledger ] && flags=(--hold-window "$HOLD_WINDOW")
  "./bin/$app" --consumer.host 127.0.0.1 --consumer.id "$app-1" \
    --consumer.state-dir "$dir/$app-state" "${flags[@]}" >"$dir/$app.log" 2>&1 &
  pids+=($!)
  wait_for "$dir/$app.log" "serving consumer" "$!"
  address=$(grep -o 'endpoint=[^ ]*' "$dir/$app.log" | head -n 1 | cut -d= -f2)
  echo "demo: $app serves at $address; gazctl shards apply --specs example/specs/$app-shards.yaml"
  ./bin/gazctl shards apply --consumer.address "$address" --specs "example/specs/$app-shards.yaml"
  export "$(echo "$app" | tr '[:lower:]' '[:upper:]')_ADDRESS=$address"
done
./bin/gazctl shards list --consumer.address "$LEDGER_ADDRESS"
./bin/gazctl shards list --consumer.address "$LEADERBOARD_ADDRESS"

echo "demo: publishing $ORDERS orders and $PAYMENTS payments (and $POISON invalid) at $RATE a second, querying the consumers live meanwhile"
./bin/bankctl publish --orders "$ORDERS" --payments "$PAYMENTS" --poison "$POISON" --customers 500 --accounts 3 \
  --record "$dir/record.json" --rate "$RATE" --timeout 3m >"$dir/publish.log" 2>&1 &
publisher=$!
pids+=("$publisher")
live=0
while kill -0 "$publisher" 2>/dev/null; do
  # Answered by the consumers' members from their shards' committed state,
  # over gRPC (LeaderboardQueries.Top, LedgerQueries.ListBalances and
  # GetActivity), while they consume.
  echo
  # balances --routed routes its calls itself, to the primary of the
  # customer's shard, from the ledger's assignments and members in etcd.
  echo "demo: live, $(date +%T), the load still publishing: bankctl top -n 3; bankctl balances --customer customer-0007 --routed"
  ./bin/bankctl top -n 3 || fail "bankctl top failed"
  ./bin/bankctl balances --customer customer-0007 --routed || fail "bankctl balances --routed failed"
  live=$((live + 1))
  sleep 1
done
wait "$publisher" || fail "publishing failed: $(tail -n 3 "$dir/publish.log")"
[ "$live" -gt 0 ] || fail "the load was published before any live query"
tail -n 1 "$dir/publish.log"
echo "demo: $live rounds of live queries answered while the load ran; waiting for the consumers to catch up"
./bin/bankctl follow --timeout 3m || fail "the consumers did not catch up"

echo
echo "demo: bankctl top -n 5 (live)"
./bin/bankctl top -n 5 || fail "bankctl top failed"
echo
echo "demo: bankctl balances --customer customer-0007 (live)"
./bin/bankctl balances --customer customer-0007 || fail "bankctl balances failed"
echo
echo "demo: bankctl inspect top -n 5 (offline: plays the leaderboard's recovery logs)"
./bin/bankctl inspect top -n 5 || fail "bankctl inspect top failed"
echo
echo "demo: the ledger's events, as gazctl reads them:"
./bin/gazctl journals read -l app.gazette.dev/message-type=gazconsumer.example.bank.v1.BalanceChanged \
  --file-root "$dir/stack/fragments" 2>/dev/null | head -n 3 || true
echo
echo "demo: the ledger's dead letters (invalid payments), as gazctl reads them:"
./bin/gazctl journals read -l name=bank/dead-letters/ledger \
  --file-root "$dir/stack/fragments" 2>/dev/null | grep -m 2 '"handler"' || true
echo
echo "demo: bankctl check --record record.json --wait 60s (holds are released $HOLD_WINDOW after unpaid orders, accounts fall idle 5s after their last change)"
./bin/bankctl check --record "$dir/record.json" --wait 60s || fail "the results differ from the record"
echo "demo: OK"
