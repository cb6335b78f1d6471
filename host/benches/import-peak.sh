#!/usr/bin/env bash
# Peak memory of `rampart sessions import`, per source format (issue: "Import peaks at 2.48
# times the file size in memory", target at most 1.5x). Not a test: memory depends on the
# allocator and the machine, so nothing asserts on it; run this and compare.
#
# Usage, from the repository root:
#   host/benches/import-peak.sh [SIZE_MB]          # default 100
#   RAMPART=path/to/rampart host/benches/import-peak.sh   # measure another build
#
# Needs python3, GNU time (/usr/bin/time; `apt-get install time`) and the shared data next
# to the repository (../shared/bench/gen_session.py, ../shared/data/sessions). Inputs are
# generated once into target/import-peak/ (about 7 files of SIZE_MB). For each it prints the
# file size, the peak resident set size (VmHWM, /usr/bin/time's "Maximum resident set
# size"), their ratio and the wall time. Part of the peak is the binary itself: about 7 MB
# for a file of a few lines.
set -euo pipefail

size=${1:-100}
root=$(cd "$(dirname "$0")/../.." && pwd)
shared=$(cd "$root/../shared" 2>/dev/null && pwd) || { echo "../shared is missing" >&2; exit 2; }
data=$shared/data/sessions
gen=$root/host/benches/gen_import_inputs.py
out=$root/target/import-peak
mkdir -p "$out"

if [[ -z "${RAMPART:-}" ]]; then
  (cd "$root" && cargo build --release -p rampart-host >&2)
  RAMPART=$root/target/release/rampart
fi

input() { # NAME COMMAND...: generates $out/NAME once
  local name=$1; shift
  [[ -s $out/$name ]] || "$@" >&2
  echo "$out/$name"
}

inputs=(
  "$(input "pi-${size}mb.jsonl" python3 "$shared/bench/gen_session.py" --tokens $((size * 250000)) --out "$out/pi-${size}mb.jsonl")"
  "$(input "pi-1m.jsonl" python3 "$shared/bench/gen_session.py" --preset 1m --out "$out/pi-1m.jsonl")"
  "$(input "claude-${size}mb.jsonl" python3 "$gen" claude "$data/claude-code-log/-Users-dain-workspace-claude-code-log-sample/37f83ec9-f2ea-42a9-925e-0d5c105cb6e8.jsonl" "$size" "$out/claude-${size}mb.jsonl")"
  "$(input "codex-${size}mb.jsonl" python3 "$gen" codex "$root"/sessions/tests/fixtures/codex/rollout-*.jsonl "$size" "$out/codex-${size}mb.jsonl")"
  "$(input "chat-${size}mb.json" python3 "$gen" chat "$data/openhands-sdk/fncall-llm-message.json" "$size" "$out/chat-${size}mb.json")"
  "$(input "swe-${size}mb.traj" python3 "$gen" traj "$data/swe-agent/marshmallow-1867__function_calling_replace_from_source.traj" "$size" "$out/swe-${size}mb.traj")"
  "$(input "openhands-events-${size}mb.json" python3 "$gen" ohevents "$data/openhands/trajs_basic_gui_mode.json" "$size" "$out/openhands-events-${size}mb.json")"
  "$(input "openhands-eval-${size}mb.jsonl" python3 "$gen" ohlines "$data/openhands/multi_swe_bench_output.jsonl" "$size" "$out/openhands-eval-${size}mb.jsonl")"
)

printf '%-30s %10s %12s %7s %8s\n' input "file MB" "peak RSS MB" ratio wall
for file in "${inputs[@]}"; do
  store=$(mktemp -d)
  if ! /usr/bin/time -v "$RAMPART" --sessions-dir "$store" sessions import "$file" \
      >/dev/null 2>"$store.time"; then
    echo "$(basename "$file"): import failed:" >&2
    tail -5 "$store.time" >&2
  fi
  bytes=$(stat -c %s "$file")
  rss_kb=$(awk '/Maximum resident set size/ {print $NF}' "$store.time")
  wall=$(awk '/Elapsed \(wall clock\)/ {print $NF}' "$store.time")
  awk -v f="$(basename "$file")" -v s="$bytes" -v r="$rss_kb" -v w="$wall" \
    'BEGIN { printf "%-30s %10.1f %12.1f %6.2fx %8s\n", f, s / 1e6, r * 1024 / 1e6, r * 1024 / s, w }'
  rm -rf "$store" "$store.time"
done
