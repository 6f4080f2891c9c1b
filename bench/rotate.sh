#!/usr/bin/env bash
# Rounds of one delivery bench over several worktrees, the order rotating each round (A B C, B C A,
# C A B…) so no tree always runs first or last: on this VM consecutive runs of one tree differ by up
# to 25 % and every process of a run moves together (docs/perf-history.md, "The claim in the
# create's commit"); read only sums over whole rotations. Build each tree first (see bench/ab.sh):
#   ROUNDS=6 bash bench/rotate.sh wakeup /tmp/rot-out /tmp/ep-a /tmp/ep-p "$PWD"
# TASKS=<n> sets the run's length (default 4,000 wake-up, 1,200 fleet, 12,000 claim tasks): the
# short runs still hold the JIT's warm-up (TurboFan compiling 10 s in), so steady state needs 3× that.
# Raw output per run: <out>/<tree index>-<bench>-<round>.txt (loadavg before/after, the bench's JSON).
set -u
BENCH=$1; OUT=$2; shift 2; TREES=("$@"); N=${#TREES[@]}; mkdir -p "$OUT"
case $BENCH in wakeup|fleet|claim) ;; *) echo "bench must be wakeup, fleet or claim" >&2; exit 2 ;; esac
if [ "$BENCH" = fleet ]; then
  for wt in "${TREES[@]}"; do (cd "$wt" && npx esbuild bench/fleet.ts --bundle --platform=node --format=esm \
    --packages=external --outfile=dist/bench/fleet.mjs --log-level=warning); done
fi
for i in $(seq 1 "${ROUNDS:-6}"); do
  for k in $(seq 0 $((N - 1))); do
    t=$(( (k + i - 1) % N )); wt=${TREES[$t]}
    ( cd "$wt"
      echo "# $(date -Is) $wt loadavg before: $(cat /proc/loadavg)"
      case $BENCH in
        wakeup) timeout 300 node scripts/run-ts.mjs bench/wakeup.ts --runs none --tasks "${TASKS:-4000}" ;;
        fleet)  timeout 300 node --expose-gc dist/bench/fleet.mjs --nodes 200 --tasks "${TASKS:-1200}" ;;
        claim)  timeout 300 node scripts/run-ts.mjs bench/claim.ts --tasks "${TASKS:-12000}" ;;
      esac
      echo "# exit $? loadavg after: $(cat /proc/loadavg)" ) > "$OUT/$t-$BENCH-$i.txt" 2>&1
  done
done
