#!/usr/bin/env bash
# Start-up time of `ep` beside `node -e 0` in the same hyperfine run (Debian's hyperfine).
# Targets: ep --help, ep version, ep agent cron list --json ≤ 1.5× the reference; the console's
# first frame ≤ 4× the reference (both measured through `script` so each gets a terminal).
# Usage: bench/cli-start.sh [runs]   (builds first; starts a throwaway tower and epd)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${1:-30}"
command -v hyperfine >/dev/null || { echo "install hyperfine (apt-get install hyperfine)" >&2; exit 1; }

node scripts/build.mjs
node cli/build-tui.mjs

HOME_DIR="$(mktemp -d)"
PORT="$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')"
export EP_HOME="$HOME_DIR" EP_BASE_URL="http://127.0.0.1:$PORT" EP_NODE_FILE="$HOME_DIR/node.json" EP_NO_SYSTEMD=1 EP_LOG_LEVEL=warn
node bin/ep-tower.js --listen "127.0.0.1:$PORT" >/dev/null 2>"$HOME_DIR/tower.err" &
TOWER=$!
cleanup() {
  node bin/ep.js daemon down >/dev/null 2>&1 || true
  kill "$TOWER" 2>/dev/null || true
  wait "$TOWER" 2>/dev/null || true
  rm -rf "$HOME_DIR"
}
trap cleanup EXIT
for _ in $(seq 100); do curl -fs "$EP_BASE_URL/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
node bin/ep.js agent node register --hostname bench >/dev/null
node bin/ep.js daemon up >/dev/null
node bin/ep.js agent cron list --json >/dev/null

EP="node $(pwd)/bin/ep.js"
hyperfine -N --warmup 3 --runs "$RUNS" \
  -n 'node -e 0' 'node -e 0' \
  -n 'ep --help' "$EP --help" \
  -n 'ep version' "$EP version" \
  -n 'ep agent cron list --json' "$EP agent cron list --json"

hyperfine --warmup 3 --runs "$RUNS" \
  -n 'node -e 0 (tty)' "script -qc 'node -e 0' /dev/null" \
  -n 'ep console first frame (tty)' "script -qc 'env EP_TUI_EXIT_AFTER_FIRST_FRAME=1 $EP' /dev/null"
