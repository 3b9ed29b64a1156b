#!/usr/bin/env bash
# Browser test of the monitoring dashboard: serves it with synthetic figures
# (monitor_dashboard_demo), loads it in Debian's headless Chromium, saves a
# screenshot and checks the rendered DOM: numbers in every figure, several
# successful polls of stats.json, no JavaScript errors.
#
#   dashboard_test.sh DEMO_BINARY OUT_DIR
#
# Writes OUT_DIR/dashboard.png and OUT_DIR/dashboard_dom.html. Fails (never
# skips) when Chromium is missing. Bounded: 60 s in all.
set -euo pipefail

demo=${1:?usage: dashboard_test.sh DEMO_BINARY OUT_DIR}
out=${2:?usage: dashboard_test.sh DEMO_BINARY OUT_DIR}
chromium=${CHROMIUM:-/usr/bin/chromium}
deadline=$((SECONDS + 60))

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

if [[ ! -x $chromium ]]; then
  fail "$chromium not found: the browser test needs Debian's chromium" \
    "(apt-get install --no-install-recommends chromium; scripts/setup.sh installs it)"
fi
[[ -x $demo ]] || fail "demo binary $demo not built"
mkdir -p "$out"
work=$(mktemp -d)
demo_pid=
cleanup() {
  if [[ -n $demo_pid ]]; then
    kill "$demo_pid" 2>/dev/null || true
    wait "$demo_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

"$demo" --listen 127.0.0.1:0 --port-file "$work/port" --duration-s 90 >"$work/demo.log" 2>&1 &
demo_pid=$!
for _ in $(seq 100); do
  [[ -s $work/port ]] && break
  kill -0 "$demo_pid" 2>/dev/null || fail "demo exited: $(cat "$work/demo.log")"
  sleep 0.1
done
[[ -s $work/port ]] || fail "demo did not report its port within 10 s"
url="http://127.0.0.1:$(cat "$work/port")/"
echo "dashboard at $url"

# One headless run; a fresh profile each time; never longer than what is left.
run_chromium() {
  local left=$((deadline - SECONDS))
  ((left > 5)) || fail "out of time before running chromium"
  timeout -k 5 "$((left < 25 ? left : 25))" "$chromium" \
    --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --disable-dev-shm-usage --hide-scrollbars \
    --user-data-dir="$(mktemp -d -p "$work")" --virtual-time-budget=5000 \
    --window-size=1280,900 "$@" "$url"
}

png="$out/dashboard.png"
rm -f "$png"
run_chromium --screenshot="$png" >"$work/shot.log" 2>&1 ||
  fail "chromium --screenshot failed: $(tail -5 "$work/shot.log")"
[[ -f $png ]] || fail "no screenshot written: $(tail -5 "$work/shot.log")"
size=$(stat -c %s "$png")
((size > 30000)) || fail "screenshot is only $size bytes: blank page?"
read -r -a header <<<"$(od -An -tu1 -N24 "$png" | tr -s " \n" "  ")"
[[ "${header[*]:0:8}" == "137 80 78 71 13 10 26 10" ]] || fail "$png is not a PNG"
width=$(((header[16] << 24) | (header[17] << 16) | (header[18] << 8) | header[19]))
height=$(((header[20] << 24) | (header[21] << 16) | (header[22] << 8) | header[23]))
((width == 1280 && height == 900)) || fail "screenshot is ${width}x${height}, not 1280x900"

dom="$out/dashboard_dom.html"
run_chromium --dump-dom >"$dom" 2>"$work/dom.log" ||
  fail "chromium --dump-dom failed: $(tail -5 "$work/dom.log")"

# The text of the element with id $1 (ids here are unique; one line each).
text_of() {
  grep -o "id=\"$1\"[^>]*>[^<]*" "$dom" | head -1 | sed 's/^[^>]*>//'
}
for id in sram-value throughput-value delay-value fallback-value offload-value; do
  value=$(text_of "$id")
  [[ $value =~ [0-9] ]] || fail "#$id shows '$value', no number"
  echo "#$id = $value"
done
polls=$(text_of poll-count)
if ! [[ $polls =~ ^[0-9]+$ ]] || ((polls < 2)); then
  fail "dashboard polled stats.json '$polls' times (< 2)"
fi
errors=$(text_of error-count)
[[ $errors == 0 ]] || fail "JavaScript errors: $errors: $(text_of error-list)"
[[ $(text_of status) == live ]] || fail "status is '$(text_of status)', not live"
rows=$(grep -o '<tr><td>[0-9]*</td>' "$dom" | wc -l)
((rows >= 2)) || fail "groups table has $rows rows"
echo "polls=$polls js_errors=$errors group_rows=$rows"

# The server must shut down cleanly after serving the browser (under the
# sanitizer build this is where ASan/LSan would report).
kill -TERM "$demo_pid"
rc=0
wait "$demo_pid" || rc=$?
demo_pid=
((rc == 0)) || fail "demo exited with $rc: $(tail -20 "$work/demo.log")"
echo "screenshot: $png ($size bytes)"
echo "PASS"
