#!/usr/bin/env bash
# `qkv serve` on an ephemeral loopback port, with a toy run: the API equals `qkv translate`
# byte for byte, concurrent requests are answered right, every bad request gets its status
# and one-line error (and the server serves on), a full queue answers 503 with Retry-After,
# a client too slow to send its request is cut off, and SIGTERM answers the request in
# flight and exits 0. Ends with "N passed, N failed, N skipped".
set -u
cd "$(dirname "$0")/.."
QKV=${QKV:-build/qkv}
T=$(mktemp -d /tmp/qkv-serve.XXXXXX)
source tests/lib.sh
PY=/usr/bin/python3
server_pid=""
trap '[[ -n $server_pid ]] && kill -KILL $server_pid 2>/dev/null; rm -rf "$T"' EXIT

"$QKV" toy-data "$T/data" --train 1500 --valid 100 --test 60 >/dev/null
tiny_config "$T/w.yaml" w "$T/data" 'steps: 150, batch_tokens: 1024, log_every: 50, valid_every: 50, checkpoint_every: 50, threads: 2'
"$QKV" train "$T/w.yaml" --set run_dir="$T/w" >"$T/w.log" 2>&1 || { echo "set-up failed: $(tail -3 "$T/w.log")"; exit 1; }
# qkv heads' output beside the run (its default --out): the live page's head grid
"$QKV" heads "$T/w" --src "$T/data/test.src" --ref "$T/data/test.tgt" --no-curve --sentences 30 >"$T/heads.log" 2>&1 ||
    { echo "set-up failed: $(tail -3 "$T/heads.log")"; exit 1; }

# start_server LOG ARGS...: qkv serve in the background on a free port; sets server_pid and port
start_server() {
    local log=$1
    shift
    "$QKV" serve "$T/w" --port 0 "$@" 2>"$log" &
    server_pid=$!
    wait_for "$log" "serving .* on http://127.0.0.1:[0-9]*/" 60 || { echo "server did not start: $(cat "$log")"; return 1; }
    port=$(grep -o '127.0.0.1:[0-9]*' "$log" | head -1 | cut -d: -f2)
}
# call METHOD PATH [BODY-FILE]: prints the body, then the status on a line of its own
call() {
    local args=(-s --max-time 60 -X "$1" -w '\n%{http_code}' "http://127.0.0.1:$port$2")
    [[ $# -ge 3 ]] && args+=(--data-binary "@$3" -H 'Content-Type: application/json')
    "$BOUNDED" curl "${args[@]}"
}
# lines_json FILE [KEY=VALUE...]: {"src": [the file's lines], KEY: VALUE...} (VALUE is JSON)
lines_json() {
    "$BOUNDED" "$PY" - "$@" <<'PYEOF'
import json, sys
req = {"src": [l.rstrip("\n") for l in open(sys.argv[1], encoding="utf-8")]}
for kv in sys.argv[2:]:
    k, v = kv.split("=", 1)
    req[k] = json.loads(v)
print(json.dumps(req))
PYEOF
}
# texts: the translations' text of a translate answer on stdin, a line each
texts() { "$BOUNDED" "$PY" -c 'import json,sys; [print(t["text"]) for t in json.load(sys.stdin)["translations"]]'; }

start_server "$T/server.log" --workers 2 || exit 1
[[ -f $T/w/heads/heads.json ]] && grep -q "head grid: $T/w/heads/heads.json" "$T/server.log" &&
    "$BOUNDED" curl -s --max-time 30 "http://127.0.0.1:$port/" | grep -q '"head_analysis":{"heads":\[{"kind":' &&
    ok serve_page_carries_the_heads_output_beside_the_run ||
    bad serve_page_carries_the_heads_output_beside_the_run "$(ls "$T/w/heads" 2>&1; cat "$T/server.log")"

# ---- the API equals translate -------------------------------------------------------------
out=$(call GET /v1/health)
[[ $(tail -1 <<<"$out") == 200 ]] && grep -q '"status":"ok"' <<<"$out" && ok serve_health || bad serve_health "$out"
out=$(call GET /v1/model)
grep -q '"checkpoints":\["best","step-000150","step-000100","step-000050"\]' <<<"$out" && [[ $(tail -1 <<<"$out") == 200 ]] &&
    ok serve_model_lists_the_checkpoints || bad serve_model_lists_the_checkpoints "$out"

for opts in "greedy:--greedy:beam=1" "beam4:--beam 4:beam=4"; do
    IFS=: read -r name flags key <<<"$opts"
    # shellcheck disable=SC2086
    "$QKV" translate "$T/w" $flags <"$T/data/test.src" >"$T/$name.want" 2>/dev/null
    lines_json "$T/data/test.src" "$key" >"$T/$name.json"
    call POST /v1/translate "$T/$name.json" | head -n -1 | texts >"$T/$name.got"
    cmp -s "$T/$name.want" "$T/$name.got" && [[ $(wc -l <"$T/$name.got") -eq 60 ]] &&
        ok "serve_translate_equals_translate_$name" || bad "serve_translate_equals_translate_$name" "$(diff "$T/$name.want" "$T/$name.got" | head -5)"
done
"$QKV" translate "$T/w" --beam 4 --nbest 3 <"$T/data/test.src" >"$T/nbest.want" 2>/dev/null
lines_json "$T/data/test.src" beam=4 nbest=3 >"$T/nbest.json"
call POST /v1/translate "$T/nbest.json" | head -n -1 | "$BOUNDED" "$PY" -c '
import json, sys
for i, t in enumerate(json.load(sys.stdin)["translations"]):
    for h in t["nbest"]:
        print("%d ||| %s ||| %.6f" % (i, h["text"], h["score"]))' >"$T/nbest.got"
cmp -s "$T/nbest.want" "$T/nbest.got" && ok serve_nbest_equals_translate_nbest ||
    bad serve_nbest_equals_translate_nbest "$(diff "$T/nbest.want" "$T/nbest.got" | head -5)"

printf 'a b c\n\nd e\n' >"$T/empty.src"
lines_json "$T/empty.src" >"$T/empty.json"
out=$(call POST /v1/translate "$T/empty.json" | head -n -1 | texts | sed -n 2p)
[[ -z $out ]] && ok serve_empty_line_gets_empty_translation || bad serve_empty_line_gets_empty_translation "'$out'"

# ---- concurrency: 12 clients at once, each its own slice, each answer its own -----------------
for i in $(seq 0 11); do
    sed -n "$((i * 5 + 1)),$((i * 5 + 5))p" "$T/data/test.src" >"$T/slice$i.src"
    lines_json "$T/slice$i.src" beam=4 >"$T/slice$i.json"
done
clients=()
for i in $(seq 0 11); do
    (call POST /v1/translate "$T/slice$i.json" | head -n -1 | texts >"$T/slice$i.got") &
    clients+=($!)
done
wait "${clients[@]}"
cat "$T"/slice{0..11}.got >"$T/slices.got"
cmp -s "$T/beam4.want" "$T/slices.got" && ok serve_concurrent_requests_each_get_their_own ||
    bad serve_concurrent_requests_each_get_their_own "$(diff "$T/beam4.want" "$T/slices.got" | head -12)"

# ---- attention, and the checkpoint it is asked for -------------------------------------------
src1=$(head -1 "$T/data/test.src")
printf '{"src": "%s"}' "$src1" >"$T/att.json"
printf '{"src": "%s", "checkpoint": "step-000050"}' "$src1" >"$T/att50.json"
call POST /v1/attention "$T/att.json" | head -n -1 >"$T/att.out"
call POST /v1/attention "$T/att50.json" | head -n -1 >"$T/att50.out"
if "$BOUNDED" "$PY" - "$T/att.out" "$T/att50.out" "$(head -1 "$T/beam4.want")" <<'PYEOF'; then
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["format"] == "qkv-attention-2" and a["checkpoint"] == "best" and b["checkpoint"] == "step-000050", (a["checkpoint"], b["checkpoint"])
assert a["translations"][0]["text"] == sys.argv[3], (a["translations"][0]["text"], sys.argv[3])
assert len(a["cross"][-1][0]) == len(a["target_out"]) and len(a["cross"][-1][0][0]) == len(a["source"])
for row in a["cross"][-1][0]:
    assert abs(sum(row) - 1) < 1e-4, row
assert a["cross"] != b["cross"], "two checkpoints, the same maps"
PYEOF
    ok serve_attention_maps_follow_the_checkpoint
else
    bad serve_attention_maps_follow_the_checkpoint "see above"
fi

# ---- bad requests: status, one line of JSON, and the server goes on -----------------------------
# expect_status NAME STATUS PATTERN METHOD PATH [BODY-FILE]
expect_status() {
    local name=$1 status=$2 pattern=$3 out
    shift 3
    out=$(call "$@")
    local body code
    body=$(head -n -1 <<<"$out") code=$(tail -1 <<<"$out")
    if [[ $code == "$status" && $(wc -l <<<"$body") -eq 1 ]] && grep -qE "^\{\"error\":\"$pattern" <<<"$body"; then ok "$name"
    else bad "$name" "status $code, body $body"; fi
}
printf '{"src": ["a", 5]}' >"$T/b1"
printf '{bad' >"$T/b2"
printf '{"src": ["caf\xe9"]}' >"$T/b3"
printf '{"src": ["a"], "beam": "five"}' >"$T/b4"
printf '{"src": ["a"], "colour": 1}' >"$T/b5"
printf '{"src": ["a"], "mask_heads": "cross.9.0"}' >"$T/b6"
printf '{"src": ["a"], "checkpoint": "../../etc/passwd"}' >"$T/b7"
"$PY" -c 'print("{\"src\": " + "[" * 100000 + "]" * 100000 + "}")' >"$T/b8"
head -c 10000000 /dev/zero | tr '\0' 'a' >"$T/b9"
"$PY" -c 'import json; print(json.dumps({"src": ["a"] * 10000}))' >"$T/b10"
"$PY" -c 'import json; print(json.dumps({"src": [" ".join(["a"] * 2000)]}))' >"$T/b11"
"$PY" -c 'import json; print(json.dumps({"src": ["a " * 400]}))' >"$T/b12"
expect_status serve_wrong_type_is_400 400 '\\"src\\"\[1\] must be a string' POST /v1/translate "$T/b1"
expect_status serve_malformed_json_is_400 400 'malformed JSON' POST /v1/translate "$T/b2"
expect_status serve_not_utf8_is_400 400 'the body is not well-formed UTF-8' POST /v1/translate "$T/b3"
expect_status serve_bad_option_is_400 400 '\\"beam\\" must be an integer' POST /v1/translate "$T/b4"
expect_status serve_unknown_key_is_400 400 'unknown key' POST /v1/translate "$T/b5"
expect_status serve_bad_mask_is_400 400 '\\"mask_heads\\":' POST /v1/translate "$T/b6"
expect_status serve_unknown_checkpoint_is_400 400 'no checkpoint' POST /v1/translate "$T/b7"
expect_status serve_deep_json_is_400 400 'malformed JSON' POST /v1/translate "$T/b8"
expect_status serve_10mb_body_is_413 413 'the body is larger' POST /v1/translate "$T/b9"
expect_status serve_10000_sentences_is_413 413 '10000 sentences, more than' POST /v1/translate "$T/b10"
expect_status serve_too_many_tokens_is_413 413 '\\"src\\"\[0\] has more tokens' POST /v1/translate "$T/b12"
expect_status serve_long_sentence_is_413 413 '\\"src\\"\[0\] is 3999 bytes|\\"src\\"\[0\] has more tokens' POST /v1/translate "$T/b11"
expect_status serve_unknown_path_is_404 404 'no such path' GET /etc/passwd
expect_status serve_get_translate_is_405 405 'use POST' GET /v1/translate
# a truncated body: the client says 100 bytes and sends 10, then goes
"$BOUNDED" "$PY" - "$port" <<'PYEOF' >"$T/trunc.out" 2>&1
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30)
s.sendall(b"POST /v1/translate HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"src\": [\"")
s.close()
PYEOF
out=$(call GET /v1/health)
[[ $(tail -1 <<<"$out") == 200 ]] && ok serve_serves_after_bad_requests || bad serve_serves_after_bad_requests "$out"

# ---- a client too slow to send its request is cut off -----------------------------------------
if "$BOUNDED" "$PY" - "$port" <<'PYEOF'; then
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30)
start = time.time()
try:
    for b in b"POST /v1/translate HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\n\r\n" + b"x" * 40:
        s.sendall(bytes([b]))
        time.sleep(0.5)
    sys.exit("the whole request went through at one byte per half second")
except (BrokenPipeError, ConnectionResetError):
    pass
took = time.time() - start
assert 9 < took < 16, f"cut off after {took:.1f} s"
PYEOF
    ok serve_slow_client_is_cut_off
else
    bad serve_slow_client_is_cut_off "see above"
fi

# ---- the live page in headless Chromium: type, Enter, the map; another checkpoint, another map --
browser=$(command -v chromium || command -v chromium-browser || true)
if [[ -z $browser ]]; then
    skip_missing serve_browser_live_page "Chromium is not installed: the live page was NOT tested in a browser"
else
    flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking
        --disable-component-update --disable-sync --user-data-dir="$T/profile" --enable-logging=stderr --v=0
        --virtual-time-budget=30000)
    typed=$(head -1 "$T/data/test.src" | sed 's/ /%20/g')
    "$BOUNDED" timeout 120 "$browser" "${flags[@]}" --dump-dom "http://127.0.0.1:$port/#selftest-live&text=$typed&ckpt=step-000050" \
        >"$T/dom.html" 2>"$T/browser.err"
    result=$(grep -o '<pre id="selftest"[^<]*' "$T/dom.html" | sed 's/.*>//')
    console=$(grep -E 'CONSOLE|Uncaught' "$T/browser.err" | head -3)
    if [[ $result == *'"ok":true'* && $result == *'"checkpointChangesMap":true'* && -z $console ]]; then
        ok serve_browser_enter_shows_the_map_and_the_checkpoint_menu_changes_it
        [[ $result == *'"headGrid":true'* ]] && ok serve_browser_head_grid_click_opens_the_head ||
            bad serve_browser_head_grid_click_opens_the_head "result: $result"
    else
        bad serve_browser_enter_shows_the_map_and_the_checkpoint_menu_changes_it "result: ${result:-none}; console: $console"
    fi
    shot=${BUILD:-build}/serve-live.png
    "$BOUNDED" timeout 120 "$browser" "${flags[@]/--user-data-dir=*/--user-data-dir=$T/profile2}" --hide-scrollbars \
        --window-size=1300,1100 --screenshot="$shot" "http://127.0.0.1:$port/#selftest-live&text=$typed" >/dev/null 2>&1
    [[ -s $shot ]] && ok serve_browser_screenshot || bad serve_browser_screenshot "no $shot"
fi

kill -TERM $server_pid
wait $server_pid
rc=$?
server_pid=""
[[ $rc -eq 0 ]] && grep -q "qkv: stopped" "$T/server.log" && ok serve_sigterm_when_idle_exits_0 ||
    bad serve_sigterm_when_idle_exits_0 "exit $rc: $(tail -2 "$T/server.log")"

# ---- a full queue, and SIGTERM with a request in flight --------------------------------------
echo '{"format": "qkv-heads-1", "heads": [{"kind": "feed_forward"}]}' >"$T/w/heads/heads.json"
start_server "$T/server2.log" --workers 1 --queue 1 || exit 1
grep -q "warning: $T/w/heads/heads.json: not a list of heads written by qkv heads" "$T/server2.log" &&
    ! "$BOUNDED" curl -s --max-time 30 "http://127.0.0.1:$port/" | grep -q '"head_analysis"' &&
    ok serve_foreign_heads_file_is_a_warning || bad serve_foreign_heads_file_is_a_warning "$(cat "$T/server2.log")"
cat "$T/data/test.src" "$T/data/test.src" | head -64 >"$T/heavy.src"
lines_json "$T/heavy.src" beam=64 >"$T/heavy.json"
(call POST /v1/translate "$T/heavy.json" >"$T/heavy.out") &
heavy=$!
for _ in $(seq 200); do grep -q '"working":1' <<<"$(call GET /v1/health)" && break; sleep 0.02; done
(call POST /v1/translate "$T/empty.json" >"$T/queued.out") &
queued=$!
for _ in $(seq 200); do grep -q '"queued":1' <<<"$(call GET /v1/health)" && break; sleep 0.02; done
"$BOUNDED" curl -s --max-time 30 -D "$T/full.head" -o "$T/full.body" -X POST --data-binary "@$T/empty.json" "http://127.0.0.1:$port/v1/translate"
grep -q '^HTTP/1.1 503' "$T/full.head" && grep -qi '^Retry-After: 1' "$T/full.head" && grep -q '"error":"the queue is full' "$T/full.body" &&
    ok serve_full_queue_is_503_with_retry_after || bad serve_full_queue_is_503_with_retry_after "$(head -1 "$T/full.head") $(cat "$T/full.body")"
kill -TERM $server_pid
wait $heavy $queued
wait $server_pid
rc=$?
server_pid=""
[[ $rc -eq 0 && $(tail -1 "$T/heavy.out") == 200 && $(tail -1 "$T/queued.out") == 200 ]] && [[ $(head -n -1 "$T/heavy.out" | texts | wc -l) -eq 64 ]] &&
    ok serve_sigterm_answers_requests_in_flight || bad serve_sigterm_answers_requests_in_flight "exit $rc, $(tail -c 100 "$T/heavy.out") $(tail -c 100 "$T/queued.out"): $(tail -3 "$T/server2.log")"

expect_error serve_bad_port 2 "--port" "$QKV" serve "$T/w" --port 70000
expect_error serve_bad_host 2 "--host: 'nowhere' is not an IPv4" "$QKV" serve "$T/w" --host nowhere --port 0
expect_error serve_missing_run 2 "nope" "$QKV" serve "$T/nope" --port 0
finish
