#!/usr/bin/env bash
# Code checks that run in CI (scripts/test.sh) and by hand:
#   1. function size: clang-tidy's readability-function-size, at most 120
#      lines per function, over every production translation unit of
#      build/release longer than that (tests, fuzzers and benchmarks are
#      left out);
#   2. file size: no tracked C++ or Python file over 700 lines;
#   3. repeated code: jscpd (pinned in tools/ci/package.json; settings in
#      .jscpd.json: runs of 5 or more lines and 40 or more tokens, C++ and
#      Python), at most MAX_CLONES clones;
#   4. layers (scripts/check_layers.py): no include cycle between src/
#      folders, no import cycle between Python modules of one directory, no
#      import of another module's private (_x) names.
#
#   scripts/check-code.sh [size|files|repeats|layers]     (all without an argument)
#
# Needs build/release/compile_commands.json (scripts/setup.sh), clang-tidy,
# and npm for the first run (it installs jscpd into tools/ci/node_modules).
set -euo pipefail
cd "$(dirname "$0")/.."

MAX_LINES=120
MAX_FILE_LINES=700
MAX_CLONES=40
what="${1:-all}"
jobs="$(nproc 2>/dev/null || echo 2)"
status=0

check_size() {
  if [[ ! -f build/release/compile_commands.json ]]; then
    echo "check-code: build/release/compile_commands.json is missing: run scripts/setup.sh" >&2
    return 1
  fi
  # Only files longer than the limit can hold a function over it, so the
  # others (about 40 % of them, the thin mains among them) are not parsed.
  local files
  files=$(git ls-files 'src/*.cc' 'tools/*.cc' | grep -vE '(_test|_fuzz|_benchmark|_bench)\.cc$' |
    xargs wc -l | awk -v max="$MAX_LINES" '$2 != "total" && $1 > max {print $2}' | paste -sd'|')
  local out
  out=$(run-clang-tidy -p build/release -j "$jobs" -quiet \
    -checks='-*,readability-function-size' \
    -config="{CheckOptions: [{key: readability-function-size.LineThreshold, value: $MAX_LINES}]}" \
    "^$PWD/(${files//./\\.})\$" 2>/dev/null |
    sed 's/\x1b\[[0-9;]*m//g' | grep 'warning: .*\[readability-function-size\]' |
    sort -u || true)
  if [[ -n "$out" ]]; then
    echo "$out"
    echo "check-code: functions over $MAX_LINES lines (above); split them by what they do"
    return 1
  fi
  echo "check-code: no function over $MAX_LINES lines"
}

check_files() {
  local long
  long=$(git ls-files '*.cc' '*.h' '*.py' | xargs wc -l | awk -v max="$MAX_FILE_LINES" \
    '$2 != "total" && $1 > max {print "  " $2 ": " $1 " lines"}')
  if [[ -n "$long" ]]; then
    echo "$long"
    echo "check-code: files over $MAX_FILE_LINES lines (above)"
    return 1
  fi
  echo "check-code: no file over $MAX_FILE_LINES lines"
}

check_repeats() {
  local bin=tools/ci/node_modules/.bin/jscpd
  if [[ ! -x $bin ]]; then
    npm ci --prefix tools/ci --no-audit --no-fund --silent
  fi
  "$bin" --config .jscpd.json --silent --reporters json >/dev/null
  /usr/bin/python3 - "$MAX_CLONES" <<'PY'
import json, sys
limit = int(sys.argv[1])
report = json.load(open("build/jscpd/jscpd-report.json"))
clones = report["duplicates"]
for c in clones:
    a, b = c["firstFile"], c["secondFile"]
    print("  %s:%d-%d ~ %s:%d-%d" % (a["name"], a["start"], a["end"], b["name"], b["start"],
                                     b["end"]))
print("check-code: %d repeated runs (jscpd, .jscpd.json), at most %d allowed" % (len(clones), limit))
sys.exit(1 if len(clones) > limit else 0)
PY
}

check_layers() {
  /usr/bin/python3 scripts/check_layers.py
}

case "$what" in
  size) check_size || status=1 ;;
  layers) check_layers || status=1 ;;
  files) check_files || status=1 ;;
  repeats) check_repeats || status=1 ;;
  all)
    check_size || status=1
    check_files || status=1
    check_repeats || status=1
    check_layers || status=1
    ;;
  *)
    echo "usage: scripts/check-code.sh [size|files|repeats|layers]" >&2
    exit 2
    ;;
esac
exit $status
