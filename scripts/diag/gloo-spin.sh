#!/usr/bin/env bash
# What Gloo's device-thread spin costs (docs/performance-log.md, "Gloo's
# small-size floor"): cais-perf on loopback, the switch path, Gloo as
# shipped, and Gloo with the spin broken by gloo_epoll_backoff.c, the arms
# alternated in each pass.
#
#   scripts/diag/gloo-spin.sh [PASSES] [SIZES...]     (default 3; 4K 64K 1M 16M)
#
# Needs a release build (INCA_BUILD_DIR, default build/release) and gcc.
set -euo pipefail
cd "$(dirname "$0")/../.."
build="${INCA_BUILD_DIR:-build/release}"
passes="${1:-3}"
shift || true
sizes=("$@")
[[ ${#sizes[@]} -gt 0 ]] || sizes=(4K 64K 1M 16M)
[[ "$passes" =~ ^[1-9][0-9]?$ ]] || { echo "gloo-spin.sh: PASSES must be 1..99, not '$passes'" >&2; exit 2; }
for s in "${sizes[@]}"; do
  [[ "$s" =~ ^[1-9][0-9]*[KM]?$ ]] || { echo "gloo-spin.sh: bad size '$s' (e.g. 4K, 16M)" >&2; exit 2; }
done
for f in "$build/bin/cais-perf" "$build/bin/inca-switchd"; do
  [[ -x "$f" ]] || { echo "gloo-spin.sh: $f not built (cmake --build $build)" >&2; exit 2; }
done
command -v gcc > /dev/null || { echo "gloo-spin.sh: needs gcc" >&2; exit 2; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
gcc -O2 -shared -fPIC -o "$tmp/backoff.so" scripts/diag/gloo_epoll_backoff.c -ldl

run() {  # ARM SIZE -> one time in us
  local arm="$1" size="$2" preload="" backend="$1" iters=200
  [[ "$arm" == gloo-unspun ]] && { preload="$tmp/backoff.so"; backend=gloo; }
  case "$size" in *M) iters=20 ;; esac
  LD_PRELOAD="$preload" timeout 300 "$build/bin/cais-perf" --op allreduce --ranks 4 \
    -b "$size" -e "$size" --iters "$iters" --warmup 3 --backend "$backend" \
    --switchd "$build/bin/inca-switchd" > "$tmp/out" 2>&1 || true
  local t
  t="$(awk '/^ +[0-9]+ /{print $5}' "$tmp/out")"
  if [[ -z "$t" ]]; then
    echo "gloo-spin.sh: $arm at $size failed: $(tail -1 "$tmp/out")" >&2
    t="failed"
  fi
  echo "$t"
}

printf '| pass | size | switch (us) | Gloo (us) | Gloo, spin broken (us) |\n|---|---|---|---|---|\n'
for ((p = 1; p <= passes; ++p)); do
  for s in "${sizes[@]}"; do
    printf '| %d | %s | %s | %s | %s |\n' "$p" "$s" "$(run switch "$s")" "$(run gloo "$s")" \
      "$(run gloo-unspun "$s")"
  done
done
