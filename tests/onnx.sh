#!/usr/bin/env bash
# qkv export --format onnx end to end, on tiny toy runs of every tokenizer: word (post-LN
# with tied embeddings; pre-LN with an output projection of its own), SentencePiece unigram
# and bpe, and char with a shared vocabulary: the folder's files; Debian's onnx checker
# (full_check) and strict shape inference on both graphs; onnxruntime-node running them on
# the export's ids against the figures qkv writes into reference.json (encoder output and
# every greedy step's log-probabilities within 1e-4, one line at a time and all lines in one
# padded batch; the ids past the target vocabulary never likely) and greedy output identical
# to qkv translate --greedy's on the toy test set; transformers.js' pipeline('translation')
# from the folder alone, offline, translating as qkv translate --greedy does and its
# tokenizer giving qkv's ids on every line (odd spacing too); the same bytes again, and
# under --average 1; the refusals. The tools come from scripts/deps.sh --with-onnx; a
# missing one is skipped loudly.
# Ends with "N passed, N failed, N skipped".
set -u
cd "$(dirname "$0")/.."
source tests/lib.sh
scratch onnx
NODE_MODULES=${QKV_NODE_MODULES:-$PWD/tests/onnx/node_modules}
TOL=1e-4
# make test installs the tools (scripts/deps.sh --with-onnx); under CI a missing one is
# installed here too, rather than counted as a failed skip
if [[ ${CI:-} == true ]] && ! { "$PY" -c 'import onnx' 2>/dev/null && [[ -f $NODE_MODULES/onnxruntime-node/package.json &&
    -f $NODE_MODULES/@huggingface/transformers/package.json ]]; }; then
    "$BOUNDED" scripts/deps.sh --with-onnx
fi

"$QKV" toy-data "$T/data" --train 1500 --valid 50 --test 50 >/dev/null
# train_run NAME KEY=VALUE...: a tiny toy run in $T/NAME
train_run() {
    local name=$1
    shift
    local sets=()
    for kv in "$@"; do sets+=(--set "$kv"); done
    "$QKV" train configs/toy.yaml --set run_dir="$T/$name" --set train.steps=150 --set model.d_model=32 \
        --set train.watch= --set data.train.src="$T/data/train.src" --set data.train.tgt="$T/data/train.tgt" \
        --set data.valid.src="$T/data/valid.src" --set data.valid.tgt="$T/data/valid.tgt" "${sets[@]}" \
        >"$T/$name.log" 2>&1 || { echo "set-up failed: $(tail -3 "$T/$name.log")"; exit 1; }
}
RUNS="post pre uni bpe char"
WORD_RUNS="post pre" # whose output ort_greedy.mjs spells (tokens joined by spaces)
train_run post
train_run pre model.norm=pre model.tie_embeddings=false
# SentencePiece: 350 pieces, the most the toy text gives a unigram model
train_run uni data.tokenizer=unigram data.vocab_size=350
train_run bpe data.tokenizer=bpe data.vocab_size=350
train_run char data.tokenizer=char data.shared_vocab=true data.max_len=200
# lines as a user types them: blanks doubled, at the ends, tabs
sed -n '1,10p' "$T/data/test.src" | awk '{ gsub(/ /, NR % 2 ? "  " : " \t "); print (NR % 3 ? "  " : "") $0 (NR % 4 ? " " : "") }' \
    >"$T/data/odd.src"
# and the special names, inside words and as words of their own: text to qkv like any other
# (not for the unigram run: '<' and '>' are no piece of the toy's, so qkv spells them as
# bytes, which transformers.js' Unigram cannot; docs/export.md)
w=$(head -1 "$T/data/test.src" | cut -d' ' -f1)
cp "$T/data/odd.src" "$T/data/odd-uni.src"
printf '%s\n' "$w<unk>$w" "<pad>$w" "$w <eos> $w" "<unk>" "$w<bos> <pad>" "<eos>$w<eos>" "a<unk>b $w" >>"$T/data/odd.src"

# ---- the folder ---------------------------------------------------------------------------
for run in $RUNS; do
    out=$T/$run.onnx
    "$QKV" export "$T/$run" --format onnx --out "$out" --reference "$T/data/test.src" >"$T/$run.export.log" 2>&1
    rc=$?
    [[ $rc -eq 0 && -s $out/onnx/encoder_model.onnx && -s $out/onnx/decoder_model_merged.onnx &&
        -s $out/reference.json && -s $out/generation_config.json && -s $out/tokenizer.json &&
        -s $out/tokenizer_config.json && -s $out/index.html ]] &&
        grep -q '"model_type": "marian"' "$out/config.json" && grep -q '"d_model": 32' "$out/config.json" &&
        grep -q '"decoder_start_token_id": 1' "$out/generation_config.json" && ! ls -d "$T"/*partial* 2>/dev/null &&
        ok "export_onnx_writes_the_folder_$run" ||
        bad "export_onnx_writes_the_folder_$run" "exit $rc; $(tail -2 "$T/$run.export.log")"
done
grep -q '"normalize_before": true' "$T/pre.onnx/config.json" &&
    grep -q '"tie_word_embeddings": false' "$T/pre.onnx/config.json" && ok export_onnx_config_says_pre_ln_untied ||
    bad export_onnx_config_says_pre_ln_untied "$(cat "$T/pre.onnx/config.json")"

# the export's ids: the target vocabulary's, then the source's own (none when shared)
for run in $RUNS; do
    verdict=$("$BOUNDED" "$PY" -c 'import json, sys
d = sys.argv[1]
c, t, r = (json.load(open(d + f)) for f in ("/config.json", "/tokenizer.json", "/reference.json"))
tgt = [l.rstrip("\n") for l in open(sys.argv[2], encoding="utf-8")]
src = [l.rstrip("\n") for l in open(sys.argv[3], encoding="utf-8")]
own = [w for w in src if w not in set(tgt)]
v = t["model"]["vocab"]
ids = [p[0] for p in v] if isinstance(v, list) else sorted(v, key=v.get)
want = tgt + own
bad = [] if ids == want else ["tokenizer ids %d, want %d (target %d + source own %d)" % (len(ids), len(want), len(tgt), len(own))]
bad += [] if c["vocab_size"] == r["vocab_size"] == len(want) and c["target_vocab_size"] == len(tgt) else ["config sizes"]
bad += [] if all(r["source_of_id"][i] == (src.index(w) if w in src else 3) for i, w in enumerate(want)) else ["source_of_id"]
bad += [] if c["share_encoder_decoder_embeddings"] == (src == tgt) else ["shared"]
print("; ".join(bad) or "ok")' "$T/$run.onnx" "$T/$run/tgt.vocab" "$T/$run/src.vocab" 2>&1)
    [[ $verdict == ok ]] && ok "export_onnx_ids_are_the_target_vocab_then_the_sources_own_$run" ||
        bad "export_onnx_ids_are_the_target_vocab_then_the_sources_own_$run" "$verdict"
done

# ---- Debian's onnx checker ----------------------------------------------------------------
if "$PY" -c 'import onnx' 2>/dev/null; then
    for run in $RUNS; do
        log=$("$BOUNDED" "$PY" -c 'import sys, onnx
for name in ("encoder_model", "decoder_model_merged"):
    m = onnx.load("%s/onnx/%s.onnx" % (sys.argv[1], name))
    assert m.ir_version == 8 and [(o.domain, o.version) for o in m.opset_import] == [("", 17)], m.opset_import
    onnx.checker.check_model(m, full_check=True)
    onnx.shape_inference.infer_shapes(m, check_type=True, strict_mode=True, data_prop=True)
    print(name, len(m.graph.node), "nodes")' "$T/$run.onnx" 2>&1)
        [[ $? -eq 0 ]] && ok "onnx_checker_full_and_strict_shapes_$run" ||
            bad "onnx_checker_full_and_strict_shapes_$run" "$(tail -1 <<<"$log")"
    done
else
    skip_missing onnx_checker "python3-onnx is not installed (scripts/deps.sh --with-onnx)"
fi

# ---- onnxruntime-node against qkv ---------------------------------------------------------
if command -v node >/dev/null && [[ -f $NODE_MODULES/onnxruntime-node/package.json ]]; then
    for run in $RUNS; do
        "$QKV" translate "$T/$run" --greedy <"$T/data/test.src" >"$T/$run.qkv.txt" 2>/dev/null
        figures=$(NODE_MODULES=$NODE_MODULES "$BOUNDED" node tests/onnx/ort_greedy.mjs "$T/$run.onnx" \
            "$T/$run/tgt.vocab" "$T/$run.ort.txt" 2>"$T/$run.node.err")
        echo "     $run: $figures"
        verdict=$("$BOUNDED" "$PY" -c 'import json, sys
f, tol = json.loads(sys.argv[1]), float(sys.argv[2])
bad = [k for k in ("encoder_max_diff", "batch_encoder_max_diff", "log_prob_max_diff", "batch_log_prob_max_diff",
                  "cross_attention_max_diff", "batch_cross_attention_max_diff") if not f[k] <= tol]
bad += ["cross_steps_compared"] if f["cross_steps_compared"] < 2 * f["lines"] else []
bad += [k for k in ("identical", "batch_identical") if f[k] != f["lines"]]
bad += ["steps_compared"] if f["steps_compared"] < 2 * f["lines"] else []
# an id past the target vocabulary is never likely: log p near -1e9
bad += ["source_only_max_log_prob"] if f["export_ids"] > f["target_ids"] and not f["source_only_max_log_prob"] < -1e8 else []
print(" ".join(bad) or "ok")' "$figures" "$TOL" 2>&1)
        [[ $verdict == ok ]] && ok "onnxruntime_matches_qkv_within_${TOL}_$run" ||
            bad "onnxruntime_matches_qkv_within_${TOL}_$run" "$verdict; $(tail -2 "$T/$run.node.err")"
        [[ " $WORD_RUNS " == *" $run "* ]] || continue
        [[ -s $T/$run.qkv.txt ]] && cmp -s "$T/$run.qkv.txt" "$T/$run.ort.txt" &&
            ok "onnxruntime_greedy_equals_qkv_translate_greedy_$run" ||
            bad "onnxruntime_greedy_equals_qkv_translate_greedy_$run" \
                "$(diff "$T/$run.qkv.txt" "$T/$run.ort.txt" | wc -l) diff lines; $(diff "$T/$run.qkv.txt" "$T/$run.ort.txt" | head -4)"
    done
else
    skip_missing onnxruntime "node or onnxruntime-node is missing (scripts/deps.sh --with-onnx)"
fi

# ---- transformers.js against qkv ----------------------------------------------------------
# pipeline('translation') from the folder alone, offline, with the folder's tokenizer: the
# same text as qkv translate --greedy on at least 99% of the lines (a difference can only be
# a near tie between two words, which float sums in another order may turn), and the
# tokenizer's ids qkv's on every line, the test set's and odd.src's (special names inside
# words among them), its decoder giving qkv's text for reference.json's id sequences, and
# generate()'s cross-attention weights (output_attentions) reference.json's to 1e-4
if command -v node >/dev/null && [[ -f $NODE_MODULES/@huggingface/transformers/package.json ]]; then
    for run in $RUNS; do
        [[ -s $T/$run.qkv.txt ]] || "$QKV" translate "$T/$run" --greedy <"$T/data/test.src" >"$T/$run.qkv.txt" 2>/dev/null
        figures=$(NODE_MODULES=$NODE_MODULES "$BOUNDED" node tests/onnx/tjs_translate.mjs "$T/$run.onnx" \
            "$T/data/test.src" "$T/$run.tjs.txt" 2>"$T/$run.tjs.err")
        echo "     $run transformers.js: $figures"
        same=$(exact_match "$T/$run.qkv.txt" "$T/$run.tjs.txt")
        lines=$(wc -l <"$T/$run.qkv.txt")
        [[ $lines -ge 50 ]] && awk -v s="$same" 'BEGIN { exit !(s >= 99) }' &&
            ok "transformers_js_translates_as_qkv_greedy_$run ($same% of $lines lines)" ||
            bad "transformers_js_translates_as_qkv_greedy_$run" "$same% of $lines lines; $(diff "$T/$run.qkv.txt" "$T/$run.tjs.txt" | head -4 | tr '\n' ' ') $(tail -c 300 "$T/$run.tjs.err")"
        oddsrc=$T/data/odd.src
        [[ $run == uni ]] && oddsrc=$T/data/odd-uni.src
        "$QKV" export "$T/$run" --format onnx --out "$T/$run.odd" --reference "$oddsrc" >/dev/null 2>&1
        odd=$(NODE_MODULES=$NODE_MODULES "$BOUNDED" node tests/onnx/tjs_translate.mjs "$T/$run.odd" \
            "$oddsrc" "$T/$run.odd.txt" 2>&1)
        verdict=$("$BOUNDED" "$PY" -c 'import json, sys
bad = []
for f in map(json.loads, sys.argv[1:]):
    bad += [] if f["tokenizer_ids_equal"] == f["tokenizer_compared"] >= 10 else [json.dumps(f["first_ids_difference"])]
    bad += [] if f["decoding_equal"] == f["decoding_compared"] >= 200 else ["decoding %d of %d: %s" % (
        f["decoding_equal"], f["decoding_compared"], json.dumps(f["first_decoding_difference"], ensure_ascii=False))]
    bad += [] if f["cross_attention_max_diff"] <= 1e-4 and f["cross_steps_compared"] >= 2 * f["tokenizer_compared"] else [
        "cross-attention %g over %d steps" % (f["cross_attention_max_diff"], f["cross_steps_compared"])]
    bad += [] if f["remote_requests"] == 0 else ["%d requests off the machine" % f["remote_requests"]]
print("; ".join(bad) or "ok")' "$figures" "$odd" 2>&1)
        [[ $verdict == ok ]] && ok "transformers_js_tokenizer_gives_qkvs_ids_offline_$run" ||
            bad "transformers_js_tokenizer_gives_qkvs_ids_offline_$run" "$verdict"
    done
else
    skip_missing transformers_js "node or @huggingface/transformers is missing (scripts/deps.sh --with-onnx)"
fi

# ---- the page: index.html translating in headless Chromium ---------------------------------
# The folder served from loopback by a server this test starts and stops, the library files
# beside the page as docs/export.md says (links here, copies for a user); the page types ten
# test lines (#selftest), presses Enter and must give qkv translate --greedy's ten lines; a
# folder without the library says what is missing
if [[ -z $browser ]]; then
    skip_missing onnx_page_in_chromium "Chromium is not installed (scripts/deps.sh --with-browser)"
elif ! [[ -f $NODE_MODULES/@huggingface/transformers/dist/transformers.min.js ]]; then
    skip_missing onnx_page_in_chromium "@huggingface/transformers is missing (scripts/deps.sh --with-onnx)"
else
    mkdir -p "$T/www"
    for run in post uni bare; do
        cp -r "$T/${run/bare/post}.onnx" "$T/www/$run"
        [[ $run == bare ]] && continue
        ln -s "$NODE_MODULES/@huggingface/transformers/dist/transformers.min.js" "$T/www/$run/"
        ln -s "$NODE_MODULES"/onnxruntime-web/dist/ort-wasm-simd-threaded.* "$T/www/$run/"
    done
    "$BOUNDED" "$PY" -u -m http.server --bind 127.0.0.1 --directory "$T/www" 0 >"$T/http.log" 2>&1 &
    server=$!
    wait_for "$T/http.log" "port [0-9]" 20
    port=$(grep -o 'port [0-9]*' "$T/http.log" | head -1 | cut -d' ' -f2)
    # page RUN: the page's verdict on the first ten test lines, typed as one text ($result);
    # its console errors in $console
    page() {
        local text
        text=$(head -10 "$T/data/test.src" | "$PY" -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.stdin.read().rstrip("\n")))')
        browser_flags "$T/profile-$1" --virtual-time-budget=60000
        selftest_url "http://127.0.0.1:$port/$1/index.html#selftest&text=$text" "$T/page-$1.html"
    }
    for run in post uni; do
        [[ -s $T/$run.qkv.txt ]] || "$QKV" translate "$T/$run" --greedy <"$T/data/test.src" >"$T/$run.qkv.txt" 2>/dev/null
        page $run
        verdict=$("$PY" -c 'import html, json, sys
r = json.loads(html.unescape(sys.argv[1]) or "{}")
want = [l.rstrip("\n") for l in open(sys.argv[2], encoding="utf-8")][:10]
got = r.get("translation", "").split("\n")
# the first line'"'"'s map as the page drew it: its weights reference.json'"'"'s, shape and all
ref = json.load(open(sys.argv[3], encoding="utf-8"))["lines"][0]["cross_attentions"]
page = r.get("cross") or []
shape = lambda a: (len(a), len(a[0]), len(a[0][0]), len(a[0][0][0])) if a else None
diff = max((abs(x - y) for L, M in zip(page, ref) for H, N in zip(L, M) for R, Q in zip(H, N) for x, y in zip(R, Q)), default=1)
bad = [] if r.get("ok") and got == want else ["%s; %d of 10 lines differ" % (r.get("status"), sum(a != b for a, b in zip(got + [""] * 10, want)))]
bad += [] if shape(page) == shape(ref) and diff <= 1e-4 else ["the drawn weights: shape %s, want %s, max diff %g" % (shape(page), shape(ref), diff)]
bad += [] if r.get("maps_drawn", 0) >= 10 * len(ref[0][0]) else ["%s map cells drawn" % r.get("maps_drawn")]
print("; ".join(bad) or "ok")' "$result" "$T/$run.qkv.txt" "$T/www/$run/reference.json" 2>&1)
        [[ $verdict == ok && -z $console ]] && ok "onnx_page_translates_and_draws_cross_attention_as_qkv_in_chromium_$run" ||
            bad "onnx_page_translates_and_draws_cross_attention_as_qkv_in_chromium_$run" "${verdict:-no verdict}; $console"
    done
    # the folder served as the server's root, as docs/export.md says (cd toy-onnx && python3 -m
    # http.server), and deeper under another path: the page finds its model either way
    mkdir -p "$T/www/deep/er"
    cp -r "$T/www/post" "$T/www/deep/er/post"
    "$BOUNDED" "$PY" -u -m http.server --bind 127.0.0.1 --directory "$T/www/post" 0 >"$T/http-root.log" 2>&1 &
    root_server=$!
    wait_for "$T/http-root.log" "port [0-9]" 20
    root_port=$(grep -o 'port [0-9]*' "$T/http-root.log" | head -1 | cut -d' ' -f2)
    text=$(head -10 "$T/data/test.src" | "$PY" -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.stdin.read().rstrip("\n")))')
    # page_at NAME URL: the page's verdict at URL (its #selftest typing the ten lines), $result
    page_at() {
        browser_flags "$T/profile-$1" --virtual-time-budget=60000
        selftest_url "$2#selftest&text=$text" "$T/page-$1.html"
    }
    for where in "root http://127.0.0.1:$root_port/" "deep http://127.0.0.1:$port/deep/er/post/index.html"; do
        page_at ${where%% *} "${where#* }"
        verdict=$("$PY" -c 'import html, json, sys
r = json.loads(html.unescape(sys.argv[1]) or "{}")
want = [l.rstrip("\n") for l in open(sys.argv[2], encoding="utf-8")][:10]
print("ok" if r.get("ok") and r.get("translation", "").split("\n") == want else r.get("status"))' "$result" "$T/post.qkv.txt" 2>&1)
        [[ $verdict == ok ]] && ok "onnx_page_served_from_its_${where%% *}_translates" ||
            bad "onnx_page_served_from_its_${where%% *}_translates" "${verdict:-no verdict}"
    done
    kill "$root_server" 2>/dev/null
    wait "$root_server" 2>/dev/null
    # opened as a file: the page says why it cannot run (a browser's rule), not that files are missing
    page_at file "file://$T/www/post/index.html"
    [[ $result == *'"ok":false'* && $result == *'must be served over HTTP'* ]] && ok onnx_page_opened_as_a_file_says_why ||
        bad onnx_page_opened_as_a_file_says_why "${result:-no verdict}"
    page bare
    [[ $result == *'"ok":false'* && $result == *'transformers.min.js is not beside this page'* ]] &&
        ok onnx_page_without_the_library_says_what_is_missing ||
        bad onnx_page_without_the_library_says_what_is_missing "${result:-no verdict}"
    # every request the pages made was for a file of the folder, and found
    grep -E '"GET [^"]*" [0-9]+' "$T/http.log" | grep -vE '" (200|304) |/favicon.ico|/bare/transformers.min.js' >"$T/http.bad"
    [[ ! -s $T/http.bad ]] && ok onnx_page_loads_only_its_folders_files ||
        bad onnx_page_loads_only_its_folders_files "$(head -3 "$T/http.bad")"
    kill "$server" 2>/dev/null
    wait "$server" 2>/dev/null
fi

# ---- the same bytes -----------------------------------------------------------------------
"$QKV" export "$T/post" --format onnx --out "$T/again" >/dev/null 2>&1
"$QKV" export "$T/post" --format onnx --average 1 --out "$T/avg" >/dev/null 2>&1
same=1
for f in onnx/encoder_model.onnx onnx/decoder_model_merged.onnx config.json generation_config.json tokenizer.json \
    tokenizer_config.json index.html; do
    cmp -s "$T/post.onnx/$f" "$T/again/$f" && cmp -s "$T/post.onnx/$f" "$T/avg/$f" || same=0
done
[[ $same == 1 && ! -e $T/again/reference.json ]] && ok export_onnx_same_bytes_again_and_averaged_over_one ||
    bad export_onnx_same_bytes_again_and_averaged_over_one "$(ls "$T/again" "$T/avg" 2>&1 | tr '\n' ' ')"
# a new export over an old one: its own entries replaced, a file of the user's left
echo mine >"$T/again/notes.txt"
touch "$T/again/reference.json"
"$QKV" export "$T/pre" --format onnx --out "$T/again" >/dev/null 2>&1
cmp -s "$T/pre.onnx/onnx/decoder_model_merged.onnx" "$T/again/onnx/decoder_model_merged.onnx" &&
    [[ -f $T/again/notes.txt && ! -e $T/again/reference.json ]] && ok export_onnx_replaces_its_own_entries_only ||
    bad export_onnx_replaces_its_own_entries_only "$(ls "$T/again" | tr '\n' ' ')"

# ---- a publish is all or nothing ----------------------------------------------------------
# sums DIR: every file's checksum under DIR, links and folders named by kind
sums() { (cd "$1" && find . -mindepth 1 | sort | while read -r f; do
    if [[ -L $f ]]; then echo "link $f"; elif [[ -d $f ]]; then echo "dir $f"; else echo "$(sha256sum <"$f") $f"; fi
done); }
"$QKV" export "$T/post" --format onnx --out "$T/pub" >/dev/null 2>&1
# an entry of another kind where the export puts one: refused before anything moves, the
# old set whole (the other entries' bytes too), no staging folder
collide() { # NAME PATH KIND: PATH (under the folder) made into KIND, the export refused
    local name=$1 path=$2 kind=$3 before err rc
    mv "$T/pub/$path" "$T/pub-aside"
    case $kind in
    dir) mkdir "$T/pub/$path" ;;
    file) echo theirs >"$T/pub/$path" ;;
    link) ln -s "$T/pub-aside" "$T/pub/$path" ;;
    esac
    before=$(sums "$T/pub")
    err=$("$QKV" export "$T/pre" --format onnx --out "$T/pub" 2>&1 >/dev/null)
    rc=$?
    if [[ $rc -eq 2 && $(wc -l <<<"$err") -eq 1 && $err == "qkv: $T/pub/$path: a "*" where qkv writes a "*": nothing in $T/pub was replaced"* &&
        $(sums "$T/pub") == "$before" && -z $(ls -d "$T"/pub.partial-* 2>/dev/null) ]]; then
        ok "export_onnx_refuses_$name"
    else
        bad "export_onnx_refuses_$name" "exit $rc: $err; $(diff <(echo "$before") <(sums "$T/pub") | head -3 | tr '\n' ' ')"
    fi
    rm -rf "${T:?}/pub/$path"
    mv "$T/pub-aside" "$T/pub/$path"
}
collide a_link_for_onnx onnx link
collide a_file_for_onnx onnx file
collide a_folder_for_config config.json dir
collide a_folder_for_tokenizer tokenizer.json dir
collide a_link_for_tokenizer_config tokenizer_config.json link
collide a_folder_for_a_graph onnx/decoder_model_merged.onnx dir
# a rename that fails halfway (tests/shim/fail_rename.c: tokenizer.json's, after config.json,
# the graphs and index.html went in): every one done is put back
FAIL_RENAME=$(dirname "$QKV_BIN")/fail_rename.so
before=$(sums "$T/pub")
# (a sanitizer build is told its runtime need not come first: the shim wraps rename alone)
err=$(ASAN_OPTIONS=${ASAN_OPTIONS:-}:verify_asan_link_order=0 LD_PRELOAD=$FAIL_RENAME QKV_FAIL_RENAME=/pub/tokenizer.json \
    "$QKV" export "$T/pre" --format onnx --out "$T/pub" 2>&1 >/dev/null)
rc=$?
if [[ $rc -eq 1 && $err == "qkv: $T/pub/tokenizer.json: cannot move into place: Input/output error" &&
    $(sums "$T/pub") == "$before" && -z $(ls -d "$T"/pub.partial-* 2>/dev/null) ]]; then
    ok export_onnx_failed_rename_puts_the_old_set_back
else
    bad export_onnx_failed_rename_puts_the_old_set_back "exit $rc: $err; $(diff <(echo "$before") <(sums "$T/pub") | head -4 | tr '\n' ' ')"
fi
# a user's graphs in onnx/ (a file, a folder of them) stay; a staging folder of a writer
# killed outright (its pid gone) is removed by the next export into the folder
mkdir -p "$T/pub/onnx/int8"
echo q >"$T/pub/onnx/int8/encoder_model.onnx"
echo q >"$T/pub/onnx/encoder_model_quantized.onnx"
sleep 0 &
dead=$!
wait $dead
mkdir -p "$T/pub.partial-$dead/new/onnx" "$T/pub.partial-$dead/old"
touch "$T/pub.partial-$dead/new/onnx/encoder_model.onnx" "$T/pub.partial-$dead/old/0"
"$QKV" export "$T/pre" --format onnx --out "$T/pub" >"$T/pub.log" 2>&1
rc=$?
if [[ $rc -eq 0 && $(cat "$T/pub/onnx/int8/encoder_model.onnx" "$T/pub/onnx/encoder_model_quantized.onnx") == $'q\nq' ]] &&
    cmp -s "$T/pre.onnx/onnx/decoder_model_merged.onnx" "$T/pub/onnx/decoder_model_merged.onnx" &&
    [[ -z $(ls -d "$T"/pub.partial-* 2>/dev/null) ]]; then
    ok export_onnx_keeps_a_users_graphs_and_clears_a_dead_writers_staging
else
    bad export_onnx_keeps_a_users_graphs_and_clears_a_dead_writers_staging "exit $rc: $(tail -1 "$T/pub.log"); $(ls -R "$T/pub/onnx" "$T"/pub.* 2>&1 | tr '\n' ' ')"
fi

# ---- refusals -----------------------------------------------------------------------------
expect_error export_refuses_an_unknown_format 2 "^qkv: --format: 'xml' is not a format qkv exports \(safetensors, onnx\)$" \
    "$QKV" export "$T/post" --format xml --out "$T/x"
expect_error export_refuses_reference_without_onnx 2 "^qkv: --reference: .*give --format onnx$" \
    "$QKV" export "$T/post" --reference "$T/data/test.src" --out "$T/x.safetensors"
echo file >"$T/a-file"
expect_error export_onnx_refuses_a_file_for_its_folder 2 "^qkv: --out: .*a-file exists and is not a directory$" \
    "$QKV" export "$T/post" --format onnx --out "$T/a-file"
expect_error export_onnx_refuses_a_missing_reference 2 "^qkv: .*no-such\.src" \
    "$QKV" export "$T/post" --format onnx --reference "$T/no-such.src" --out "$T/x"
# SentencePiece models whose tokenizer the Hugging Face format cannot restate: the unigram
# run's source model with one field changed (sentencepiece_model.proto's numbers), trained
# on for a step through data.spm_model; each export refused with its reason, nothing written
"$PY" - "$T/uni/src.model" "$T" <<'PYEOF'
import sys
def varint(b, i):
    v = s = 0
    while True:
        v |= (b[i] & 0x7f) << s; s += 7; i += 1
        if b[i - 1] < 0x80: return v, i
def enc(v):
    out = bytearray()
    while True:
        out.append((v & 0x7f) | (0x80 if v > 0x7f else 0)); v >>= 7
        if not v: return bytes(out)
def fields(b):
    i, out = 0, []
    while i < len(b):
        key, i = varint(b, i)
        if key & 7 == 0: v, i = varint(b, i); out.append((key, v))
        elif key & 7 == 5: out.append((key, b[i:i + 4])); i += 4
        else: n, i = varint(b, i); out.append((key, b[i:i + n])); i += n
    return out
def build(fs):
    return b"".join(enc(k) + (enc(v) if k & 7 == 0 else v if k & 7 == 5 else enc(len(v)) + v) for k, v in fs)
def patch(model, field, sub, value):  # sets field sub of message field to value
    out = []
    for k, v in fields(model):
        if k >> 3 == field:
            inner = [(kk, vv) for kk, vv in fields(v) if kk >> 3 != sub]
            inner.append(((sub << 3) | (2 if isinstance(value, bytes) else 0), value))
            v = build(inner)
        out.append((k, v))
    return build(out)
m = open(sys.argv[1], "rb").read()
for name, f, sub, value in (("cf", 3, 1, b"nmt_nfkc_cf"), ("word", 2, 3, 3), ("spaces", 3, 5, 0)):
    open("%s/%s.model" % (sys.argv[2], name), "wb").write(patch(m, f, sub, value))
PYEOF
for kind in cf word spaces; do
    train_run "spm_$kind" data.tokenizer=unigram train.steps=1 data.spm_model.src="$T/$kind.model" \
        data.spm_model.tgt="$T/uni/tgt.model"
done
expect_error export_onnx_refuses_a_normalization_tokenizers_lack 2 \
    "^qkv: tokenizer.json: the source SentencePiece model's normalization 'nmt_nfkc_cf' has no counterpart" \
    "$QKV" export "$T/spm_cf" --format onnx --reference "$T/data/test.src" --out "$T/x"
expect_error export_onnx_refuses_a_word_sentencepiece_model 2 \
    "^qkv: tokenizer.json: the source SentencePiece model is of type word; the export writes unigram and bpe models$" \
    "$QKV" export "$T/spm_word" --format onnx --out "$T/x"
expect_error export_onnx_refuses_unescaped_spaces 2 "^qkv: tokenizer.json: .*escape_whitespaces false" \
    "$QKV" export "$T/spm_spaces" --format onnx --out "$T/x"
[[ ! -e $T/x && ! -e $T/x.safetensors && $(cat "$T/a-file") == file ]] && ok export_refusals_write_nothing ||
    bad export_refusals_write_nothing "$(ls "$T")"

finish
