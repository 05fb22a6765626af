# Shared helpers of the shell tests: counters, time bounds, one-line error checks,
# comparisons. Sourced by each suite from the repository root (QKV, the binary under test,
# defaults to build/qkv), which then calls `scratch NAME` for a folder of its own.
QKV=${QKV:-build/qkv}
PY=/usr/bin/python3 # Debian's own, for the checks that read JSON: not a dependency of qkv
passed=0
failed=0
skipped=0

ok() { echo "ok   $1"; passed=$((passed + 1)); }
bad() { echo "FAIL $1: $2"; failed=$((failed + 1)); }
# skip NAME WHY: a test not run, on purpose (counted, and said on the last line).
skip() {
    echo "SKIP $1: $2"
    skipped=$((skipped + 1))
}
# skip_missing NAME WHY: a test that cannot run because a tool is missing. make test
# installs what the tests need (scripts/deps.sh), so under CI (CI=true) this is a failure.
skip_missing() {
    if [[ ${CI:-} == true ]]; then bad "$1" "under CI, and skipped: $2"; else skip "$1" "$2"; fi
}
# scratch NAME: $T, a fresh folder /tmp/qkv-NAME.XXXXXX, removed when the suite exits
# unless QKV_KEEP_TMP is set (to read what a failing test left; a suite with more to clean
# sets its own trap after, rm -rf "$T" last).
scratch() {
    T=$(mktemp -d "/tmp/qkv-$1.XXXXXX")
    [[ -n ${QKV_KEEP_TMP:-} ]] || trap 'rm -rf "$T"' EXIT
}
# small_toy_run: $T/data, 1,500 toy pairs (50 valid, 50 test), and $T/run, the toy config
# trained 150 steps at d_model 32 without watched sentences: the quick model the attention
# and explain suites read. The suite ends here, saying why, when it cannot be made.
small_toy_run() {
    "$QKV" toy-data "$T/data" --train 1500 --valid 50 --test 50 >/dev/null
    "$QKV" train configs/toy.yaml --set run_dir="$T/run" --set train.steps=150 --set model.d_model=32 --set train.watch= \
        --set data.train.src="$T/data/train.src" --set data.train.tgt="$T/data/train.tgt" \
        --set data.valid.src="$T/data/valid.src" --set data.valid.tgt="$T/data/valid.tgt" >"$T/train.log" 2>&1 ||
        { echo "set-up failed: $(tail -3 "$T/train.log")"; exit 1; }
}
finish() {
    echo "$passed passed, $failed failed, $skipped skipped"
    [[ $failed -eq 0 ]]
}

# Every command a test runs has a time bound, generous but finite (QKV_TIMEOUT seconds
# each, default 300): qkv through $QKV, which from here names tests/qkv, and any other
# command through "$BOUNDED" (a path, not a function: `"$BOUNDED" cmd &` leaves in $! the
# pid of cmd itself). A hung command is killed, says so on its stderr, and fails
# its test by name (exit 137); the suite goes on.
if [[ $QKV != */tests/qkv ]]; then
    [[ $QKV == /* ]] && export QKV_BIN=$QKV || export QKV_BIN=$PWD/$QKV # tests may cd
    QKV=$PWD/tests/qkv
fi
BOUNDED=$PWD/tests/bounded
# use_late_start: LATE_START becomes the shim built beside qkv (tests/shim/late_start.c),
# to preload so that every new thread starts late; sanitizer runtimes are told they need
# not load first (the shim only wraps pthread_create). 1 when the shim was not built.
use_late_start() {
    LATE_START=$(dirname "$QKV_BIN")/late_start.so
    export ASAN_OPTIONS=${ASAN_OPTIONS:-}:verify_asan_link_order=0
    [[ -f $LATE_START ]]
}
# wait_for FILE REGEX [SECONDS]: until a line of FILE matches (0), or SECONDS pass (1;
# default 60), so no test waits on a process that died or hung
wait_for() {
    local deadline=$((SECONDS + ${3:-60}))
    until grep -q -- "$2" "$1" 2>/dev/null; do
        ((SECONDS < deadline)) || return 1
        sleep 0.05
    done
}

# expect_error NAME EXIT_CODE REGEX command...: the command fails with that code and
# prints exactly one line on stderr, matching REGEX.
expect_error() {
    local name=$1 code=$2 pattern=$3
    shift 3
    local err rc
    err=$("$@" 2>&1 >/dev/null)
    rc=$?
    if [[ $rc -ne $code ]]; then bad "$name" "exit $rc, expected $code: $err"; return; fi
    if [[ $(printf '%s\n' "$err" | wc -l) -ne 1 ]]; then bad "$name" "not one line: $err"; return; fi
    if ! grep -qE -- "$pattern" <<<"$err"; then bad "$name" "'$err' does not match '$pattern'"; return; fi
    ok "$name"
}

# exact_match HYP REF: percentage of identical lines
exact_match() { awk 'NR==FNR{h[NR]=$0;next}{n++; if(h[FNR]==$0)c++}END{printf "%.1f", n?100*c/n:0}' "$1" "$2"; }

# data_section FILE: the tensor bytes of a checkpoint (everything after the header)
data_section() {
    local hlen
    hlen=$(od -An -t u8 -N 8 "$1" | tr -d ' ')
    tail -c +$((8 + hlen + 1)) "$1"
}

# same_tensors A B: the two checkpoints hold byte-identical weights and moments
same_tensors() { cmp -s <(data_section "$1") <(data_section "$2"); }

# tiny_config FILE NAME DATA_DIR 'TRAIN KEYS': a small, quick model (d_model 32, 2+2 layers)
# on the toy pair in DATA_DIR, with the given flow-style train: keys.
tiny_config() {
    printf 'name: %s
data:
  train: {src: %s/train.src, tgt: %s/train.tgt}
  valid: {src: %s/valid.src, tgt: %s/valid.tgt}
model: {d_model: 32, heads: 4, d_ff: 64, encoder_layers: 2, decoder_layers: 2, dropout: 0.1}
train: {%s}
' "$2" "$3" "$3" "$3" "$3" "$4" >"$1"
}

# ---- pages in headless Chromium ------------------------------------------------------------
# browser: Chromium's path, "" when it is not installed (each suite says what it then skips).
browser=$(command -v chromium || command -v chromium-browser || true)
# browser_flags PROFILE [MORE...]: $flags, the options every suite opens a page with (headless,
# nothing fetched behind its back, the console on stderr), the profile in PROFILE, then MORE.
browser_flags() {
    flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking
        --disable-component-update --disable-sync --user-data-dir="$1" --enable-logging=stderr --v=0 "${@:2}")
}
# with_script PAGE SCRIPT COPY: COPY is PAGE with the JavaScript file SCRIPT run at its end,
# after the page's own script (a viewer page's JSON writes '<' as \u003c: its one </body> is
# the page's own).
with_script() {
    { sed '/<\/body>/,$d' "$1"; echo '<script>'; cat "$2"; echo '</script></body></html>'; } >"$3"
}
# browser_dom URL OUT [PROFILE]: the page at URL as Chromium leaves it (--dump-dom) in OUT, in
# PROFILE (a fresh one) or the flags' own, its console on OUT.err; $console: the first of its
# script errors, "" for none.
browser_dom() {
    local f=("${flags[@]}")
    [[ -n ${3:-} ]] && f=("${f[@]/#--user-data-dir=*/--user-data-dir=$3}")
    "$BOUNDED" timeout 120 "$browser" "${f[@]}" --dump-dom "$1" >"$2" 2>"$2.err"
    console=$(grep -E 'CONSOLE|Uncaught' "$2.err" | head -3)
}
# browser_shot URL PNG WIDTH,HEIGHT [PROFILE]: the page at URL drawn into PNG by Chromium, in a
# window of that size, scrollbars hidden, in PROFILE (a fresh one) or the flags' own; $console:
# the first of its script errors, "" for none.
browser_shot() {
    local f=("${flags[@]}")
    [[ -n ${4:-} ]] && f=("${f[@]/#--user-data-dir=*/--user-data-dir=$4}")
    rm -f "$2"
    "$BOUNDED" timeout 120 "$browser" "${f[@]}" --hide-scrollbars --window-size="$3" --screenshot="$2" "$1" \
        >/dev/null 2>"$T/$(basename "$2").err"
    console=$(grep -E 'CONSOLE|Uncaught' "$T/$(basename "$2").err" | head -3)
}
# selftest_url URL OUT: the viewer's checks (tests/viewer_selftest.js, already in the page at
# URL; the address asks which) as browser_dom runs them: $result, their verdict (JSON).
selftest_url() {
    browser_dom "$1" "$2"
    result=$(grep -o '<pre id="selftest"[^<]*' "$2" | sed 's/.*>//')
}
# selftest PAGE: the viewer's checks (#selftest), its pictures' fit among them, on a copy of the page file PAGE with them
# added; $result, $console. The copies and the DOMs go in $T.
selftest() {
    cat tests/svg_fit.js tests/viewer_selftest.js >"$T/selftest.js"
    with_script "$1" "$T/selftest.js" "$T/selftest-page.html"
    selftest_url "file://$T/selftest-page.html#selftest" "$T/selftest-dom.html"
}
has() { [[ $result == *"$1"* ]]; }
# svg_fit NAME FILES...: the SVG files inlined in one page ($T/NAME.html), each named by its
# path, and tests/svg_fit.js run on it in Chromium; $faults: one line per text cut by its
# picture's edge, over another text or crossed by a line ("" when all fit; "no answer"
# when the page gave none); $measured: " PICTURES,TEXTS" for each page measured. PAGE.html
# files among FILES are measured as they are, one by one, after their own scripts ran.
_svg_fit_run='addEventListener("load", () => { const f = svgFitFaults();
  document.getElementById("svgfit").textContent = JSON.stringify([svgFitFaults.pictures || 0, svgFitFaults.texts || 0, f]); });'
svg_fit() {
    local name=$1 f page=$T/$1.html svgs=0
    shift
    faults="" measured=""
    for f in "$@"; do [[ $f == *.svg ]] && svgs=$((svgs + 1)); done
    ((svgs == 0)) || {
        echo '<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>'
        for f in "$@"; do
            [[ $f == *.svg ]] || continue
            echo "<div data-name=\"${f#"$T"/}\">"
            sed '1{/^<?xml/d}' "$f"
            echo '</div>'
        done
        echo '<pre id="svgfit"></pre><script>'
        cat tests/svg_fit.js
        echo "$_svg_fit_run</script></body></html>"
    } >"$page"
    ((svgs == 0)) || _svg_fit_page "file://$page" "$T/$name.dom"
    for f in "$@"; do
        [[ $f == *.html ]] || continue
        /usr/bin/python3 -c 'import sys
page, script = open(sys.argv[1]).read(), open(sys.argv[2]).read()
end = page.rfind("</body>")
end = len(page) if end < 0 else end
sys.stdout.write(page[:end] + "<pre id=\"svgfit\"></pre><script>" + script + sys.argv[3] + "</script>" + page[end:])' \
            "$f" tests/svg_fit.js "$_svg_fit_run" >"$page"
        _svg_fit_page "file://$page" "$T/$name.dom" "${f#"$T"/}: "
    done
    faults=$(grep . <<<"$faults")
}
_svg_fit_page() {
    local got saved=("${flags[@]}")
    flags+=(--window-size=2400,2000)
    browser_dom "$1" "$2"
    flags=("${saved[@]}")
    got=$(grep -o '<pre id="svgfit">[^<]*' "$2" | sed 's/^<pre id="svgfit">//')
    if [[ -z $got ]]; then
        faults+="${3:-}no answer from the page ${console}"$'\n'
        return
    fi
    faults+=$(/usr/bin/python3 -c 'import html, json, sys
pictures, texts, faults = json.loads(html.unescape(sys.argv[1]))
print(sys.argv[2] + "no picture measured") if texts == 0 else [print(sys.argv[2] + f) for f in faults]' "$got" "${3:-}")$'\n'
    measured+=$(grep -o '<pre id="svgfit">\[[0-9]*,[0-9]*' "$2" | sed 's/.*\[/ /')
}
