#!/usr/bin/env bash
# Alternating A/B rounds of the delivery benches (claim, wake-up, fleet) between two worktrees,
# each bench run from its own tree so it bundles that tree's tower and epd:
#   git worktree add /tmp/ep-a <commit> && (cd /tmp/ep-a && ln -s "$PWD/../main/node_modules" . && npm run build)
#   ROUNDS=2 bash bench/ab.sh /tmp/ep-a "$PWD" /tmp/ab-out
# Raw output (loadavg before/after, the bench's JSON) per run in the output folder:
# <a|b>-<bench>-<round>.txt. A round is A then B for each bench, so both see the same hour. Each run is long
# enough (8–24 s) for a warm tower to dominate its window: the benches time no warm-up of their own, and at 3,000
# tasks claim.ts read a larger warm-up as +7 % per task (docs/perf-history.md, "Steady state against warm-up…").
set -u
A=$1; B=$2; OUT=${3:-/tmp/ep-ab}; mkdir -p "$OUT"
for wt in "$A" "$B"; do (cd "$wt" && npx esbuild bench/fleet.ts --bundle --platform=node --format=esm --packages=external --outfile=dist/bench/fleet.mjs --log-level=warning); done
for i in $(seq 1 "${ROUNDS:-2}"); do
  for b in wakeup wakeup50 claim fleet; do
    for side in a b; do
      wt=$A; [ "$side" = b ] && wt=$B
      ( cd "$wt"
        echo "# $(date -Is) $wt loadavg before: $(cat /proc/loadavg)"
        case $b in
          claim)    timeout 300 node scripts/run-ts.mjs bench/claim.ts --tasks 12000 ;;
          wakeup)   timeout 300 node scripts/run-ts.mjs bench/wakeup.ts --runs none --tasks 4000 ;;
          wakeup50) timeout 300 node scripts/run-ts.mjs bench/wakeup.ts --runs none --tasks 1000 --rate 50 ;;
          fleet)    timeout 300 node --expose-gc dist/bench/fleet.mjs --nodes 200 --tasks 1200 ;;
        esac
        echo "# exit $? loadavg after: $(cat /proc/loadavg)" ) > "$OUT/$side-$b-$i.txt" 2>&1
    done
  done
done
