#!/usr/bin/env bash
# `qkv serve` on an ephemeral loopback port, with a toy run: the API equals `qkv translate`
# byte for byte (and /v1/explain `qkv explain`'s explain.json), concurrent requests are answered right, every bad request gets its status
# and one-line error (and the server serves on), a full queue answers 503 with Retry-After,
# a client too slow to send its request is cut off, and SIGTERM answers the request in
# flight and exits 0; the same request gets the same bytes whoever else asks, a small request
# passes one client's heavy ones, and a client that half-closes gets its answer. Ends with "N passed, N failed, N skipped".
set -u
cd "$(dirname "$0")/.."
source tests/lib.sh
scratch serve
server_pid="" proxy_pid=""
trap '[[ -n $server_pid ]] && kill -KILL $server_pid 2>/dev/null; [[ -n $proxy_pid ]] && kill -KILL $proxy_pid 2>/dev/null; rm -rf "$T"' EXIT

"$QKV" toy-data "$T/data" --train 1500 --valid 100 --test 60 >/dev/null
tiny_config "$T/w.yaml" w "$T/data" 'steps: 150, batch_tokens: 1024, log_every: 50, valid_every: 50, checkpoint_every: 50, threads: 2'
# a length penalty of the run's own: the server's searches must take it as translate's do
"$QKV" train "$T/w.yaml" --set run_dir="$T/w" --set decode.length_penalty=0.6 >"$T/w.log" 2>&1 || { echo "set-up failed: $(tail -3 "$T/w.log")"; exit 1; }
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

# a sentence of words the source vocabulary lacks, every one (another language): its answer
# says so; a sentence the model knows carries no warning
printf '{"src": ["Ein Mann f\xc3\xa4hrt Fahrrad.", "%s"]}' "$(head -1 "$T/data/test.src")" >"$T/foreign.json"
out=$(call POST /v1/translate "$T/foreign.json")
if "$BOUNDED" "$PY" -c 'import json, sys
t = json.loads(sys.argv[1].rsplit("\n", 1)[0])["translations"]
assert t[0]["warning"].startswith("every word is unknown to the model'"'"'s source vocabulary (read as <unk>): '"'"'Ein'"'"', '"'"'Mann'"'"'"), t[0]
assert "warning" not in t[1], t[1]' "$out" 2>/dev/null; then
    ok serve_translate_warns_of_a_sentence_it_knows_no_word_of
else
    bad serve_translate_warns_of_a_sentence_it_knows_no_word_of "$out"
fi
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
# the route's search is translate's by default: beam 5, the run's length penalty
printf '%s\n' "$src1" | "$QKV" translate "$T/w" >"$T/att.want" 2>/dev/null
if "$BOUNDED" "$PY" - "$T/att.out" "$T/att50.out" "$(cat "$T/att.want")" <<'PYEOF'; then
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

# a word not in the source vocabulary keeps its own label, and "source_unk" says the model read it as <unk>
printf '{"src": "the zebra sees a bird"}' >"$T/unk.json"
call POST /v1/attention "$T/unk.json" | head -n -1 >"$T/unk-att.out"
call POST /v1/explain "$T/unk.json" | head -n -1 >"$T/unk-ex.out"
call POST /v1/attention "$T/att.json" | head -n -1 >"$T/known-att.out"
if "$BOUNDED" "$PY" - "$T/unk-att.out" "$T/unk-ex.out" "$T/known-att.out" <<'PYEOF'; then
import json, sys
a, e, k = (json.load(open(p, encoding="utf-8")) for p in sys.argv[1:4])
assert a["source"][:5] == ["the", "zebra", "sees", "a", "bird"] and a["source_unk"] == [1], (a["source"], a.get("source_unk"))
assert e["maps"]["source"][1] == "zebra" and e["source_unk"] == [1], e.get("source_unk")
assert list(e)[-3:] == ["checkpoint", "step", "source_unk"], list(e)[-3:]
assert k["source_unk"] == [], k.get("source_unk")
PYEOF
    ok serve_source_unk_names_the_words_read_as_unk
else
    bad serve_source_unk_names_the_words_read_as_unk "$(head -c 200 "$T/unk-att.out")"
fi

# ---- explain: explain.json's object for one sentence, as `qkv explain` writes it -----------------
# both asked with their defaults (one call, one set of defaults: the same integrated gradients'
# steps); the workers multiply on one OpenBLAS thread each: the command does too, for the same bits
printf '{"src": "%s"}' "$src1" >"$T/ex.json"
call POST /v1/explain "$T/ex.json" >"$T/ex.out"
OPENBLAS_NUM_THREADS=1 "$QKV" explain "$T/w" --text "$src1" --out "$T/ex" >"$T/ex.log" 2>&1
if "$BOUNDED" "$PY" - "$T/ex.out" "$T/ex/explain.json" <<'PYEOF'; then
import json, sys
text = open(sys.argv[1], encoding="utf-8").read()
body, status = text.rsplit("\n", 1)
assert status == "200", status
a = json.loads(body)
assert a["format"] == "qkv-explain-1" and a["checkpoint"] == "best" and a["step"] == 150, (a["format"], a.get("checkpoint"))
assert a["ig_steps"] == 32 and a["foil"] is None, (a["ig_steps"], a["foil"])
last = a["share"][-1]
assert len(last) == len(a["maps"]["target_out"]) and all(0 <= x <= 1 for x in last), last
names = [m["name"] for m in a["methods"]]
assert "contrib.rollout" in names and "integrated-gradients" in names, names
for m in a["methods"]:
    assert len(m["scores"]) == len(last) and all(len(r) == len(a["maps"]["source"]) for r in m["scores"]), m["name"]
# the answer is the command's explain.json with the model's keys last
cut = body.rindex(',"checkpoint":')
assert body[:cut] + "}\n" == open(sys.argv[2], encoding="utf-8").read(), "not the command's explain.json"
PYEOF
    ok serve_explain_equals_explain_json
else
    bad serve_explain_equals_explain_json "$(head -c 300 "$T/ex.out"; tail -2 "$T/ex.log")"
fi
tgt1=$(head -1 "$T/data/test.tgt")
foil=$(head -1 "$T/data/test.tgt" | cut -d' ' -f1)
printf '{"src": "%s", "tgt": "%s", "contrast": "%s", "ig_steps": 4, "checkpoint": "step-000100"}' "$src1" "$tgt1" "$foil" >"$T/exf.json"
call POST /v1/explain "$T/exf.json" >"$T/exf.out"
if "$BOUNDED" "$PY" - "$T/exf.out" "$tgt1" "$foil" <<'PYEOF'; then
import json, sys
body, status = open(sys.argv[1], encoding="utf-8").read().rsplit("\n", 1)
a = json.loads(body)
assert status == "200" and a["checkpoint"] == "step-000100", status
assert a["maps"]["target_out"] == sys.argv[2].split() + ["<eos>"], a["maps"]["target_out"]
assert a["foil"] == sys.argv[3] and a["ig_steps"] == 4, (a["foil"], a["ig_steps"])
PYEOF
    ok serve_explain_forced_target_and_contrast
else
    bad serve_explain_forced_target_and_contrast "$(head -c 300 "$T/exf.out")"
fi

# ---- whatif: the model changed and read out, as `qkv whatif` writes whatif.json ----------------
# heads off, a lens and a tree: the answer holds what the command's whatif.json holds
printf '{"src": "%s", "mask_heads": "cross.1.0, enc.0.1", "lens": true, "tree": true}' "$src1" >"$T/wi.json"
call POST /v1/whatif "$T/wi.json" >"$T/wi.out"
OPENBLAS_NUM_THREADS=1 "$QKV" whatif "$T/w" --text "$src1" --mask-heads "cross.1.0, enc.0.1" --lens --tree --out "$T/wi.cmd.json" >"$T/wi.log" 2>&1
printf '{"src": ["%s"], "beam": 5}' "$src1" >"$T/wi.tr.json"
call POST /v1/translate "$T/wi.tr.json" >"$T/wi.tr.out"
printf '{"src": "%s", "mask_heads": "", "lens": true, "tree": true, "top": 3}' "$src1" >"$T/wi0.json"
call POST /v1/whatif "$T/wi0.json" >"$T/wi0.out"
if "$BOUNDED" "$PY" - "$T/wi.out" "$T/wi.cmd.json" "$T/wi0.out" "$T/wi.tr.out" <<'PYEOF'; then
import json, sys
raw = open(sys.argv[1], encoding="utf-8").read().rsplit("\n", 1)
assert raw[1] == "200", raw[1]
a = json.loads(raw[0])
want = json.load(open(sys.argv[2], encoding="utf-8"))
assert a["format"] == "qkv-whatif-1" and a["checkpoint"] == "best" and a["step"] == 150 and a["forced"] is False
for k in ("checkpoint", "step", "forced"): del a[k]
assert a == want, "not the command's whatif.json: " + str(sorted(set(a) ^ set(want)))
T = len(a["tokens"])
assert a["tokens"][-1] == "<eos>" and len(a["change"]) == T and "translation_changed" in a
assert all(len(row) == 5 for row in a["model"]["top"]), "top 5 by default"
# masking nothing changes nothing: the change is 0 at every position, the distributions equal
raw0 = open(sys.argv[3], encoding="utf-8").read().rsplit("\n", 1)
b = json.loads(raw0[0])
assert raw0[1] == "200" and len(b["change"]) == T and all(c == 0 for c in b["change"]), b.get("change")
assert b["changed"] == b["model"] and "translation_changed" not in b and all(len(r) == 3 for r in b["model"]["top"])
# the last decoder layer's lens is the model's own output
L = len(b["model"]["lens"])
for t in range(T):
    assert abs(b["model"]["lens"][L - 1][t]["word_logp"] - b["model"]["logp"][t]) < 1e-3, (t, b["model"]["lens"][L - 1][t])
    assert b["model"]["lens"][L - 1][t]["top"] == b["model"]["top"][t][0]["token"]
# the entropy is one of a distribution over the vocabulary; the forced word's log p at most 0
assert all(e >= 0 for e in b["model"]["entropy"]) and all(lp <= 0 for lp in b["model"]["logp"])
# the tree's best finished path (log P / length^A, EOS counted, as the beam ranks it, A the
# run's decode.length_penalty) is beam search's translation
nodes = b["beam_tree"]
A = b["beam_length_penalty"]
assert A == 0.6, A
assert {n["fate"] for n in nodes} <= {"kept", "finished", "dropped"} and any(n["fate"] == "finished" for n in nodes)
def path(i):
    out = []
    while i >= 0:
        out.append(nodes[i]["token"]); i = nodes[i]["parent"]
    return out[::-1]
best = max((i for i, n in enumerate(nodes) if n["fate"] == "finished"), key=lambda i: nodes[i]["logp"] / len(path(i)) ** A)
tr = json.loads(open(sys.argv[4], encoding="utf-8").read().rsplit("\n", 1)[0])["translations"][0]
assert path(best)[:-1] == tr["tokens"], (path(best), tr["tokens"])
assert b["beam_best"] == tr["text"], (b["beam_best"], tr["text"])
PYEOF
    ok serve_whatif_equals_whatif_json_and_masking_nothing_changes_nothing
else
    bad serve_whatif_equals_whatif_json_and_masking_nothing_changes_nothing "$(head -c 300 "$T/wi.out"; tail -2 "$T/wi.log")"
fi
# a forced prefix and a pin: the forced words are the rows; a pin moves its own row only (the
# rows before it cannot see it); a pin onto the weights a one-hot key gives is the same pin
printf '{"src": "%s", "tgt": "un", "pin": {"layer": 1, "head": 0, "query": 1, "key": 0}}' "$src1" >"$T/wp.json"
printf '{"src": "%s", "tgt": "un", "pin": {"layer": 1, "head": 0, "query": 1, "weights": [1%s]}}' "$src1" \
    "$(for _ in $(seq "$(wc -w <<<"$src1")"); do printf ', 0'; done)" >"$T/wp2.json"
call POST /v1/whatif "$T/wp.json" >"$T/wp.out"
call POST /v1/whatif "$T/wp2.json" >"$T/wp2.out"
if "$BOUNDED" "$PY" - "$T/wp.out" "$T/wp2.out" <<'PYEOF'; then
import json, sys
a, b = [json.loads(open(f, encoding="utf-8").read().rsplit("\n", 1)[0]) for f in sys.argv[1:3]]
assert a["forced"] is True and a["tokens"] == ["un", "<eos>"] and a["target"] == "un", a["tokens"]
assert a["change"][0] == 0 and a["changed"]["top"][0] == a["model"]["top"][0]
assert a["changed"]["top"][1] != a["model"]["top"][1] or a["change"][1] != 0, "the pin changed nothing"
assert a["change"] == b["change"] and a["changed"] == b["changed"]
PYEOF
    ok serve_whatif_forced_prefix_and_pin
else
    bad serve_whatif_forced_prefix_and_pin "$(head -c 300 "$T/wp.out"; head -c 300 "$T/wp2.out")"
fi

# ---- patch: patch.json's object, as `qkv patch` writes it ---------------------------------------
clean="the old farmer sees a red bird" corrupt="the old farmers see a red bird"
printf '{"clean": "%s", "corrupt": "%s"}' "$clean" "$corrupt" >"$T/pa.json"
call POST /v1/patch "$T/pa.json" >"$T/pa.out"
OPENBLAS_NUM_THREADS=1 "$QKV" patch "$T/w" --clean "$clean" --corrupt "$corrupt" --out "$T/pa" >"$T/pa.log" 2>&1
printf '{"clean": "%s", "corrupt": "%s", "compare": ["un", "una"], "at": 0}' "$clean" "$clean" >"$T/pa0.json"
call POST /v1/patch "$T/pa0.json" >"$T/pa0.out"
if "$BOUNDED" "$PY" - "$T/pa.out" "$T/pa/patch.json" "$T/pa0.out" <<'PYEOF'; then
import json, sys
raw = open(sys.argv[1], encoding="utf-8").read().rsplit("\n", 1)
assert raw[1] == "200", raw[1]
a = json.loads(raw[0])
assert a["format"] == "qkv-patch-1" and a["checkpoint"] == "best" and a["step"] == 150
body = raw[0]
cut = body.rindex(',"checkpoint"')
assert body[:cut] + "}" == open(sys.argv[2], encoding="utf-8").read(), "not the command's patch.json"
kinds = {c["kind"] for c in a["components"]}
assert kinds == {"enc", "dec", "cross", "stream"}, kinds
assert len(a["source"]) == 8 and -1 <= a["rho"] <= 1
# a sentence patched into itself: every effect 0, every estimate 0
raw0 = open(sys.argv[3], encoding="utf-8").read().rsplit("\n", 1)
b = json.loads(raw0[0])
assert raw0[1] == "200" and b["metric"].startswith("log p(un) - log p(una) at target position 0"), b["metric"]
assert all(abs(c["effect"]) < 1e-6 and abs(c["atp"]) < 1e-6 for c in b["components"]), "a self-patch moved something"
assert b["clean"] == b["corrupt"] == b["everything"]
PYEOF
    ok serve_patch_equals_patch_json_and_a_self_patch_is_zero
else
    bad serve_patch_equals_patch_json_and_a_self_patch_is_zero "$(head -c 300 "$T/pa.out"; tail -2 "$T/pa.log")"
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
# bad_fields KIND PATH BASE CASE...: each CASE is 'name|"key": value|expected message', sent as
# {BASE, "key": value} to PATH, which must answer 400 with the message (serve_KIND_bad_name_is_400)
bad_fields() {
    local kind=$1 path=$2 base=$3 b name key want
    shift 3
    for b; do
        IFS='|' read -r name key want <<<"$b"
        printf '{%s, %s}' "$base" "$key" >"$T/$name"
        expect_status "serve_${kind}_bad_${name}_is_400" 400 "$want" POST "$path" "$T/$name"
    done
}
bad_fields explain /v1/explain "\"src\": \"$src1\"" 'e1|"ig_steps": -1|\\"ig_steps\\" must be 0 to 64, not -1' 'e2|"ig_steps": 65|\\"ig_steps\\" must be 0 to 64, not 65' \
    'e3|"ig_steps": "x"|\\"ig_steps\\" must be an integer' 'e4|"beam": 2|unknown key \\"beam\\"' 'e5|"colour": 1|unknown key \\"colour\\"' \
    'e6|"contrast": "zzzz"|\\"contrast\\": .zzzz. is not in the target vocabulary' \
    'e7|"contrast": "a b"|\\"contrast\\": .a b. is 2 tokens of the target vocabulary, not one' \
    'e7p|"contrast": "<pad>"|\\"contrast\\": .<pad>. is a token the model never writes' \
    'e8|"tgt": "qqqq un qqqq"|\\"tgt\\": not in the target vocabulary: .qqqq."}$' 'e9|"mask_heads": "cross.9.0"|\\"mask_heads\\": '
printf '{"src": ""}' >"$T/e10"
# a forced target with a word the model cannot write: refused, as qkv attention --target refuses it
printf '{"src": "%s", "tgt": "qqqq un"}' "$src1" >"$T/a-unk"
expect_status serve_attention_unknown_target_word_is_400 400 '\\"tgt\\": not in the target vocabulary: .qqqq.' POST /v1/attention "$T/a-unk"
expect_status serve_explain_empty_text_is_400 400 '\\"src\\": nothing to explain' POST /v1/explain "$T/e10"
"$PY" -c 'import json; print(json.dumps({"src": "a " * 200, "tgt": "un " * 200, "ig_steps": 64}))' >"$T/e11"
expect_status serve_explain_past_its_work_bound_is_413 413 'explaining 201 target tokens with 64 \\"ig_steps\\" is about [0-9]+ GFLOP, more than the [0-9]+ one request may ask: at most [0-9]+ steps fit' POST /v1/explain "$T/e11"
expect_status serve_get_explain_is_405 405 'use POST' GET /v1/explain
expect_status serve_unknown_path_is_404 404 'no such path' GET /etc/passwd
# the 404's list and the --help's come from the route table: every listed path of the one
# is in the other, and each answers its method (a GET of a POST route is a 405 naming POST)
routes_help=$("$QKV" serve --help | sed -n '/^routes:/,/^$/p' | awk 'NF >= 2 && $1 ~ /^(GET|POST)$/ { print $1, $2 }')
list=$(call GET /no/such/path | head -1)
answered=""
while read -r m p; do
    [[ $list == *"$p"* ]] || answered+="$p missing from the 404; "
    [[ $m == POST ]] && [[ $(call GET "$p" | tail -1) != 405 ]] && answered+="GET $p not 405; "
    [[ $m == GET ]] && [[ $(call GET "$p" | tail -1) != 200 ]] && answered+="GET $p not 200; "
done <<<"$routes_help"
[[ $(wc -l <<<"$routes_help") -eq 8 && -z $answered ]] && ok serve_routes_listed_from_one_table ||
    bad serve_routes_listed_from_one_table "$answered $(wc -l <<<"$routes_help") routes in --help; 404: $list"
# the icon a browser asks for on every load of the page: an empty 204, not a 404 (a console error each time)
out=$("$BOUNDED" curl -s --max-time 30 -D "$T/icon.head" -o "$T/icon.body" -w '%{http_code}' "http://127.0.0.1:$port/favicon.ico")
[[ $out == 204 && ! -s $T/icon.body ]] && ! grep -qi '^content-type' "$T/icon.head" && ok serve_favicon_is_an_empty_204 ||
    bad serve_favicon_is_an_empty_204 "status $out: $(cat "$T/icon.head" "$T/icon.body")"
expect_status serve_post_favicon_is_405 405 'use GET' POST /favicon.ico "$T/b1"
expect_status serve_get_translate_is_405 405 'use POST' GET /v1/translate
bad_fields whatif /v1/whatif "\"src\": \"$src1\"" 'w1|"top": 0|\\"top\\" must be 1 to 20, not 0' 'w2|"tree": true, "beam": 9|\\"beam\\" must be 2 to 8, not 9' \
    'w3|"lens": "yes"|\\"lens\\" must be true or false' 'w4|"nbest": 2|unknown key \\"nbest\\"' \
    'w5|"pin": {"layer": 9, "head": 0, "query": 0, "key": 0}|\\"pin.layer\\": this model.s cross-attention has layers 0..1' \
    'w6|"pin": {"layer": 0, "head": 0, "query": 0, "key": 99}|\\"pin.key\\": ' \
    'w7|"pin": {"layer": 0, "head": 0, "query": 0, "weights": [1]}|\\"pin.weights\\": ' \
    'w8|"pin": {"layer": 0, "head": 0, "query": 99, "key": 0}|\\"pin.query\\": target position 99' \
    'w9|"pin": {"layer": 0, "head": 0, "query": 0, "weights": [0.5]}|\\"pin.weights\\" sum to 0.5, not 1' \
    'w10|"tgt": "qqqq un"|\\"tgt\\": not in the target vocabulary: .qqqq."}$' 'w11|"mask_heads": "cross.9.0"|\\"mask_heads\\": ' \
    'w12|"checkpoint": "nope"|no checkpoint'
printf '{"src": ""}' >"$T/w13"
expect_status serve_whatif_empty_text_is_400 400 '\\"src\\": nothing to look at' POST /v1/whatif "$T/w13"
printf '{"clean": "%s", "corrupt": "the old farmer sees a bird"}' "$clean" >"$T/p1"
expect_status serve_patch_token_counts_differ_is_400 400 '\\"corrupt\\": 6 tokens, \\"clean\\" 7: patching copies position for position' POST /v1/patch "$T/p1"
bad_fields patch /v1/patch "\"clean\": \"$clean\", \"corrupt\": \"$corrupt\"" 'p2|"compare": ["un", "zzzz"]|\\"compare\[1\]\\": .zzzz. is not in the target vocabulary' \
    'p3|"compare": ["un", "una"], "at": 99|\\"at\\": target position 99' 'p4|"at": 1|\\"at\\" is the position of \\"compare\\"' \
    'p5|"src": "a"|unknown key \\"src\\"' 'p6|"tgt": "qqqq"|\\"tgt\\": not in the target vocabulary'
expect_status serve_get_whatif_is_405 405 'use POST' GET /v1/whatif
expect_status serve_get_patch_is_405 405 'use POST' GET /v1/patch
# a truncated body: the client says 100 bytes and sends 10, then goes
"$BOUNDED" "$PY" - "$port" <<'PYEOF' >"$T/trunc.out" 2>&1
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30)
s.sendall(b"POST /v1/translate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{\"src\": [\"")
s.close()
PYEOF
out=$(call GET /v1/health)
[[ $(tail -1 <<<"$out") == 200 ]] && ok serve_serves_after_bad_requests || bad serve_serves_after_bad_requests "$out"

# ---- a client too slow to send its request is cut off -----------------------------------------
# 10 s from the connection, both for a client whose head never arrives whole (the gate cuts
# it) and for one whose head takes 8 s and whose body then trickles (handed on at 8 s, the
# reaper cuts it at 10 s, not at 18), side by side
if "$BOUNDED" "$PY" - "$port" <<'PYEOF'; then
import socket, sys, threading, time
head = b"POST /v1/translate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 40\r\n\r\n"
took = {}
def client(name, pieces, pause):
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30)
    start = time.time()
    try:
        for p in pieces:
            s.sendall(p)
            time.sleep(pause)
        took[name] = "the whole request went through"
    except (BrokenPipeError, ConnectionResetError):
        took[name] = time.time() - start
one_by_one = [bytes([b]) for b in head + b"x" * 40]
head_in_8s = [head[i:i + 6] for i in range(0, len(head), 6)]  # 12 pieces, 2/3 s apart
clients = [threading.Thread(target=client, args=("head never whole", one_by_one, 0.5)),
           threading.Thread(target=client, args=("head in 8 s, then the body", head_in_8s + one_by_one[len(head):], 2 / 3))]
for c in clients: c.start()
for c in clients: c.join()
for name, t in took.items():
    assert isinstance(t, float) and 9 < t < 14, f"{name}: cut off after {t if isinstance(t, str) else f'{t:.1f} s'}"
PYEOF
    ok serve_slow_client_is_cut_off_10s_after_connecting
else
    bad serve_slow_client_is_cut_off_10s_after_connecting "see above"
fi

# ---- the live page in headless Chromium: type, Enter, the map; another checkpoint, another map --
# The page qkv serves holds no checks: Chromium opens it through tests/selftest_proxy.py, which
# adds tests/viewer_selftest.js to it and passes every request on to the server.
page=$(call GET /)
[[ $page == *'__QKV_DATA__'* || $page != *'"qkv-live-1"'* || $page == *'function selftest'* ]] &&
    bad serve_live_page_holds_no_selftest "$(head -c 200 <<<"$page")" || ok serve_live_page_holds_no_selftest
if [[ -z $browser ]]; then
    skip_missing serve_browser_live_page "Chromium is not installed: the live page was NOT tested in a browser"
else
    "$BOUNDED" "$PY" tests/selftest_proxy.py "$port" tests/svg_fit.js tests/viewer_selftest.js >"$T/proxy.port" 2>"$T/proxy.err" &
    proxy_pid=$!
    wait_for "$T/proxy.port" '^[0-9]' 30 || echo "the proxy did not start: $(cat "$T/proxy.err")"
    live="http://127.0.0.1:$(head -1 "$T/proxy.port")"
    browser_flags "$T/profile" --virtual-time-budget=30000
    # a sentence with a word the model does not know: the page marks it as read as <unk>
    typed=$(sed 's/ /%20/g' <<<"$(head -1 "$T/data/test.src") zebra")
    selftest_url "$live/#selftest-live&text=$typed&ckpt=step-000050&unk=zebra" "$T/dom.html"
    if [[ $result == *'"ok":true'* && $result == *'"checkpointChangesMap":true'* && -z $console ]]; then
        ok serve_browser_enter_shows_the_map_and_the_checkpoint_menu_changes_it
        [[ $result == *'"headGrid":true'* ]] && ok serve_browser_head_grid_click_opens_the_head ||
            bad serve_browser_head_grid_click_opens_the_head "result: $result"
    else
        bad serve_browser_enter_shows_the_map_and_the_checkpoint_menu_changes_it "result: ${result:-none}; console: $console"
    fi
    [[ $result == *'"unknownMarked":true'* ]] && ok serve_browser_unknown_word_marked_as_unk ||
        bad serve_browser_unknown_word_marked_as_unk "result: ${result:-none}"
    shot=${BUILD:-build}/serve-live.png
    browser_shot "$live/#selftest-live&text=$typed" "$shot" 1300,1100 "$T/profile2"
    [[ -s $shot ]] && ok serve_browser_screenshot || bad serve_browser_screenshot "no $shot"
    # an address ending #text=SENTENCE asks that sentence as the page opens: a link to its analysis
    browser_flags "$T/profile-link" --virtual-time-budget=30000
    browser_dom "$live/#text=$typed" "$T/dom-link.html"
    status=$(grep -o '<div[^>]*id="live-status"[^<]*' "$T/dom-link.html" | sed 's/.*>//')
    nbest=$(grep -o '<ol[^>]*id="live-nbest".*</ol>' "$T/dom-link.html" | grep -o '<li' | wc -l)
    [[ $status == *"the best translation's maps"* && $nbest -ge 1 && -z $console ]] &&
        ok "serve_browser_text_in_the_address_is_asked_on_load ($nbest translations)" ||
        bad serve_browser_text_in_the_address_is_asked_on_load "status '$status', $nbest translations; console: $console"
fi

# ---- the live page's what-if controls and its explain pane, each worked in headless Chromium; a screenshot of each ----
# (pinavg: a click on the heads' average pins nothing and says why; explain: the pane qkv explain's page
# draws, asked of /v1/explain, for a sentence with a word read as <unk>; newsentence: every intervention
# made, then another sentence asked (the corrupt one): it starts clean, and the page says so)
if [[ -n $browser ]]; then
    live_text=$(sed 's/ /%20/g' <<<"$clean") live_corrupt=$(sed 's/ /%20/g' <<<"$corrupt")
    for control in mask pin pinavg prefix lens tree patch explain explainbeam newsentence; do
        url="$live/#selftest-whatif&text=$live_text&control=$control&corrupt=$live_corrupt"
        [[ $control == explain ]] && url="$live/#selftest-whatif&text=$live_text%20zebra&control=explain&unk=zebra"
        # the beam's best translation (beam 5, the page's default) is the one explained, not greedy's
        [[ $control == explainbeam ]] && url="$live/#selftest-whatif&text=$live_text&control=explainbeam"
        browser_flags "$T/profile-$control" --virtual-time-budget=30000
        selftest_url "$url" "$T/dom-$control.html"
        shot=${BUILD:-build}/live-$control.png
        page_console=$console
        browser_shot "$url" "$shot" 1300,1100 "$T/shot-$control"
        console=$page_console # the selftest's console is the verdict's; the picture's is not checked
        if [[ $result == *'"ok":true'* && -z $console && -s $shot ]]; then
            ok "serve_browser_whatif_$control"
        else
            bad "serve_browser_whatif_$control" "result: ${result:-none}; console: $console; screenshot: $(ls "$shot" 2>&1)"
        fi
    done
    kill -TERM $proxy_pid
    wait $proxy_pid 2>/dev/null
    proxy_pid=""
fi

kill -TERM $server_pid
wait $server_pid
rc=$?
server_pid=""
[[ $rc -eq 0 ]] && grep -q "qkv: stopped" "$T/server.log" && ok serve_sigterm_when_idle_exits_0 ||
    bad serve_sigterm_when_idle_exits_0 "exit $rc: $(tail -2 "$T/server.log")"

# ---- the work bound: a server that admits little refuses translate, whatif and patch with a 413 -----------
start_server "$T/server-cap.log" --workers 1 --max-gflop 0.0001 || exit 1
expect_status serve_whatif_past_the_work_bound_is_413 413 'this whatif is about [0-9.e+-]+ GFLOP, more than the 0.0001 one request may ask' POST /v1/whatif "$T/wi.json"
expect_status serve_patch_past_the_work_bound_is_413 413 'patching 8 source and [0-9]+ target positions is about [0-9.e+-]+ GFLOP, more than the 0.0001' POST /v1/patch "$T/pa.json"
expect_status serve_explain_past_a_set_work_bound_is_413 413 'explaining [0-9]+ target tokens' POST /v1/explain "$T/ex.json"
# a translation is judged before its search begins (a search once begun runs to its end)
printf '{"src": ["a b c", "d e"], "beam": 4}' >"$T/tr-cap.json"
expect_status serve_translate_past_the_work_bound_is_413 413 'this translation is about [0-9.e+-]+ GFLOP, more than the 0.0001 one request may ask: send fewer or shorter sentences, or a smaller \\"beam\\"' POST /v1/translate "$T/tr-cap.json"
kill -TERM $server_pid
wait $server_pid
server_pid=""

# ---- a full queue, and SIGTERM with a request in flight --------------------------------------
echo '{"format": "qkv-heads-1", "heads": [{"kind": "feed_forward"}]}' >"$T/w/heads/heads.json"
# a queue wait past the heavy request's decoding however slow the build (ThreadSanitizer's takes over 30 s):
# the queued request is answered, not refused at its deadline. The heavy request (8 GFLOP) is past a
# thirtieth of --max-gflop 100, so the light lane's worker leaves it to the one worker; the queued
# one asks for a checkpoint not loaded yet, whose cost is not known, so it waits for that worker too
start_server "$T/server2.log" --workers 1 --queue 1 --queue-wait 300 --max-gflop 100 || exit 1
grep -q "warning: $T/w/heads/heads.json: not a list of heads written by qkv heads" "$T/server2.log" &&
    ! "$BOUNDED" curl -s --max-time 30 "http://127.0.0.1:$port/" | grep -q '"head_analysis"' &&
    ok serve_foreign_heads_file_is_a_warning || bad serve_foreign_heads_file_is_a_warning "$(cat "$T/server2.log")"
cat "$T/data/test.src" "$T/data/test.src" | head -64 >"$T/heavy.src"
lines_json "$T/heavy.src" beam=64 >"$T/heavy.json"
(call POST /v1/translate "$T/heavy.json" >"$T/heavy.out") &
heavy=$!
for _ in $(seq 200); do grep -q '"working":1' <<<"$(call GET /v1/health)" && break; sleep 0.02; done
lines_json "$T/empty.src" checkpoint='"step-000050"' >"$T/queued.json"
(call POST /v1/translate "$T/queued.json" >"$T/queued.out") &
queued=$!
for _ in $(seq 200); do grep -q '"queued":1' <<<"$(call GET /v1/health)" && break; sleep 0.02; done
"$BOUNDED" curl -s --max-time 30 -D "$T/full.head" -o "$T/full.body" -H "Content-Type: application/json" -X POST --data-binary "@$T/empty.json" "http://127.0.0.1:$port/v1/translate"
grep -q '^HTTP/1.1 503' "$T/full.head" && grep -qi '^Retry-After: 1' "$T/full.head" && grep -q '"error":"the queue is full' "$T/full.body" &&
    ok serve_full_queue_is_503_with_retry_after || bad serve_full_queue_is_503_with_retry_after "$(head -1 "$T/full.head") $(cat "$T/full.body")"
kill -TERM $server_pid
wait $heavy $queued
wait $server_pid
rc=$?
server_pid=""
[[ $rc -eq 0 && $(tail -1 "$T/heavy.out") == 200 && $(tail -1 "$T/queued.out") == 200 ]] && [[ $(head -n -1 "$T/heavy.out" | texts | wc -l) -eq 64 ]] &&
    ok serve_sigterm_answers_requests_in_flight || bad serve_sigterm_answers_requests_in_flight "exit $rc, $(tail -c 100 "$T/heavy.out") $(tail -c 100 "$T/queued.out"): $(tail -3 "$T/server2.log")"

# ---- what the server trusts: no file a request names, no other site, no head it cannot read ----
# A copy of the run holding three more weights files: an 8-head model (its checkpoints have
# 4 heads), one whose file name is not UTF-8, and one whose load is slow (tests/shim/slow_open.c)
cp -r "$T/w" "$T/u"
rm -rf "$T/u/heads"
tiny_config "$T/h8.yaml" h8 "$T/data" 'steps: 20, batch_tokens: 1024, log_every: 10, valid_every: 20, threads: 2'
sed -i 's/heads: 4/heads: 8/' "$T/h8.yaml"
{ "$QKV" train "$T/h8.yaml" --set run_dir="$T/h8" && "$QKV" export "$T/h8" --out "$T/u/eight.safetensors" &&
    "$QKV" export "$T/w" --out "$T/u/slowload.safetensors" && cp "$T/u/slowload.safetensors" "$T/u/caf"$'\xe9'".safetensors" &&
    cp "$T/u/slowload.safetensors" "$T/u/slowload-drain.safetensors" &&
    cp "$(ls "$T"/u/ckpt/step-*.safetensors | head -1)" "$T/u/stepcopy.safetensors"; } \
    >"$T/h8.log" 2>&1 || { echo "set-up failed: $(tail -3 "$T/h8.log")"; exit 1; }
SLOW_OPEN=$(dirname "$QKV_BIN")/slow_open.so
[[ -f $SLOW_OPEN ]] || { echo "set-up failed: no slow_open.so beside $QKV_BIN (make builds it)"; exit 1; }
export ASAN_OPTIONS=${ASAN_OPTIONS:-}:verify_asan_link_order=0
LD_PRELOAD=$SLOW_OPEN QKV_SLOW_OPEN=slowload QKV_SLOW_OPEN_MS=2500 "$QKV" serve "$T/u" --port 0 --workers 2 2>"$T/server3.log" &
server_pid=$!
wait_for "$T/server3.log" "serving .* on http://127.0.0.1:[0-9]*/" 60 || { echo "server did not start: $(cat "$T/server3.log")"; exit 1; }
port=$(grep -o '127.0.0.1:[0-9]*' "$T/server3.log" | head -1 | cut -d: -f2)

# a mask is a list of heads: "@FILE" reads nothing, and says nothing of the file
echo 'TOPSECRET-LINE' >"$T/secret"
printf '{"src": ["a"], "mask_heads": "@%s"}' "$T/secret" >"$T/m1"
printf '{"src": ["a"], "mask_heads": "enc.0.0, @%s"}' "$T/secret" >"$T/m2"
for m in m1 m2; do
    out=$(call POST /v1/translate "$T/$m")
    [[ $(tail -1 <<<"$out") == 400 ]] && grep -q 'the API reads no file' <<<"$out" && ! grep -q TOPSECRET <<<"$out" &&
        ok "serve_mask_names_no_file_$m" || bad "serve_mask_names_no_file_$m" "$out"
done

# the mask is read against the model that answers: eight heads here, four in the default
printf '{"src": ["a red bird"], "checkpoint": "eight", "mask_heads": "enc.0.7"}' >"$T/m3"
printf '{"src": ["a red bird"], "mask_heads": "enc.0.7"}' >"$T/m4"
printf '{"src": "a red bird", "checkpoint": "eight", "mask_heads": "cross.1.6"}' >"$T/m5"
out3=$(call POST /v1/translate "$T/m3") out4=$(call POST /v1/translate "$T/m4") out5=$(call POST /v1/attention "$T/m5")
[[ $(tail -1 <<<"$out3") == 200 && $(tail -1 <<<"$out5") == 200 && $(tail -1 <<<"$out4") == 400 ]] &&
    grep -q '"checkpoint":"eight"' <<<"$out3" && grep -q 'has heads 0..3' <<<"$out4" &&
    ok serve_mask_is_read_against_the_model_that_answers ||
    bad serve_mask_is_read_against_the_model_that_answers "$(tail -c 200 <<<"$out3") | $out4 | $(tail -c 200 <<<"$out5")"

# a step checkpoint copied beside the config carries no vocabulary: not offered, and a
# command that reads it says what it is
out=$(call GET /v1/model)
grep -q '"eight"' <<<"$out" && ! grep -q '"stepcopy"' <<<"$out" && ok serve_lists_no_step_checkpoint_out_of_its_folder ||
    bad serve_lists_no_step_checkpoint_out_of_its_folder "$out"
expect_error step_checkpoint_away_from_its_run 2 "^qkv: $T/u/stepcopy.safetensors: weights without their vocabularies, read from a run's ckpt/ folder" \
    "$QKV" translate "$T/u/stepcopy.safetensors" </dev/null

# a file name that is not UTF-8 is listed and served (U+FFFD for its bad byte)
grep -qi '"caf\\ufffd"' <<<"$out" && [[ $(tail -1 <<<"$out") == 200 ]] &&
    [[ $(call POST /v1/translate <(printf '{"src": ["a red bird"], "checkpoint": "caf\xef\xbf\xbd"}') | tail -1) == 200 ]] &&
    [[ $("$BOUNDED" curl -s --max-time 30 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/") == 200 ]] &&
    ok serve_file_name_not_utf8_is_listed_and_served || bad serve_file_name_not_utf8_is_listed_and_served "$out"

# the weights file served alone, its name not UTF-8: the page and the model's JSON all the same
"$QKV" serve "$T/u/caf"$'\xe9'".safetensors" --port 0 2>"$T/alone.log" &
alone=$!
if wait_for "$T/alone.log" "on http://127.0.0.1:[0-9]*/ with" 60; then
    pa=$(grep -o '127.0.0.1:[0-9]*' "$T/alone.log" | head -1 | cut -d: -f2)
    m=$("$BOUNDED" curl -s --max-time 30 "http://127.0.0.1:$pa/v1/model")
    page=$("$BOUNDED" curl -s --max-time 30 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$pa/")
    grep -qi '"checkpoint":"caf\\ufffd"' <<<"$m" && [[ $page == 200 ]] && ok serve_weights_named_not_utf8_alone ||
        bad serve_weights_named_not_utf8_alone "page $page, model $(head -c 200 <<<"$m")"
else
    bad serve_weights_named_not_utf8_alone "$(cat "$T/alone.log")"
fi
kill -TERM $alone 2>/dev/null
wait $alone

# while a worker loads a checkpoint, the HTTP thread answers at once, a mask request too
(call POST /v1/translate <(printf '{"src": ["a red bird"], "checkpoint": "slowload"}') >"$T/slow.out") &
slow=$!
sleep 0.5
(call POST /v1/translate <(printf '{"src": ["a red bird"], "mask_heads": "enc.0.1"}') >"$T/masked.out") &
masked=$!
sleep 0.3
took=$("$BOUNDED" curl -s --max-time 30 -o /dev/null -w '%{time_total}' "http://127.0.0.1:$port/v1/health")
wait $slow $masked
[[ $(tail -1 "$T/slow.out") == 200 && $(tail -1 "$T/masked.out") == 200 ]] && awk -v t="$took" 'BEGIN { exit !(t < 0.5) }' &&
    ok serve_health_answers_while_a_checkpoint_loads || bad serve_health_answers_while_a_checkpoint_loads "health took ${took}s; $(tail -1 "$T/slow.out") $(tail -1 "$T/masked.out")"

# Host, Origin and Content-Type: another site's page can neither post nor read
# hcall NAME STATUS PATTERN CURL-ARGS...: one request by curl, its status and error
hcall() {
    local name=$1 status=$2 pattern=$3 out
    shift 3
    out=$("$BOUNDED" curl -s --max-time 30 -w '\n%{http_code}' "$@")
    if [[ $(tail -1 <<<"$out") == "$status" ]] && grep -qE -- "$pattern" <<<"$(head -n -1 <<<"$out")"; then ok "$name"
    else bad "$name" "$out"; fi
}
U=http://127.0.0.1:$port
hcall serve_foreign_host_is_403 403 '^\{"error":"Host .evil.example:[0-9]+. is not this server' -H "Host: evil.example:$port" "$U/v1/model"
hcall serve_localhost_host_passes 200 '"checkpoints"' -H "Host: localhost:$port" "$U/v1/model"
hcall serve_loopback_address_host_passes 200 '"status":"ok"' -H "Host: [::1]:$port" "$U/v1/health"
hcall serve_foreign_origin_is_403 403 'another site .Origin .http://evil.example' -H 'Origin: http://evil.example' \
    -H 'Content-Type: application/json' --data-binary '{"src": ["a"]}' "$U/v1/translate"
hcall serve_null_origin_is_403 403 'another site' -H 'Origin: null' "$U/v1/health"
hcall serve_own_origin_passes 200 '"translations"' -H "Origin: http://127.0.0.1:$port" -H 'Content-Type: application/json' \
    --data-binary '{"src": ["a"]}' "$U/v1/translate"
hcall serve_text_plain_body_is_415 415 'Content-Type: application/json' -H 'Content-Type: text/plain' --data-binary '{"src": ["a"]}' "$U/v1/translate"
hcall serve_form_body_is_415 415 'must be JSON' --data-binary '{"src": ["a"]}' "$U/v1/translate"
hcall serve_json_with_charset_passes 200 '"translations"' -H 'Content-Type: application/json; charset=utf-8' --data-binary '{"src": ["a"]}' "$U/v1/translate"
out=$("$BOUNDED" curl -s --max-time 30 -D - -o /dev/null -X DELETE "$U/v1/translate")
grep -qi '^Allow: POST' <<<"$out" && grep -q '^HTTP/1.1 405' <<<"$out" && ok serve_405_names_what_is_allowed || bad serve_405_names_what_is_allowed "$out"

# heads libmicrohttpd would answer with a page of its own, or not at all: the API's JSON each
# raw NAME STATUS PATTERN < BYTES: the bytes on a fresh connection; the answer's status and error
# (stdin, not a pipe: a function at the end of a pipe runs in a subshell, and its count is lost)
raw() {
    local name=$1 status=$2 pattern=$3 out
    out=$("$BOUNDED" "$PY" -c '
import socket, sys
data = sys.stdin.buffer.read()
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20)
try:
    s.sendall(data)
except OSError:
    pass
got = b""
try:
    while True:
        b = s.recv(65536)
        if not b:
            break
        got += b
except OSError as e:
    got += b"\n(" + str(e).encode() + b")"
head, _, body = got.partition(b"\r\n\r\n")
print(head.split(b"\r\n")[0].decode(errors="replace"))
print(body.decode(errors="replace"))' "$port")
    if grep -qE "^HTTP/1.1 $status " <<<"$out" && [[ $(sed -n 2p <<<"$out") =~ ^\{\"error\":\"$pattern ]]; then ok "$name"
    else bad "$name" "$(head -c 300 <<<"$out")"; fi
}
raw serve_70kb_url_is_414_json 414 'the request line is longer' < <("$PY" -c 'import sys; sys.stdout.write("GET /" + "a" * 70000 + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")')
raw serve_70kb_header_is_431_json 431 'the request.s headers are longer' < <("$PY" -c 'import sys; sys.stdout.write("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + "a" * 70000 + "\r\n\r\n")')
raw serve_negative_content_length_is_400_json 400 'Content-Length is not a number' < <(printf 'POST /v1/translate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: -1\r\n\r\n')
raw serve_huge_content_length_is_413_json 413 'the body is larger than' < <(printf 'POST /v1/translate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100000000000000000000000\r\n\r\n')
raw serve_garbage_request_line_is_400_json 400 'the request line is not' < <(printf '\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage\r\n\r\n')
raw serve_request_line_without_target_is_400_json 400 'the request line is not' < <(printf 'HELLO\r\n\r\n')
raw serve_http2_line_is_505_json 505 'only HTTP/1.0 and HTTP/1.1' < <(printf 'GET / HTTP/2.0\r\nHost: 127.0.0.1\r\n\r\n')
raw serve_no_host_is_400_json 400 'the request names no Host' < <(printf 'GET /v1/health HTTP/1.1\r\n\r\n')
raw serve_host_not_utf8_is_403_json 403 "Host '"$'\xef\xbf\xbd\xef\xbf\xbd'"' is not" < <(printf 'GET /v1/health HTTP/1.1\r\nHost: \xff\xfe\r\n\r\n')
printf '{"src": ["a"], "a\\nb": 1}' >"$T/m6"
expect_status serve_unknown_key_with_a_line_break_is_one_line 400 'unknown key \\"a\\\\x0ab\\"' POST /v1/translate "$T/m6"

# what libmicrohttpd reads after the head it would answer with a page of its own: no chunked
# body, no more header lines than it has memory for, no Content-Length it reads otherwise
raw serve_post_without_content_length_is_411_json 411 "a POST's body needs its Content-Length" < <(printf 'POST /v1/translate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{"src": ["a"]}')
raw serve_chunked_body_is_411_json 411 'send the body whole' < <(printf 'POST /v1/translate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{"src": ["a"]}\r\n0\r\n\r\n')
raw serve_chunked_with_a_space_is_411_json 411 'send the body whole' < <(printf 'POST /v1/translate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked \r\n\r\nd\r\n{"src": ["a"]}\r\n0\r\n\r\n')
raw serve_1000_header_lines_is_431_json 431 'the request has more than 100 header lines' < <("$PY" -c 'import sys; sys.stdout.write("GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n" + "a:b\r\n" * 1000 + "\r\n")')
# libmicrohttpd keeps an entry for each query argument and cookie too, in the same memory:
# a thousand of either ran it out (its HTML 431, or no answer in 10 s); the gate counts them
raw serve_1000_query_arguments_is_414_json 414 'the request.s target has more than 100 query arguments' < <("$PY" -c 'import sys; sys.stdout.write("GET /v1/health?" + "&".join(["a"] * 1000) + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")')
raw serve_1000_cookies_is_431_json 431 'the request has more than 100 cookies' < <("$PY" -c 'import sys; sys.stdout.write("GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: " + "; ".join(["a=b"] * 1000) + "\r\n\r\n")')
# and the worst head the gate lets through fits: 16 KiB, 100 header lines, 100 arguments, 100
# cookies in one long Cookie header (libmicrohttpd copies it)
out=$("$BOUNDED" "$PY" - "$port" <<'PYEOF'
import socket, sys
lines = ["GET /v1/health?" + "&".join(["a"] * 100) + " HTTP/1.1", "Host: 127.0.0.1", "Cookie: " + ";".join(["c"] * 100)]
lines += ["x:y"] * (100 - len(lines) + 1)
head = lambda: ("\r\n".join(lines) + "\r\n\r\n").encode()
lines[2] += "c" * (16383 - len(head()))
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20)
s.sendall(head())
got = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    got += b
print(len(head()), got.split(b"\r\n")[0].decode(), got.partition(b"\r\n\r\n")[2].decode())
PYEOF
)
[[ $out == "16383 HTTP/1.1 200 OK {\"status\":\"ok\""* ]] && ok serve_largest_head_admitted_is_answered ||
    bad serve_largest_head_admitted_is_answered "$(head -c 300 <<<"$out")"
raw serve_content_length_with_a_space_is_400_json 400 'Content-Length is not a number' < <(printf 'POST /v1/translate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 13 \r\n\r\n{"src": ["a"]}')
raw serve_two_origins_is_403_json 403 'a request names more than one Origin' < <(printf 'GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: http://127.0.0.1:%s\r\nOrigin: http://evil.example\r\n\r\n' "$port")
hcall serve_json_type_with_more_is_415 415 'must be JSON' -H 'Content-Type: application/json x' --data-binary '{"src": ["a"]}' "$U/v1/translate"

# a body over the limit from a client that does not wait for 100-continue: the 413, never a reset
if "$BOUNDED" "$PY" - "$port" <<'PYEOF'; then
import http.client, sys
for size in (2 << 20, 10 << 20, 10 << 20):
    c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=30)
    c.request("POST", "/v1/translate", body=b"a" * size, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    body = r.read()
    assert r.status == 413 and body.startswith(b'{"error":"the body is larger'), (size, r.status, body[:100])
    c.close()
PYEOF
    ok serve_big_body_without_100_continue_gets_413
else
    bad serve_big_body_without_100_continue_gets_413 "see above"
fi
out=$(call GET /v1/health)
[[ $(tail -1 <<<"$out") == 200 ]] && ok serve_serves_after_bad_heads || bad serve_serves_after_bad_heads "$out"

# more connections than the server takes, each with its head in and its body not: the ones
# past 512 wait in the backlog, the held ones are cut at 10 s, and the server answers again
# (libmicrohttpd handed more than its limit deadlocked for good)
if "$BOUNDED" "$PY" - "$port" <<'PYEOF'; then
import socket, sys, time, urllib.request
port = int(sys.argv[1])
head = b"POST /v1/translate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
held = []
for _ in range(530):
    s = socket.socket()
    s.setblocking(False)
    s.connect_ex(("127.0.0.1", port))
    held.append(s)
time.sleep(0.5)
for s in held:
    try:
        s.send(head)
    except OSError:
        pass
start = time.time()
r = urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/health", timeout=40)
assert r.status == 200, r.status
took = time.time() - start
assert took < 30, f"health after {took:.1f} s"
PYEOF
    ok serve_more_connections_than_it_takes_then_serves_again
else
    bad serve_more_connections_than_it_takes_then_serves_again "see above"
fi

# the n-best list keeps an empty hypothesis, as translate --nbest does
head -40 "$T/data/test.src" >"$T/nb.src"
"$QKV" translate "$T/w" --beam 64 --nbest 64 <"$T/nb.src" >"$T/nb.want" 2>/dev/null
lines_json "$T/nb.src" beam=64 nbest=64 >"$T/nb.json"
call POST /v1/translate "$T/nb.json" | head -n -1 | "$BOUNDED" "$PY" -c '
import json, sys
for i, t in enumerate(json.load(sys.stdin)["translations"]):
    for h in t["nbest"]:
        print("%d ||| %s ||| %.6f" % (i, h["text"], h["score"]))' >"$T/nb.got"
cmp -s "$T/nb.want" "$T/nb.got" && grep -q '^[0-9]* |||  |||' "$T/nb.want" && ok serve_nbest_keeps_the_empty_hypothesis ||
    bad serve_nbest_keeps_the_empty_hypothesis "$(wc -l <"$T/nb.want") lines against $(wc -l <"$T/nb.got"); empty ones: $(grep -c '^[0-9]* |||  |||' "$T/nb.want")"

# a second SIGTERM, and a SIGINT, during the drain drop nothing: the request in flight asks
# for a checkpoint not loaded yet, which takes 2.5 s to open, so the drain lasts past both
# signals however fast the machine decodes
lines_json "$T/heavy.src" checkpoint='"slowload-drain"' >"$T/drain.json"
(call POST /v1/translate "$T/drain.json" >"$T/heavy2.out") &
heavy=$!
for _ in $(seq 200); do grep -q '"working":1' <<<"$(call GET /v1/health)" && break; sleep 0.02; done
kill -TERM $server_pid
sleep 0.3
kill -TERM $server_pid
sleep 0.2
kill -INT $server_pid
wait $heavy
wait $server_pid
rc=$?
server_pid=""
[[ $rc -eq 0 && $(tail -1 "$T/heavy2.out") == 200 ]] && grep -q 'SIGTERM again: already stopping' "$T/server3.log" &&
    grep -q 'SIGINT again: already stopping' "$T/server3.log" && ok serve_repeated_signals_drop_nothing ||
    bad serve_repeated_signals_drop_nothing "exit $rc, $(tail -c 100 "$T/heavy2.out"): $(tail -3 "$T/server3.log")"

# ---- the queue's deadline and the stop's bound, on a short --queue-wait -------------------------
# One worker held 8 s by a slow checkpoint load (tests/shim/slow_open.c). A request queued
# behind it (for a checkpoint not loaded yet: not one the light lane takes) gets its 503 at its
# 1 s deadline, not when the worker comes free; then a SIGTERM
# gives up at its 2 s bound (twice the wait) on the request still being worked on, says it
# left exactly that one unanswered (not the one answered 503 meanwhile), and exits 0
LD_PRELOAD=$SLOW_OPEN QKV_SLOW_OPEN=slowload QKV_SLOW_OPEN_MS=8000 "$QKV" serve "$T/u" --port 0 --workers 1 --queue-wait 1 2>"$T/server4.log" &
server_pid=$!
wait_for "$T/server4.log" "serving .* on http://127.0.0.1:[0-9]*/" 60 || { echo "server did not start: $(cat "$T/server4.log")"; exit 1; }
port=$(grep -o '127.0.0.1:[0-9]*' "$T/server4.log" | head -1 | cut -d: -f2)
"$BOUNDED" curl -s --max-time 30 -w '\n%{http_code}' -H 'Content-Type: application/json' --data-binary '{"src": ["a red bird"], "checkpoint": "slowload"}' \
    "http://127.0.0.1:$port/v1/translate" >"$T/held.out" 2>&1 &
held=$!
for _ in $(seq 200); do grep -q '"working":1' <<<"$(call GET /v1/health)" && break; sleep 0.02; done
out=$("$BOUNDED" curl -s --max-time 30 -w '\n%{http_code} %{time_total}' -H 'Content-Type: application/json' --data-binary '{"src": ["a"], "checkpoint": "step-000050"}' "http://127.0.0.1:$port/v1/translate")
read -r code took <<<"$(tail -1 <<<"$out")"
[[ $code == 503 ]] && grep -q '^{"error":"the request waited past its deadline in the queue' <<<"$out" &&
    awk -v t="$took" 'BEGIN { exit !(t >= 0.9 && t < 3) }' && kill -0 $held 2>/dev/null &&
    ok serve_queued_request_gets_503_at_its_deadline || bad serve_queued_request_gets_503_at_its_deadline "after ${took}s: $out"
(call POST /v1/translate <(printf '{"src": ["a"], "checkpoint": "step-000050"}') >"$T/late.out") &
late=$!
for _ in $(seq 200); do grep -q '"queued":1' <<<"$(call GET /v1/health)" && break; sleep 0.02; done
start=$SECONDS
kill -TERM $server_pid
wait $server_pid
rc=$?
server_pid=""
stopped_in=$((SECONDS - start))
wait $held $late
[[ $rc -eq 0 && $stopped_in -le 4 ]] && grep -q '^qkv: stopped at its 2 s bound with 1 request unanswered: a worker was still on it' "$T/server4.log" &&
    ! grep -q 'not sent whole' "$T/server4.log" && [[ $(tail -1 "$T/late.out") == 503 && $(tail -1 "$T/held.out") == 000 ]] &&
    ok serve_stop_gives_up_at_its_bound_and_counts_only_the_unanswered ||
    bad serve_stop_gives_up_at_its_bound_and_counts_only_the_unanswered "exit $rc after ${stopped_in}s; held $(tail -1 "$T/held.out"), late $(tail -1 "$T/late.out"): $(tail -3 "$T/server4.log")"

# ---- an answer depends on its own request alone ------------------------------------------------
# On a model of d_model 128 a sentence's score moves in its last digits with the rows decoded
# beside it. One worker is held by a slow checkpoint load while eight clients send at once:
# four the one-sentence request ["A"], four the same request of six sentences, A among them.
# Each request is decoded alone: every ["A"] answer is the bytes ["A"] got alone, every six
# get the same bytes, as that request alone, and each sentence's text is its text alone.
tiny_config "$T/b.yaml" b "$T/data" 'steps: 40, batch_tokens: 1024, log_every: 20, valid_every: 40, threads: 2'
sed -i 's/d_model: 32, heads: 4, d_ff: 64/d_model: 128, heads: 4, d_ff: 512/' "$T/b.yaml"
{ "$QKV" train "$T/b.yaml" --set run_dir="$T/b" && "$QKV" export "$T/b" --out "$T/b/slowload.safetensors"; } >"$T/b.log" 2>&1 ||
    { echo "set-up failed: $(tail -3 "$T/b.log")"; exit 1; }
LD_PRELOAD=$SLOW_OPEN QKV_SLOW_OPEN=slowload QKV_SLOW_OPEN_MS=3000 "$QKV" serve "$T/b" --port 0 --workers 1 2>"$T/server5.log" &
server_pid=$!
wait_for "$T/server5.log" "serving .* on http://127.0.0.1:[0-9]*/" 60 || { echo "server did not start: $(cat "$T/server5.log")"; exit 1; }
port=$(grep -o '127.0.0.1:[0-9]*' "$T/server5.log" | head -1 | cut -d: -f2)
sed -n '2p;11p;23p;3p;37p;48p' "$T/data/test.src" >"$T/six.src"
one=$(sed -n 3p "$T/six.src")
printf '{"src": ["%s"], "beam": 4}' "$one" >"$T/one.json"
lines_json "$T/six.src" beam=4 >"$T/six.json"
call POST /v1/translate "$T/one.json" >"$T/one.alone"
call POST /v1/translate "$T/six.json" >"$T/six.alone"
for i in 1 2 3 4 5 6; do
    lines_json <(sed -n "${i}p" "$T/six.src") beam=4 >"$T/six$i.json"
    call POST /v1/translate "$T/six$i.json" | head -n -1 | texts >>"$T/six.each"
done
(call POST /v1/translate <(printf '{"src": ["a red bird"], "checkpoint": "slowload"}') >"$T/hold.out") &
hold=$!
for _ in $(seq 200); do grep -q '"working":1' <<<"$(call GET /v1/health)" && break; sleep 0.02; done
clients=()
for i in 1 2 3 4; do
    (call POST /v1/translate "$T/one.json" >"$T/one.$i") &
    clients+=($!)
    (call POST /v1/translate "$T/six.json" >"$T/six.$i") &
    clients+=($!)
done
wait "${clients[@]}" $hold
same=yes
for i in 1 2 3 4; do cmp -s "$T/one.alone" "$T/one.$i" && cmp -s "$T/six.alone" "$T/six.$i" || same=no; done
head -n -1 "$T/six.alone" | texts >"$T/six.got"
[[ $same == yes && $(tail -1 "$T/one.alone") == 200 ]] && cmp -s "$T/six.each" "$T/six.got" &&
    grep -qxF "$(head -n -1 "$T/one.alone" | texts)" "$T/six.got" && [[ $(tail -1 "$T/hold.out") == 200 ]] &&
    ok serve_same_request_same_bytes_whoever_else_asks ||
    bad serve_same_request_same_bytes_whoever_else_asks "same bytes: $same; alone $(head -c 160 "$T/one.alone") against $(head -c 160 "$T/one.1"); $(diff "$T/six.each" "$T/six.got" | head -4)"
kill -TERM $server_pid
wait $server_pid
server_pid=""

# ---- a client that half-closes after sending (nc -N) gets its answer ------------------------
# libmicrohttpd 0.9.75 reads a resumed connection before anything else when it was suspended
# while reading: the end of a half-closed stream closed it unanswered, whenever another
# connection was older (one mid-upload here). Two such clients beside one mid-upload: one
# answered at once (the light lane), one queued behind a worker held by a slow load.
"$QKV" export "$T/b" --out "$T/b/slowload2.safetensors" >"$T/b2.log" 2>&1 || { echo "set-up failed: $(tail -3 "$T/b2.log")"; exit 1; }
LD_PRELOAD=$SLOW_OPEN QKV_SLOW_OPEN=slowload2 QKV_SLOW_OPEN_MS=2000 "$QKV" serve "$T/b" --port 0 --workers 1 2>"$T/server7.log" &
server_pid=$!
wait_for "$T/server7.log" "serving .* on http://127.0.0.1:[0-9]*/" 60 || { echo "server did not start: $(cat "$T/server7.log")"; exit 1; }
port=$(grep -o '127.0.0.1:[0-9]*' "$T/server7.log" | head -1 | cut -d: -f2)
if "$BOUNDED" "$PY" - "$port" <<'PYEOF'; then
import socket, sys, threading, time
port = int(sys.argv[1])
def request(body):
    return b"POST /v1/translate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
def answer(s):
    got = b""
    while True:
        b = s.recv(65536)
        if not b:
            return got
        got += b
slow = b'{"src": ["a red bird"], "checkpoint": "slowload2"}'
held = {}
def hold():
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(request(slow))
    held["got"] = answer(s)
holder = threading.Thread(target=hold)
holder.start()
time.sleep(0.3)
upload = socket.create_connection(("127.0.0.1", port), timeout=30)  # mid-upload: 10 of 100 bytes
upload.sendall(b"POST /v1/translate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"src\": [")
time.sleep(0.2)
for name, body in (("light", b'{"src": ["a red bird"]}'), ("queued", slow)):
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(request(body))
    s.shutdown(socket.SHUT_WR)
    got = answer(s)
    assert got.startswith(b"HTTP/1.1 200 ") and b'"translations"' in got, (name, got[:200])
holder.join()
assert held["got"].startswith(b"HTTP/1.1 200 "), held["got"][:200]
PYEOF
    ok serve_half_closed_client_gets_its_answer
else
    bad serve_half_closed_client_gets_its_answer "see above"
fi
kill -KILL $server_pid
wait $server_pid 2>/dev/null
server_pid=""

# ---- lanes: a small request never waits behind one client's heavy ones --------------------------
# One worker; one client queues three explanations of about 100 GFLOP each (seconds apiece,
# past a thirtieth of the bound: heavy), then another client's small translate is answered
# while all three are still in flight (first come, first served, it came after all three)
start_server "$T/server6.log" --workers 1 || exit 1
heavy_src=$(printf 'the %.0s' $(seq 40)) heavy_tgt=$(printf 'un %.0s' $(seq 40))
printf '{"src": "%s", "tgt": "%s", "ig_steps": 64, "contrast": "una"}' "$heavy_src" "$heavy_tgt" >"$T/heavy-ex.json"
flood=()
for i in 1 2 3; do
    (call POST /v1/explain "$T/heavy-ex.json" >"$T/flood$i.out") &
    flood+=($!)
done
for _ in $(seq 400); do grep -q '"queued":2,"working":1' <<<"$(call GET /v1/health)" && break; sleep 0.02; done
queued=$(call GET /v1/health | head -1)
out=$(call POST /v1/translate <(printf '{"src": ["a red bird"]}'))
after=$(call GET /v1/health | head -1)
running=0
for p in "${flood[@]}"; do kill -0 "$p" 2>/dev/null && running=$((running + 1)); done
[[ $(tail -1 <<<"$out") == 200 && $queued == *'"queued":2,"working":1'* && $running -eq 3 ]] && grep -q '"translations"' <<<"$out" &&
    ok serve_small_request_passes_one_clients_heavy_ones ||
    bad serve_small_request_passes_one_clients_heavy_ones "before: $queued; $(tail -c 120 <<<"$out"); heavy ones still running: $running; after: $after"
kill -KILL $server_pid
wait $server_pid "${flood[@]}" 2>/dev/null
server_pid=""

# the address bound is the one printed; beyond loopback, a warning says so
for h in "::1:\[::1\]:" "::\[::\]:warning"; do
    IFS=: read -r _ <<<""
    case $h in
    ::1*) host=::1 shown='\[::1\]' warn=no ;;
    *) host=:: shown='\[::\]' warn=yes ;;
    esac
    "$QKV" serve "$T/w" --host "$host" --port 0 2>"$T/v6.log" &
    server_pid=$!
    if wait_for "$T/v6.log" "serving .* on http://$shown:[0-9]*/" 60; then
        p6=$(grep -o "http://$shown:[0-9]*" "$T/v6.log" | sed 's/.*://')
        code=$("$BOUNDED" curl -s --max-time 30 -o /dev/null -w '%{http_code}' "http://[::1]:$p6/v1/health")
        # every interface, IPv4 ones too
        [[ $warn == yes ]] && code=$code$("$BOUNDED" curl -s --max-time 30 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$p6/v1/health")
        warned=no
        grep -q "^qkv: warning: $host is not a loopback address" "$T/v6.log" && warned=yes
        [[ $code == 200 || $code == 200200 ]] && [[ $warned == "$warn" && ($warn == no || $code == 200200) ]] &&
            ok "serve_host_${warn/yes/wildcard}_prints_the_address_bound" ||
            bad "serve_host_${warn/yes/wildcard}_prints_the_address_bound" "health $code, warned $warned: $(cat "$T/v6.log")"
    else
        bad "serve_host_${warn/yes/wildcard}_prints_the_address_bound" "$(cat "$T/v6.log")"
    fi
    kill -TERM $server_pid
    wait $server_pid
    server_pid=""
done

expect_error serve_bad_port 2 "--port" "$QKV" serve "$T/w" --port 70000
expect_error serve_bad_queue_wait 2 "--queue-wait" "$QKV" serve "$T/w" --queue-wait 0 --port 0
expect_error serve_bad_host 2 "--host: 'nowhere' is not an IPv4" "$QKV" serve "$T/w" --host nowhere --port 0
expect_error serve_missing_run 2 "nope" "$QKV" serve "$T/nope" --port 0
# --allow-host's names are compared as a Host's are: in any case, an IPv6 address with or
# without its brackets; a name with a port would match nothing, and is refused
expect_error serve_allow_host_with_a_port 2 "^qkv: --allow-host: 'evil.example:80' is not a host name or address without a port" \
    "$QKV" serve "$T/w" --port 0 --allow-host "ok.example,evil.example:80"
expect_error serve_allow_host_bracket_with_a_port 2 "^qkv: --allow-host: '\[::2\]:80' is not" \
    "$QKV" serve "$T/w" --port 0 --allow-host "[::2]:80"
# an empty name admits nothing, and a '*' anywhere but alone or first would match nothing or
# too much: each is refused at start, in one line
for bad in "empty|,,|an empty name in ',,'" "empty_between|a.example, ,b.example|an empty name in 'a.example, ,b.example'" \
    "empty_last|a.example,|an empty name in 'a.example,'" "star_inside|a*.example.com|'a\*.example.com': a '\*' stands alone" \
    "star_last|example.*|'example.\*': a '\*' stands alone" "star_tld|*.com|'\*.com': a wildcard takes a domain of two labels" \
    "star_address|*.10.0.0.1|'\*.10.0.0.1': a wildcard takes"; do
    IFS='|' read -r name list want <<<"$bad"
    expect_error "serve_allow_host_refuses_${name}" 2 "^qkv: --allow-host: $want" "$QKV" serve "$T/w" --port 0 --allow-host "$list"
done
if start_server "$T/allow.log" --allow-host "Named.Example,[::2],::3 *.Wild.Example"; then
    U=http://127.0.0.1:$port
    hcall serve_allow_host_admits_a_name_in_any_case 200 '"status":"ok"' -H "Host: named.EXAMPLE:$port" "$U/v1/health"
    hcall serve_allow_host_admits_a_bracketed_ipv6 200 '"status":"ok"' -H "Host: [::2]:$port" "$U/v1/health"
    hcall serve_allow_host_admits_a_bare_ipv6 200 '"status":"ok"' -H "Host: [::3]" "$U/v1/health"
    hcall serve_allow_host_admits_no_other 403 'is not this server' -H "Host: other.example:$port" "$U/v1/health"
    # *.wild.example: any name under it, however deep, and neither it nor a name that only ends alike
    hcall serve_allow_host_wildcard_admits_a_subdomain 200 '"status":"ok"' -H "Host: a.WILD.example:$port" "$U/v1/health"
    hcall serve_allow_host_wildcard_admits_a_deeper_one 200 '"status":"ok"' -H "Host: b.a.wild.example" "$U/v1/health"
    hcall serve_allow_host_wildcard_not_the_domain_itself 403 'is not this server' -H "Host: wild.example:$port" "$U/v1/health"
    hcall serve_allow_host_wildcard_not_a_lookalike 403 'is not this server' -H "Host: evilwild.example:$port" "$U/v1/health"
    kill -TERM $server_pid
    wait $server_pid
    server_pid=""
else
    bad serve_allow_host_admits_a_name_in_any_case "$(cat "$T/allow.log")"
fi
finish
