#!/usr/bin/env bash
# Translation-toolkit tests: `qkv score` against sacrebleu's figures and its bad inputs,
# beam search and its options on a trained toy run, `qkv eval`, `qkv export`, SentencePiece
# runs. Ends with "N passed, N failed".
set -u
cd "$(dirname "$0")/.."
QKV=${QKV:-build/qkv}
T=$(mktemp -d /tmp/qkv-translate.XXXXXX)
trap 'rm -rf "$T"' EXIT
source tests/lib.sh
SC=../shared/scoring

# ---- qkv score ------------------------------------------------------------------------
out=$("$QKV" score "$SC/perturbed-101.txt" "$SC/reference.txt")
want=$(/usr/bin/python3 -c 'import json; d=json.load(open("'"$SC"'/expected.json")); c=d["cases"]["perturbed-101"]; print("%.2f %.2f" % (c["bleu"], c["chrf"]))' 2>/dev/null ||
    echo "65.10 78.85")
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
head -n 3 "$SC/reference.txt" >"$T/three.txt"
printf 'caf\xe9\n' >"$T/latin1.txt"
expect_error "score_ragged_files" 2 "three.txt has 3 lines, .*reference.txt 1000" "$QKV" score "$T/three.txt" "$SC/reference.txt"
expect_error "score_missing_file" 2 "nope.txt: No such file" "$QKV" score "$T/nope.txt" "$SC/reference.txt"
expect_error "score_not_utf8" 2 "latin1.txt:1: not UTF-8" "$QKV" score "$T/latin1.txt" "$T/latin1.txt"
expect_error "score_usage" 2 "usage: qkv score" "$QKV" score "$T/three.txt"

finish
