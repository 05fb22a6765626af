#!/usr/bin/env bash
# Translation-toolkit tests: `qkv score` against sacrebleu's figures and its bad inputs,
# beam search and its options on a trained toy run, `qkv eval`, `qkv export`, SentencePiece
# runs. Ends with "N passed, N failed, N skipped".
set -u
cd "$(dirname "$0")/.."
source tests/lib.sh
scratch translate
SC=tests/scoring # synthetic text with sacrebleu's own figures (tests/scoring/README.md)

# ---- qkv score ------------------------------------------------------------------------
out=$("$QKV" score "$SC/perturbed-101.txt" "$SC/reference.txt")
# sacrebleu's own figures, read from the file (no answer written here: a file that lacks
# them fails the test)
want=$(awk '/"perturbed-101"/ { on = 1 } on && /"bleu":/ && !b { gsub(/[^0-9.]/, "", $2); b = $2 }
    on && /"chrf":/ && !c { gsub(/[^0-9.]/, "", $2); c = $2 } END { if (b != "" && c != "") printf "%.2f %.2f", b, c }' "$SC/expected.json")
got=$(awk -F' = ' '/^BLEU\|/{split($2,a," "); b=a[1]} /^chrF2\|/{c=$2} END{print b, c}' <<<"$out")
[[ $got == "$want" ]] && ok "score_prints_bleu_and_chrf_with_signatures" || bad "score_prints_bleu_and_chrf_with_signatures" "got '$got', want '$want': $out"
grep -q '^BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0 = ' <<<"$out" &&
    grep -q '^chrF2|nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0 = ' <<<"$out" &&
    ok "score_signatures" || bad "score_signatures" "$out"
if "$QKV" score "$SC/identical.txt" "$SC/reference.txt" --json | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
assert abs(d["bleu"]["score"] - 100) < 1e-9 and abs(d["chrf"]["score"] - 100) < 1e-9, d'; then
    ok "score_json_identical_is_100"
else
    bad "score_json_identical_is_100" "JSON missing or not 100"
fi
n=$("$QKV" score "$SC/short.txt" "$SC/reference.txt" --sentence | grep -cE '^[0-9]+'$'\t')
[[ $n -eq 1000 ]] && ok "score_sentence_lines" || bad "score_sentence_lines" "$n per-sentence lines for 1000"
# --sentence with --json: the same per-line figures, inside the JSON
"$QKV" score "$SC/short.txt" "$SC/reference.txt" --sentence >"$T/sent.txt"
if "$QKV" score "$SC/short.txt" "$SC/reference.txt" --sentence --json | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
rows = [l.split("\t") for l in open(sys.argv[1]).read().splitlines()[1:] if l[:1].isdigit()]
assert len(d["sentences"]) == len(rows) == 1000 and d["sentence_bleu_signature"], len(d["sentences"])
for s, r in zip(d["sentences"], rows):
    assert "%.2f" % s["bleu"] == r[1] and "%.2f" % s["chrf"] == r[2], (s, r)' "$T/sent.txt"; then
    ok score_sentence_json_has_every_line
else
    bad score_sentence_json_has_every_line "no or different per-sentence scores in the JSON"
fi
head -n 3 "$SC/reference.txt" >"$T/three.txt"
printf 'caf\xe9\n' >"$T/latin1.txt"
expect_error "score_ragged_files" 2 "three.txt has 3 lines, .*reference.txt 1000" "$QKV" score "$T/three.txt" "$SC/reference.txt"
expect_error "score_missing_file" 2 "nope.txt: No such file" "$QKV" score "$T/nope.txt" "$SC/reference.txt"
expect_error "score_not_utf8" 2 "latin1.txt:1: not UTF-8" "$QKV" score "$T/latin1.txt" "$T/latin1.txt"
expect_error "score_usage" 2 "usage: qkv score" "$QKV" score "$T/three.txt"

# ---- a small trained run (word) and a subword run (bpe) ---------------------------------
"$QKV" toy-data "$T/data" --train 1500 --valid 100 --test 60 >/dev/null
tiny_config "$T/w.yaml" w "$T/data" 'steps: 150, batch_tokens: 1024, log_every: 20, valid_every: 30, checkpoint_every: 10, threads: 2'
"$QKV" train "$T/w.yaml" --set run_dir="$T/w" >"$T/w.log" 2>&1 || { echo "set-up failed: $(tail -3 "$T/w.log")"; exit 1; }

"$QKV" translate "$T/w" --greedy <"$T/data/test.src" >"$T/greedy.txt" 2>/dev/null
"$QKV" translate "$T/w" --beam 1 <"$T/data/test.src" >"$T/beam1.txt" 2>/dev/null
cmp -s "$T/greedy.txt" "$T/beam1.txt" && [[ $(wc -l <"$T/beam1.txt") -eq 60 ]] && ok "translate_beam_1_is_greedy" ||
    bad "translate_beam_1_is_greedy" "outputs differ"

# ---- a batch's groups decoded side by side, a core each: the same translations and scores on
# one, two or three workers (OPENBLAS_NUM_THREADS sets how many), masked heads masked on each
cat "$T/data/test.src" "$T/data/valid.src" >"$T/many.src" # 160 lines: 3 greedy groups, 10 of beam 4
for w in 1 2 3; do
    OPENBLAS_NUM_THREADS=$w "$QKV" translate "$T/w" --greedy <"$T/many.src" >"$T/g$w.txt" 2>/dev/null
    OPENBLAS_NUM_THREADS=$w "$QKV" translate "$T/w" --beam 4 --nbest 2 <"$T/many.src" >"$T/b$w.txt" 2>/dev/null
    OPENBLAS_NUM_THREADS=$w "$QKV" translate "$T/w" --greedy --mask-heads 'cross.*.0' <"$T/many.src" >"$T/m$w.txt" 2>/dev/null
done
cmp -s "$T/g1.txt" "$T/g2.txt" && cmp -s "$T/g1.txt" "$T/g3.txt" && cmp -s "$T/b1.txt" "$T/b2.txt" &&
    cmp -s "$T/b1.txt" "$T/b3.txt" && [[ $(wc -l <"$T/g2.txt") -eq 160 && $(wc -l <"$T/b2.txt") -eq 320 ]] &&
    cmp -s "$T/m1.txt" "$T/m2.txt" && cmp -s "$T/m1.txt" "$T/m3.txt" && ! cmp -s "$T/m1.txt" "$T/g1.txt" &&
    ok translate_workers_do_not_change_translations ||
    bad translate_workers_do_not_change_translations "$(diff "$T/b1.txt" "$T/b2.txt" | head -4; diff "$T/g1.txt" "$T/g2.txt" | head -4)"

# ---- qkv bench RUN --translate: the decoding benchmark translates as translate does --------
"$QKV" translate "$T/w" <"$T/many.src" >"$T/beam5.txt" 2>/dev/null
if "$QKV" bench "$T/w" --translate "$T/many.src" --ceiling 50 >"$T/bench.json" 2>"$T/bench.err" &&
    /usr/bin/python3 - "$T/bench.json" "$T/g2.txt" "$T/beam5.txt" <<'PYEOF'; then
import json, sys
r = json.load(open(sys.argv[1]))
words = [sum(len(l.split()) for l in open(f)) for f in sys.argv[2:4]]
assert r["sentences"] == 160, r
for key, want in zip(("greedy", "beam"), words):
    s = r[key]
    # the word vocabulary: one target token per word of translate's output
    assert s["target_tokens"] == want, (key, s["target_tokens"], want)
    assert s["gflop"] > 0 and abs(s["gflops"] - s["gflop"] / s["seconds"]) <= 0.01 + 0.01 * s["gflops"], s
    assert abs(s["ceiling_fraction"] - s["gflops"] / 50) <= 1e-3 + 1e-3 * s["ceiling_fraction"], s
assert r["beam"]["beam"] == 5 and r["greedy"]["beam"] == 1, r
assert r["beam"]["gflop"] > 2 * r["greedy"]["gflop"], "beam 5 runs more rows than greedy search"
PYEOF
    ok bench_translate_counts_what_translate_outputs
else
    bad bench_translate_counts_what_translate_outputs "$(cat "$T/bench.json" "$T/bench.err" | tail -3)"
fi

# the products each decoding step ran by are named: sgemm when told, panels when told and
# the CPU has AVX2 and FMA (nn/panels.h)
head -5 "$T/many.src" >"$T/five.src"
flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
want_panels=sgemm
[[ $flags == *" avx2 "* && $flags == *" fma "* ]] && want_panels=panels
step_products() { QKV_DECODE_PANELS=$1 "$QKV" bench "$T/w" --translate "$T/five.src" --ceiling 50 2>/dev/null |
    /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["step_products"])'; }
got0=$(step_products 0) got1=$(step_products 1)
[[ $got0 == sgemm && $got1 == "$want_panels" ]] && ok bench_translate_names_its_step_products ||
    bad bench_translate_names_its_step_products "QKV_DECODE_PANELS=0: $got0, =1: $got1 (want sgemm, $want_panels)"
# an option the mode would not read is refused, not ignored; an empty file is no benchmark
expect_error "bench_translate_refuses_training_options" 2 "^qkv: --steps goes with the training benchmark, not --translate$" \
    "$QKV" bench "$T/w" --translate "$T/five.src" --ceiling 50 --steps 5
expect_error "bench_translate_refuses_set" 2 "^qkv: --set goes with the training benchmark, not --translate$" \
    "$QKV" bench "$T/w" --translate "$T/five.src" --ceiling 50 --set train.threads=1
expect_error "bench_translate_refuses_peak" 2 "^qkv: --peak goes with a config, not --translate$" \
    "$QKV" bench "$T/w" --translate "$T/five.src" --peak
expect_error "bench_peak_refuses_ceiling" 2 "^qkv: --ceiling: --peak measures the ceiling; it takes none$" \
    "$QKV" bench configs/toy.yaml --peak --ceiling 100
expect_error "bench_peak_refuses_dump" 2 "^qkv: --dump goes with the training benchmark, not --peak$" \
    "$QKV" bench configs/toy.yaml --peak --batches-only --dump "$T/peak-dump.json"
: >"$T/none.src"
expect_error "bench_translate_empty_file" 2 "^qkv: $T/none.src: no line to translate$" \
    "$QKV" bench "$T/w" --translate "$T/none.src" --ceiling 50

# ---- a pipe that a person types into: each line's translation comes before the next is sent --
if "$BOUNDED" /usr/bin/python3 - "$QKV" "$T/w" "$T/data/test.src" "$T/greedy.txt" <<'PYEOF'; then
import select, subprocess, sys
qkv, run, src, want = sys.argv[1:5]
lines = open(src, encoding="utf-8").read().splitlines()[:5]
expected = open(want, encoding="utf-8").read().splitlines()[:5]
p = subprocess.Popen([qkv, "translate", run, "--greedy"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                     stderr=subprocess.DEVNULL, text=True, bufsize=1)
for line, exp in zip(lines, expected):
    p.stdin.write(line + "\n")
    p.stdin.flush()
    ready, _, _ = select.select([p.stdout], [], [], 60)  # the input stays open: no end of input yet
    assert ready, f"no translation of {line!r} within 60 s of sending it"
    got = p.stdout.readline().rstrip("\n")
    assert got == exp, (line, got, exp)
p.stdin.write(lines[0])  # a last line without its newline: translated at the end of input
p.stdin.close()
assert p.stdout.read().rstrip("\n") == expected[0]
assert p.wait(60) == 0
PYEOF
    ok translate_a_pipe_line_by_line_as_lines_arrive
else
    bad translate_a_pipe_line_by_line_as_lines_arrive "see above"
fi
cat "$T/data/test.src" | "$QKV" translate "$T/w" --beam 4 2>/dev/null >"$T/piped.txt"
"$QKV" translate "$T/w" --beam 4 <"$T/data/test.src" 2>/dev/null >"$T/filed.txt"
cmp -s "$T/piped.txt" "$T/filed.txt" && [[ $(wc -l <"$T/piped.txt") -eq 60 ]] && ok translate_pipe_equals_file ||
    bad translate_pipe_equals_file "$(diff "$T/piped.txt" "$T/filed.txt" | head -4)"
# one long line through a pipe is read in time linear in its length, as from a file: the
# pipe may take 3 times the file's time and half a second more. A 48 MiB line took 9 to 16 s
# through a pipe against 0.5 s from a file when each read looked for the newline through
# the whole line so far; a word this long is one unknown token, so its decoding is short
head -c 48M /dev/zero | tr '\0' x >"$T/long.src" && echo >>"$T/long.src"
t0=$EPOCHREALTIME
"$QKV" translate "$T/w" --greedy <"$T/long.src" >"$T/long-file.txt" 2>/dev/null
t1=$EPOCHREALTIME
"$BOUNDED" cat "$T/long.src" | "$QKV" translate "$T/w" --greedy >"$T/long-pipe.txt" 2>/dev/null
rcs="${PIPESTATUS[*]}"
t2=$EPOCHREALTIME
times=$(LC_ALL=C awk -v a="${t0/,/.}" -v b="${t1/,/.}" -v c="${t2/,/.}" 'BEGIN { printf "%.2f s from the file, %.2f s through the pipe", b - a, c - b
    exit !(c - b <= 3 * (b - a) + 0.5) }')
fast=$?
[[ $rcs == "0 0" && $fast -eq 0 && $(wc -l <"$T/long-pipe.txt") -eq 1 ]] && cmp -s "$T/long-pipe.txt" "$T/long-file.txt" &&
    ok translate_long_line_through_a_pipe_is_linear || bad translate_long_line_through_a_pipe_is_linear "exit $rcs; $times"
rm -f "$T/long.src"
"$QKV" translate "$T/w" --beam 4 --nbest 3 <"$T/data/test.src" >"$T/nbest.txt" 2>/dev/null
awk -F' [|][|][|] ' 'NF != 3 || $1 != int((NR - 1) / 3) { bad = 1 } END { exit bad || NR != 180 }' "$T/nbest.txt" &&
    ok "translate_nbest_format" || bad "translate_nbest_format" "$(head -3 "$T/nbest.txt")"
# the run's decode.length_penalty is what --length-penalty is when none is given (the scores
# of an n-best list show it), and a flag still overrules it; greedy search has no use for it
rm -rf "$T/wlp" && cp -r "$T/w" "$T/wlp" && rm -f "$T/wlp/lock" "$T/wlp/eval.jsonl"
sed -i 's/^  length_penalty: 1$/  length_penalty: 0/' "$T/wlp/config.yaml"
"$QKV" translate "$T/wlp" --beam 4 --nbest 3 <"$T/data/test.src" >"$T/nbest-run0.txt" 2>/dev/null
"$QKV" translate "$T/w" --beam 4 --nbest 3 --length-penalty 0 <"$T/data/test.src" >"$T/nbest-flag0.txt" 2>/dev/null
"$QKV" translate "$T/wlp" --beam 4 --nbest 3 --length-penalty 1 <"$T/data/test.src" >"$T/nbest-flag1.txt" 2>/dev/null
"$QKV" eval "$T/wlp" --src "$T/data/test.src" --ref "$T/data/test.tgt" --beam 4 >/dev/null 2>&1
"$QKV" eval "$T/wlp" --src "$T/data/test.src" --ref "$T/data/test.tgt" --greedy >/dev/null 2>&1
grep -q '^  length_penalty: 0$' "$T/wlp/config.yaml" && cmp -s "$T/nbest-run0.txt" "$T/nbest-flag0.txt" &&
    ! cmp -s "$T/nbest-run0.txt" "$T/nbest.txt" && cmp -s "$T/nbest-flag1.txt" "$T/nbest.txt" &&
    [[ $(grep -c '"beam": 4, "length_penalty": 0\.0,' "$T/wlp/eval.jsonl") -eq 1 &&
        $(grep -c '"beam": 1, "length_penalty": 1\.0,' "$T/wlp/eval.jsonl") -eq 1 ]] &&
    ok translate_takes_the_runs_length_penalty ||
    bad translate_takes_the_runs_length_penalty "$(grep -n length_penalty "$T/wlp/config.yaml"; head -c 300 "$T/wlp/eval.jsonl"; diff "$T/nbest-run0.txt" "$T/nbest-flag0.txt" | head -4)"
# and the decoding benchmark's beam is translate's, the run's penalty with it
"$QKV" translate "$T/wlp" <"$T/data/test.src" >"$T/wlp-beam.txt" 2>/dev/null
"$QKV" bench "$T/wlp" --translate "$T/data/test.src" --ceiling 50 >"$T/wlp-bench.json" 2>/dev/null &&
    /usr/bin/python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
assert r["beam"]["target_tokens"] == sum(len(l.split()) for l in open(sys.argv[2])), r["beam"]' "$T/wlp-bench.json" "$T/wlp-beam.txt" &&
    ok bench_translate_takes_the_runs_length_penalty ||
    bad bench_translate_takes_the_runs_length_penalty "$(tail -c 300 "$T/wlp-bench.json"; wc -w "$T/wlp-beam.txt")"
expect_error "translate_nbest_over_beam" 2 "--nbest: 5 is not between 1 and the beam \(4\)" "$QKV" translate "$T/w" --beam 4 --nbest 5
expect_error "eval_nbest_refused" 2 "^qkv: --nbest 3: qkv eval scores each sentence's best hypothesis alone" \
    "$QKV" eval "$T/w" --src "$T/data/test.src" --ref "$T/data/test.tgt" --beam 4 --nbest 3
expect_error "translate_bad_beam" 2 "--beam: '0' is not a beam size" "$QKV" translate "$T/w" --beam 0
expect_error "translate_bad_length_penalty" 2 "--length-penalty: 'x' is not a number" "$QKV" translate "$T/w" --length-penalty x
# standard input that is no text: refused at once, not read as an empty input (exit 0)
expect_error "translate_stdin_is_a_directory" 2 "^qkv: standard input: a directory, not text to translate$" \
    timeout 120 "$QKV" translate "$T/w" --greedy <"$T"
expect_error "translate_stdin_read_error" 2 "^qkv: standard input: read failed: Bad file descriptor$" \
    timeout 120 "$QKV" translate "$T/w" --greedy 0>>"$T/write-only.txt"

"$QKV" eval "$T/w" --src "$T/data/test.src" --ref "$T/data/test.tgt" --beam 3 >"$T/eval.txt" 2>&1
if grep -q '^BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0 = ' "$T/eval.txt" &&
    grep -q '^exact match .* reference NLL .*(perplexity .* unknown source tokens .* sentences/s' "$T/eval.txt" &&
    /usr/bin/python3 -c '
import json, sys
e = json.loads(open(sys.argv[1]).readlines()[-1])
assert e["sentences"] == 60 and e["beam"] == 3 and 0 < e["bleu"] <= 100 and e["ppl"] > 1, e' "$T/w/eval.jsonl"; then
    ok "eval_reports_and_appends_jsonl"
else
    bad "eval_reports_and_appends_jsonl" "$(cat "$T/eval.txt")"
fi
"$QKV" translate "$T/w" --beam 3 <"$T/data/test.src" >"$T/beam3.txt" 2>/dev/null
want=$("$QKV" score "$T/beam3.txt" "$T/data/test.tgt" | sed -n 's/^BLEU|[^=]*= \([0-9.]*\) .*/\1/p')
got=$(sed -n 's/^BLEU|[^=]*= \([0-9.]*\) .*/\1/p' "$T/eval.txt")
[[ -n $got && $got == "$want" ]] && ok "eval_bleu_equals_translate_then_score" || bad "eval_bleu_equals_translate_then_score" "$got vs $want"
# every search option that moves the score is in the record, and the run's page shows
# those away from their defaults
"$QKV" eval "$T/w" --src "$T/data/test.src" --ref "$T/data/test.tgt" --greedy --max-len-a 0 --max-len-b 2 \
    --no-repeat-ngram 3 --no-replace-unk >/dev/null 2>&1
if /usr/bin/python3 -c '
import json, sys
lines = open(sys.argv[1]).readlines()
e, before = json.loads(lines[-1]), json.loads(lines[-2])
assert (e["max_len_a"], e["max_len_b"], e["no_repeat_ngram"], e["replace_unk"]) == (0, 2, 3, False), e
assert (before["max_len_a"], before["max_len_b"], before["no_repeat_ngram"], before["replace_unk"]) == (2, 10, 0, True), before' "$T/w/eval.jsonl" &&
    "$QKV" report "$T/w" --out "$T/w-report.html" >/dev/null 2>&1 &&
    grep -q 'beam 1, length penalty 1, at most 0 x source + 2 tokens, no repeated 3-gram, &lt;unk&gt; kept' "$T/w-report.html" &&
    [[ $(grep -c 'at most 0 x source' "$T/w-report.html") -eq 1 ]]; then
    ok eval_records_every_search_option
else
    bad eval_records_every_search_option "$(tail -1 "$T/w/eval.jsonl")"
fi

# ---- --mask-heads -----------------------------------------------------------------------
# an empty SPEC masks nothing and changes nothing: the same bytes (the speed apart) and the
# same eval.jsonl record; masking every cross-attention head cuts the decoder off the source
no_speed() { sed -E 's/[0-9.]+ sentences\/s/N sentences\/s/; s/"sentences_per_s": *[0-9.]+//' "$@"; }
"$QKV" eval "$T/w" --src "$T/data/test.src" --ref "$T/data/test.tgt" --greedy >"$T/ev-plain.txt" 2>&1
tail -n 1 "$T/w/eval.jsonl" >"$T/ev-plain.jsonl"
"$QKV" eval "$T/w" --src "$T/data/test.src" --ref "$T/data/test.tgt" --greedy --mask-heads '' >"$T/ev-empty.txt" 2>&1
tail -n 1 "$T/w/eval.jsonl" >"$T/ev-empty.jsonl"
cmp -s <(no_speed "$T/ev-plain.txt") <(no_speed "$T/ev-empty.txt") && cmp -s <(no_speed "$T/ev-plain.jsonl") <(no_speed "$T/ev-empty.jsonl") &&
    ! grep -q masked "$T/ev-empty.txt" && ok "eval_mask_heads_empty_changes_nothing" ||
    bad "eval_mask_heads_empty_changes_nothing" "$(diff <(no_speed "$T/ev-plain.txt") <(no_speed "$T/ev-empty.txt"); diff <(no_speed "$T/ev-plain.jsonl") <(no_speed "$T/ev-empty.jsonl"))"
"$QKV" translate "$T/w" --greedy --mask-heads '' <"$T/data/test.src" >"$T/mask-empty.txt" 2>"$T/mask-empty.err"
"$QKV" translate "$T/w" --greedy <"$T/data/test.src" 2>"$T/mask-none.err" | cmp -s - "$T/mask-empty.txt" &&
    cmp -s "$T/mask-none.err" "$T/mask-empty.err" && ok "translate_mask_heads_empty_is_byte_identical" ||
    bad "translate_mask_heads_empty_is_byte_identical" "$(cat "$T/mask-empty.err")"
"$QKV" translate "$T/w" --greedy --mask-heads 'cross.*.*' <"$T/data/test.src" >"$T/mask-cross.txt" 2>"$T/mask-cross.err"
[[ $(wc -l <"$T/mask-cross.txt") -eq 60 ]] && ! cmp -s "$T/mask-cross.txt" "$T/greedy.txt" &&
    grep -q '^qkv: translating with .*, greedy search, 8 heads masked$' "$T/mask-cross.err" &&
    ok "translate_mask_all_cross_heads_changes_translations" ||
    bad "translate_mask_all_cross_heads_changes_translations" "$(cat "$T/mask-cross.err"; head -2 "$T/mask-cross.txt")"
"$QKV" eval "$T/w" --src "$T/data/test.src" --ref "$T/data/test.tgt" --greedy --mask-heads 'cross.*.*' >"$T/ev-cross.txt" 2>&1
if grep -q '^evaluating .*, greedy search, 8 heads masked$' "$T/ev-cross.txt" && /usr/bin/python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
plain, masked = rows[-3], rows[-1]
assert "mask_heads" not in plain and "masked_heads" not in plain, plain
assert masked["mask_heads"] == "cross.*.*", masked
assert masked["masked_heads"] == ["cross.%d.%d" % (l, h) for l in range(2) for h in range(4)], masked
assert float(masked["bleu"]) < float(plain["bleu"]) and float(masked["nll"]) > float(plain["nll"]), (plain, masked)' "$T/w/eval.jsonl"; then
    ok "eval_mask_heads_reported_and_recorded"
else
    bad "eval_mask_heads_reported_and_recorded" "$(head -1 "$T/ev-cross.txt"; tail -1 "$T/w/eval.jsonl")"
fi
# @FILE reads what the items say: comments, blank lines, one item a line
printf '# the second layer of cross-attention\n\ncross.1.0\ncross.1.1  # two of them\ncross.1.2\ncross.1.3\n' >"$T/heads.txt"
"$QKV" translate "$T/w" --greedy --mask-heads "@$T/heads.txt" <"$T/data/test.src" >"$T/mask-file.txt" 2>/dev/null
"$QKV" translate "$T/w" --greedy --mask-heads 'cross.1.*' <"$T/data/test.src" 2>/dev/null | cmp -s - "$T/mask-file.txt" &&
    [[ $(wc -l <"$T/mask-file.txt") -eq 60 ]] && ok "translate_mask_heads_file_is_its_items" ||
    bad "translate_mask_heads_file_is_its_items" "outputs differ"
# a bad SPEC: one line, exit 2, nothing translated, nothing appended
mkdir -p "$T/heads-dir"
expect_error "mask_heads_unknown_kind" 2 "^qkv: --mask-heads: 'bogus.0.0': unknown kind 'bogus': enc, dec or cross" \
    "$QKV" translate "$T/w" --mask-heads bogus.0.0
expect_error "mask_heads_no_such_layer" 2 "^qkv: --mask-heads: 'cross.99.0': this model's cross-attention has layers 0..1$" \
    "$QKV" translate "$T/w" --mask-heads cross.0.0,cross.99.0
expect_error "mask_heads_no_such_head" 2 "^qkv: --mask-heads: 'enc.0.4': this model's encoder self-attention has heads 0..3$" \
    "$QKV" translate "$T/w" --mask-heads enc.0.4
expect_error "mask_heads_malformed" 2 "^qkv: --mask-heads: 'cross.0': not KIND.LAYER.HEAD" "$QKV" translate "$T/w" --mask-heads cross.0
expect_error "mask_heads_missing_file" 2 "^qkv: --mask-heads: /nonexistent/heads.txt: No such file or directory$" \
    "$QKV" translate "$T/w" --mask-heads @/nonexistent/heads.txt
expect_error "mask_heads_file_is_a_directory" 2 "^qkv: --mask-heads: $T/heads-dir: a directory, not a regular file$" \
    "$QKV" translate "$T/w" --mask-heads "@$T/heads-dir"
printf 'cross.0.0\ncross.7.1\n' >"$T/bad-heads.txt"
expect_error "mask_heads_file_names_the_line" 2 "^qkv: --mask-heads: $T/bad-heads.txt:2: 'cross.7.1': this model's cross-attention has layers 0..1$" \
    "$QKV" translate "$T/w" --mask-heads "@$T/bad-heads.txt"
out=$("$QKV" translate "$T/w" --mask-heads dec.9.0 <"$T/data/test.src" 2>/dev/null)
rc=$?
lines=$(wc -l <"$T/w/eval.jsonl")
"$QKV" eval "$T/w" --src "$T/data/test.src" --ref "$T/data/test.tgt" --mask-heads dec.9.0 >"$T/ev-bad.txt" 2>&1
rc2=$?
[[ $rc -eq 2 && -z $out && $rc2 -eq 2 && $(cat "$T/ev-bad.txt") == "qkv: --mask-heads: 'dec.9.0': this model's decoder self-attention has layers 0..1" &&
    $(wc -l <"$T/w/eval.jsonl") -eq $lines ]] && ok "mask_heads_bad_spec_writes_nothing" ||
    bad "mask_heads_bad_spec_writes_nothing" "translate exit $rc: ${out:0:100}; eval exit $rc2: $(cat "$T/ev-bad.txt")"
# attention: a masked head keeps its own weights, but what it added is gone from the layers
# above: with the target forced, cross layer 0 is the same, cross and decoder self layer 1 differ
tgt=$("$QKV" attention "$T/w" --text "the old farmer sees a red bird" --out "$T/att-plain0" 2>/dev/null | sed -n 's/^translation (greedy): //p')
"$QKV" attention "$T/w" --text "the old farmer sees a red bird" --target "$tgt" --out "$T/att-plain" >/dev/null 2>&1
"$QKV" attention "$T/w" --text "the old farmer sees a red bird" --target "$tgt" --mask-heads cross.0.0 --out "$T/att-masked" >"$T/att-masked.txt" 2>&1
rc=$?
if [[ $rc -eq 0 && -n $tgt ]] && grep -q '^model: .*, 1 head masked$' "$T/att-masked.txt" && /usr/bin/python3 - "$T" <<'PY'; then
import json, sys
t = sys.argv[1]
a = json.load(open(t + "/att-plain/maps.json")); b = json.load(open(t + "/att-masked/maps.json"))
assert a["target_in"] == b["target_in"] and a["source"] == b["source"]
assert a["encoder_self"] == b["encoder_self"] and a["cross"][0] == b["cross"][0] and a["decoder_self"][0] == b["decoder_self"][0]
assert a["cross"][1] != b["cross"][1] and a["decoder_self"][1] != b["decoder_self"][1]
PY
    ok "attention_mask_heads_changes_the_layers_above"
else
    bad "attention_mask_heads_changes_the_layers_above" "exit $rc, target '$tgt': $(head -3 "$T/att-masked.txt")"
fi
expect_error "attention_mask_heads_bad_spec" 2 "^qkv: --mask-heads: 'cross.2.0': this model's cross-attention has layers 0..1$" \
    "$QKV" attention "$T/w" --text "the old farmer" --mask-heads cross.2.0 --out "$T/att-bad"
[[ ! -e $T/att-bad ]] && ok "attention_mask_heads_bad_spec_writes_nothing" || bad "attention_mask_heads_bad_spec_writes_nothing" "$(ls "$T/att-bad")"
expect_error "attention_mask_heads_not_with_watch" 2 "^qkv: --mask-heads goes with --text, not --watch$" \
    "$QKV" attention "$T/w" --watch --mask-heads cross.0.0

expect_error "eval_ragged" 2 "must be line-aligned" "$QKV" eval "$T/w" --src "$T/data/test.src" --ref "$T/data/valid.tgt"
# an empty set is refused, as qkv heads refuses it, not scored BLEU 0, perplexity 1 and recorded
: >"$T/empty.txt"
lines=$(wc -l <"$T/w/eval.jsonl")
expect_error "eval_empty_set" 2 "^qkv: $T/empty.txt: no pair to score: the file is empty$" \
    "$QKV" eval "$T/w" --src "$T/empty.txt" --ref "$T/empty.txt" --greedy
[[ $(wc -l <"$T/w/eval.jsonl") -eq $lines ]] && ok eval_empty_set_appends_nothing ||
    bad eval_empty_set_appends_nothing "$(tail -1 "$T/w/eval.jsonl")"
# a FIFO where the result goes is refused, never opened to wait for a reader
mv "$T/w/eval.jsonl" "$T/eval.jsonl.kept" && mkfifo "$T/w/eval.jsonl"
expect_error "eval_result_file_is_a_fifo" 2 "^qkv: $T/w/eval.jsonl: a FIFO, not a regular file$" \
    timeout 120 "$QKV" eval "$T/w" --src "$T/data/test.src" --ref "$T/data/test.tgt" --greedy
rm -f "$T/w/eval.jsonl" && mv "$T/eval.jsonl.kept" "$T/w/eval.jsonl"
printf 'caf\xe9\n' >"$T/latin1.src"
expect_error "eval_not_utf8" 2 "latin1.src:1: not UTF-8" "$QKV" eval "$T/w" --src "$T/latin1.src" --ref "$T/latin1.src"
# a command stopped by a signal says so in one line and dies of it (status 128 + N)
for _ in $(seq 200); do cat "$T/data/test.src"; done >"$T/long-input.src"
"$QKV" translate "$T/w" --beam 5 <"$T/long-input.src" >/dev/null 2>"$T/stopped.err" &
pid=$!
for _ in $(seq 100); do grep -q "translating with" "$T/stopped.err" && break; sleep 0.05; done
kill -TERM $pid
wait $pid
rc=$?
[[ $rc -eq 143 && $(tail -1 "$T/stopped.err") == "qkv: stopped by SIGTERM" ]] && ok translate_stopped_by_a_signal_says_so ||
    bad translate_stopped_by_a_signal_says_so "exit $rc: $(cat "$T/stopped.err")"
# translate goes on (a stream is not refused for one line) and says so once, at the end
{ head -2 "$T/data/test.src"; cat "$T/latin1.src"; printf 'x\xff y\n'; } >"$T/mixed.src"
"$QKV" translate "$T/w" --greedy <"$T/mixed.src" >"$T/mixed.txt" 2>"$T/mixed.err"
[[ $(wc -l <"$T/mixed.txt") -eq 4 ]] &&
    grep -qx "qkv: warning: 2 lines are not UTF-8 (the first: line 3); their bad bytes made unknown words" "$T/mixed.err" &&
    ok translate_warns_of_lines_not_utf8 || bad translate_warns_of_lines_not_utf8 "$(cat "$T/mixed.err")"
# words the source vocabulary lacks are read as <unk>: translate says so once, at the end,
# naming the first such line's words, each once
printf 'zebra okapi zebra\n%s\nzebra\n' "$(head -1 "$T/data/test.src")" >"$T/unk.src"
"$QKV" translate "$T/w" --greedy <"$T/unk.src" >"$T/unk.txt" 2>"$T/unk.err"
head -1 "$T/data/test.src" | "$QKV" translate "$T/w" --greedy >/dev/null 2>"$T/known.err"
[[ $(wc -l <"$T/unk.txt") -eq 3 ]] &&
    grep -qx "qkv: warning: 2 lines hold words not in the source vocabulary, read as <unk> (line 1: 'zebra', 'okapi')" "$T/unk.err" &&
    ! grep -q "source vocabulary" "$T/known.err" && ok translate_warns_of_unknown_words ||
    bad translate_warns_of_unknown_words "$(cat "$T/unk.err" "$T/known.err")"
# a checkpoint named from inside its own directory still finds its run
last=$(cd "$T/w/ckpt" && ls step-*.safetensors | tail -1)
qkv_abs=$(cd "$(dirname "$QKV")" && pwd)/$(basename "$QKV")
(cd "$T/w/ckpt" && "$qkv_abs" translate "$last" --greedy <../../data/test.src >"$T/bare.txt" 2>"$T/bare.err")
[[ $(wc -l <"$T/bare.txt") -eq 60 ]] && ok "translate_bare_checkpoint_name" || bad "translate_bare_checkpoint_name" "$(cat "$T/bare.err")"

# unknown-word replacement: a target vocabulary too small for the text makes <unk>s, which
# --replace-unk (the default) turns into source words and --no-replace-unk leaves alone
"$QKV" train "$T/w.yaml" --set run_dir="$T/u" --set data.min_freq=60 >"$T/u.log" 2>&1
"$QKV" translate "$T/u" --greedy --no-replace-unk <"$T/data/test.src" >"$T/unk.txt" 2>/dev/null
"$QKV" translate "$T/u" --greedy <"$T/data/test.src" >"$T/replaced.txt" 2>/dev/null
kept=$(grep -o '<unk>' "$T/unk.txt" | wc -l)
left=$(grep -o '<unk>' "$T/replaced.txt" | wc -l)
# every replacement is a word of its own source line
not_in_source=$(paste -d'\t' "$T/data/test.src" "$T/unk.txt" "$T/replaced.txt" | awk -F'\t' '{
    n = split($2, k, " "); split($3, r, " "); split($1, s, " "); for (w in s) src[s[w]] = 1
    for (i = 1; i <= n; i++) if (k[i] == "<unk>" && !(r[i] in src)) bad++
    delete src } END { print bad + 0 }')
((kept > 0 && left == 0 && not_in_source == 0)) && ok "replace_unk_copies_source_words" ||
    bad "replace_unk_copies_source_words" "$kept <unk> without replacement, $left with, $not_in_source not from the source"

# ---- qkv export -----------------------------------------------------------------------
"$QKV" export "$T/w" --out "$T/w.safetensors" >/dev/null 2>&1
"$QKV" translate "$T/w.safetensors" --greedy <"$T/data/test.src" >"$T/exported.txt" 2>/dev/null
cmp -s "$T/exported.txt" "$T/greedy.txt" && ok "export_translates_alone_like_the_run" || bad "export_translates_alone_like_the_run" "outputs differ"
size_ckpt=$(stat -c %s "$T/w/ckpt/best.safetensors")
size_exp=$(stat -c %s "$T/w.safetensors")
((size_exp * 2 < size_ckpt)) && "$QKV" info "$T/w.safetensors" | grep -q "^exported weights" && ok "export_has_no_moments" ||
    bad "export_has_no_moments" "$size_exp bytes vs $size_ckpt"
expect_error "export_average_of_one_file" 2 "^qkv: --average takes a run \(the mean of its last N step checkpoints\); $T/w.safetensors is weights outside one$" \
    "$QKV" export "$T/w.safetensors" --average 2 --out "$T/avg-of-one.safetensors"
[[ ! -e $T/avg-of-one.safetensors ]] && ok export_average_of_one_file_writes_nothing ||
    bad export_average_of_one_file_writes_nothing "$T/avg-of-one.safetensors written"
# a checkpoint of a run names its run: --average averages that run's last N
last_ckpt=$(ls "$T/w/ckpt"/step-*.safetensors | tail -1)
"$QKV" export "$last_ckpt" --average 3 --out "$T/avg-by-ckpt.safetensors" >/dev/null 2>&1 &&
    "$QKV" export "$T/w" --average 3 --out "$T/avg-by-dir.safetensors" >/dev/null 2>&1 &&
    cmp -s "$T/avg-by-ckpt.safetensors" "$T/avg-by-dir.safetensors" && ok export_average_of_a_runs_checkpoint ||
    bad export_average_of_a_runs_checkpoint "exported differently from the checkpoint and from the run"
"$QKV" export "$T/w" --average 3 --out "$T/avg.safetensors" >"$T/avg.log" 2>&1
/usr/bin/python3 - "$T" <<'PY' && ok "export_average_is_the_mean" || bad "export_average_is_the_mean" "$(cat "$T/avg.log")"
import json, struct, sys, glob
def load(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n]); d = b[8 + n:]
    name = "decoder.layers.0.cross_attn.w_q"; lo, hi = h[name]["data_offsets"]
    return struct.unpack("<%df" % ((hi - lo) // 4), d[lo:hi])
t = sys.argv[1]
last3 = sorted(glob.glob(t + "/w/ckpt/step-*.safetensors"))[-3:]
want = [sum(v) / 3 for v in zip(*[load(p) for p in last3])]
got = load(t + "/avg.safetensors")
assert max(abs(a - b) for a, b in zip(want, got)) < 1e-6
PY
[[ $(head -1 "$T/avg.log") == "averaged the last 3 checkpoints of $T/w:" && $(sed -n '2,4p' "$T/avg.log" | grep -c '^  .*/ckpt/step-[0-9]*\.safetensors$') -eq 3 ]] &&
    ok "export_average_names_what_it_averaged" || bad "export_average_names_what_it_averaged" "$(head -5 "$T/avg.log")"
expect_error "export_average_too_many" 2 "--average 9, but the run has 3 step checkpoints \(it keeps up to [0-9]+: train.keep_checkpoints\)$" \
    "$QKV" export "$T/w" --average 9 --out "$T/x.safetensors"
printed=$("$QKV" export "$T/w" --average 9 --out "$T/x.safetensors" 2>/dev/null)
[[ -z $printed ]] && ok "export_average_refused_prints_nothing" || bad "export_average_refused_prints_nothing" "$printed"
expect_error "export_needs_out" 2 "usage: qkv export" "$QKV" export "$T/w"
# an --out that is one of the run's checkpoints (by name, however spelled, there yet or
# not, or by being the same file) is refused: it would be replaced by weights alone
latest=$(ls "$T/w/ckpt"/step-*.safetensors | tail -1)
cp "$latest" "$T/latest.before" && ls "$T/w/ckpt" >"$T/ckpt.before"
ln "$latest" "$T/hardlink.safetensors"
expect_error "export_refuses_the_newest_checkpoint" 2 "^qkv: $latest: --out is a checkpoint of the run $T/w, which the export would replace" \
    timeout 120 "$QKV" export "$T/w" --out "$latest"
expect_error "export_refuses_best" 2 "^qkv: $T/w/ckpt/best.safetensors: --out is a checkpoint of the run" \
    timeout 120 "$QKV" export "$T/w" --average 2 --out "$T/w/ckpt/best.safetensors"
expect_error "export_refuses_a_future_step_name" 2 "^qkv: $T/w/../w/ckpt/step-999999.safetensors: --out is a checkpoint of the run" \
    timeout 120 "$QKV" export "$T/w" --out "$T/w/../w/ckpt/step-999999.safetensors"
expect_error "export_refuses_a_link_to_a_checkpoint" 2 "^qkv: $T/hardlink.safetensors: --out is a checkpoint of the run" \
    timeout 120 "$QKV" export "$T/w" --out "$T/hardlink.safetensors"
cmp -s "$latest" "$T/latest.before" && ls "$T/w/ckpt" | cmp -s - "$T/ckpt.before" && ok "export_refused_leaves_checkpoints_alone" ||
    bad "export_refused_leaves_checkpoints_alone" "$(ls "$T/w/ckpt")"
rm -f "$T/hardlink.safetensors"
# past a file size limit (no `trap '' XFSZ` here: qkv itself must not die of SIGXFSZ) the
# write fails with one line, exit 1, and leaves no tmp file
err=$(ulimit -f 1; timeout 120 "$QKV" export "$T/w" --out "$T/big.safetensors" 2>&1 >/dev/null)
rc=$?
left=$(ls "$T" | grep '^big\.safetensors')
[[ $rc -eq 1 && $(wc -l <<<"$err") -eq 1 && $err == "qkv: $T/big.safetensors."*".tmp: write failed: File too large" && -z $left ]] &&
    ok "export_file_size_limit_one_line_exit_1" || bad "export_file_size_limit_one_line_exit_1" "exit $rc: $err; left: $left"
# --average while a train of the run rotates its checkpoints every step: every export
# averages checkpoints that exist together (one rotated away is never reported missing)
tiny_config "$T/rot.yaml" rot "$T/data" 'steps: 100000, batch_tokens: 1024, log_every: 1000, valid_every: 20, checkpoint_every: 1, keep_checkpoints: 2, threads: 1'
timeout 120 "$QKV" train "$T/rot.yaml" --set run_dir="$T/rot" >"$T/rot.log" 2>&1 &
rot=$!
for _ in $(seq 600); do [[ -f $T/rot/ckpt/best.safetensors ]] && break; sleep 0.05; done
runs=0 fails=""
end=$((SECONDS + 8))
while ((SECONDS < end && runs < 500)) && kill -0 $rot 2>/dev/null; do
    err=$(timeout 120 "$QKV" export "$T/rot" --average 2 --out "$T/rot.safetensors" 2>&1 >/dev/null) || fails+="$err; "
    runs=$((runs + 1))
done
kill -INT $rot 2>/dev/null
wait $rot
[[ -z $fails && $runs -ge 20 ]] && timeout 120 "$QKV" info "$T/rot.safetensors" >/dev/null 2>&1 && ok "export_average_while_checkpoints_rotate" ||
    bad "export_average_while_checkpoints_rotate" "$runs exports; failed: ${fails:0:300}"

# subwords: the SentencePiece models live in the run, resume is bit-exact, output is text
sub() { # sub RUN_DIR STEPS [--set ...]: a bpe run of the same data
    local dir=$1 steps=$2
    shift 2
    "$QKV" train "$T/w.yaml" --set run_dir="$dir" --set data.tokenizer=bpe --set data.vocab_size=400 \
        --set data.shared_vocab=true --set train.steps="$steps" "$@" >"$dir.log" 2>&1
}
sub "$T/b" 40 || { echo "set-up failed: $(tail -3 "$T/b.log")"; exit 1; }
[[ -f $T/b/src.model && -f $T/b/tgt.model ]] && cmp -s "$T/b/src.model" "$T/b/tgt.model" && ok "bpe_models_in_the_run" ||
    bad "bpe_models_in_the_run" "$(ls "$T/b")"
sub "$T/b20" 20 && "$QKV" resume "$T/b20" --steps 40 >"$T/b20.resume.log" 2>&1
same_tensors "$T/b20/ckpt/step-000040.safetensors" "$T/b/ckpt/step-000040.safetensors" && ok "bpe_resume_bit_exact" ||
    bad "bpe_resume_bit_exact" "$(tail -2 "$T/b20.resume.log")"
"$QKV" translate "$T/b" --greedy <"$T/data/test.src" >"$T/bpe.txt" 2>/dev/null
if [[ $(wc -l <"$T/bpe.txt") -eq 60 ]] && ! grep -q '▁\|<unk>' "$T/bpe.txt"; then ok "bpe_translate_prints_text"; else
    bad "bpe_translate_prints_text" "$(head -2 "$T/bpe.txt")"; fi
# a length penalty ranks a beam's finished hypotheses: greedy search has one, and refuses it
expect_error "greedy_refuses_a_length_penalty" 2 "^qkv: --length-penalty ranks the finished hypotheses of a beam: greedy search" \
    "$QKV" translate "$T/w" --greedy --length-penalty 5 </dev/null
expect_error "eval_greedy_refuses_a_length_penalty" 2 "^qkv: --length-penalty ranks the finished hypotheses of a beam" \
    "$QKV" eval "$T/w" --beam 1 --length-penalty 0 --src "$T/data/test.src" --ref "$T/data/test.tgt"
# <unk> options act on word and char runs: a bpe run, which has no <unk> to replace, refuses them
expect_error "bpe_translate_refuses_replace_unk" 2 "^qkv: --no-replace-unk: a bpe run has no <unk> to replace \(word and char runs only\)$" \
    "$QKV" translate "$T/b" --greedy --no-replace-unk </dev/null
expect_error "bpe_heads_refuses_replace_unk" 2 "^qkv: --replace-unk: a bpe run has no <unk> to replace" \
    timeout 120 "$QKV" heads "$T/b" --replace-unk --src "$T/data/test.src" --ref "$T/data/test.tgt" --out "$T/bpe-heads"
expect_error "bpe_eval_refuses_replace_unk" 2 "^qkv: --replace-unk: a bpe run has no <unk> to replace" \
    "$QKV" eval "$T/b" --greedy --replace-unk --src "$T/data/test.src" --ref "$T/data/test.tgt"
"$QKV" export "$T/b" --out "$T/b.safetensors" >/dev/null 2>&1
"$QKV" translate "$T/b.safetensors" --greedy <"$T/data/test.src" 2>/dev/null | cmp -s - "$T/bpe.txt" && ok "bpe_export_translates_alone" ||
    bad "bpe_export_translates_alone" "outputs differ"
"$QKV" attention "$T/b" --text "the old farmer sees a purple zebra" --out "$T/attb" >/dev/null 2>&1
"$QKV" attention "$T/w" --text "the old farmer sees a purple zebra" --out "$T/attw" >/dev/null 2>&1
/usr/bin/python3 - "$T" <<'PY' && ok "attention_labels_are_surface_words" || bad "attention_labels_are_surface_words" "see maps.json"
import json, sys
t = sys.argv[1]
b = json.load(open(t + "/attb/maps.json")); w = json.load(open(t + "/attw/maps.json"))
labels = b["source"] + b["target_in"] + b["target_out"]
assert not any("\u2581" in x or x == "<unk>" for x in labels), labels
assert "".join(b["source"][:-1]).replace(" ", "") == "theoldfarmerseesapurplezebra", b["source"]
assert w["source"][:-1] == "the old farmer sees a purple zebra".split(), w["source"]
PY
cp "$T/b/src.model" "$T/given.model"
sub "$T/g" 10 --set data.spm_model.src="$T/given.model" --set data.spm_model.tgt="$T/given.model" --set data.shared_vocab=false &&
    cmp -s "$T/g/src.model" "$T/given.model" && ok "bpe_given_model_is_used" || bad "bpe_given_model_is_used" "$(tail -2 "$T/g.log")"
# given models are used, not trained: the log says which
grep -q "^using the SentencePiece models $T/given.model (source) and $T/given.model (target)$" "$T/g.log" &&
    ! grep -q "training SentencePiece" "$T/g.log" && ok "bpe_given_models_not_said_trained" ||
    bad "bpe_given_models_not_said_trained" "$(grep -i sentencepiece "$T/g.log")"
# a shared vocabulary with its one model given as src (and tgt a copy of the same bytes)
cp "$T/given.model" "$T/given-copy.model"
timeout 120 "$QKV" train "$T/w.yaml" --set run_dir="$T/gs" --set data.tokenizer=bpe --set data.shared_vocab=true --set train.steps=4 \
    --set data.spm_model.src="$T/given.model" --set data.spm_model.tgt="$T/given-copy.model" >"$T/gs.log" 2>&1 &&
    grep -q "^using the SentencePiece model $T/given.model for both sides$" "$T/gs.log" && ! grep -q "training SentencePiece" "$T/gs.log" &&
    cmp -s "$T/gs/tgt.model" "$T/given.model" && ok "bpe_shared_given_model_used_for_both" ||
    bad "bpe_shared_given_model_used_for_both" "$(grep -i "sentencepiece\|qkv:" "$T/gs.log")"
printf 'not a model\n' >"$T/foreign.model"
expect_error "bpe_foreign_model" 2 "foreign.model: not a SentencePiece model" \
    "$QKV" train "$T/w.yaml" --set run_dir="$T/f" --set data.tokenizer=bpe --set data.spm_model.src="$T/foreign.model" --set data.spm_model.tgt="$T/foreign.model"
expect_error "bpe_missing_model" 2 "data.spm_model.src.*nope.model" \
    "$QKV" train "$T/w.yaml" --set run_dir="$T/f" --set data.tokenizer=bpe --set data.spm_model.src="$T/nope.model" --set data.spm_model.tgt="$T/nope.model"
expect_error "spm_model_needs_subwords" 2 "data.spm_model: SentencePiece models need data.tokenizer bpe or unigram" \
    "$QKV" train "$T/w.yaml" --set run_dir="$T/f" --set data.spm_model.src="$T/given.model" --set data.spm_model.tgt="$T/given.model"
expect_error "bpe_everything_over_max_len" 2 "no usable sentence pairs left after encoding .* over max_len 3" \
    "$QKV" train "$T/w.yaml" --set run_dir="$T/f0" --set data.tokenizer=bpe --set data.vocab_size=300 --set data.max_len=3
# a size the text cannot give (a first config's guess) is cut to about the most it gives, said
# in one note a side; the run trains
out=$("$QKV" train "$T/w.yaml" --set run_dir="$T/fcap" --set data.tokenizer=unigram --set data.vocab_size=100000 \
    --set train.steps=2 2>&1)
[[ $? -eq 0 && $(grep -c "^note: data.vocab_size 100000 is more pieces than the \(source\|target\) text gives: its model has [0-9]*, about the most$" <<<"$out") -eq 2 ]] &&
    ok "spm_vocab_too_large_is_capped_with_a_note" || bad "spm_vocab_too_large_is_capped_with_a_note" "$(grep -E "qkv:|note:" <<<"$out")"
# a size too small for the text's characters is refused, named where it was given: the option
expect_error "spm_vocab_too_small_names_the_option" 2 "^qkv: --set data.vocab_size: data.vocab_size 10: training a unigram model of 10 pieces: " \
    "$QKV" train "$T/w.yaml" --set run_dir="$T/f" --set data.tokenizer=unigram --set data.vocab_size=10
# a run whose model file was swapped for another run's: the checkpoints no longer match
sub "$T/other" 10 --set data.vocab_size=420
# a shared vocabulary is one model: a different target model would go unused, so it is refused
expect_error "bpe_shared_vocab_refuses_a_second_model" 2 "^qkv: --set data.spm_model.tgt: data.spm_model.tgt: '$T/other/src.model' differs from data.spm_model.src '$T/given.model': a shared vocabulary is one model" \
    timeout 120 "$QKV" train "$T/w.yaml" --set run_dir="$T/f" --set data.tokenizer=bpe --set data.shared_vocab=true --set train.steps=4 \
    --set data.spm_model.src="$T/given.model" --set data.spm_model.tgt="$T/other/src.model"
cp "$T/other/src.model" "$T/b/src.model"
expect_error "bpe_model_of_another_run" 2 "vocabularies differ from those of" "$QKV" translate "$T/b"
rm "$T/b/tgt.model"
expect_error "bpe_missing_model_in_run" 2 "tgt.model: No such file" "$QKV" translate "$T/b"

finish
