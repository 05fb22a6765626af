#!/usr/bin/env bash
# `qkv heads` end to end on a small trained toy run: the files it writes (heads.json with
# one object per head, heads.svg, index.html, the masks of the curve), the default order
# chosen by the curves' areas and printed, the table's order,
# the masks against `qkv eval --mask-heads`, masking the head it ranks first, re-exports
# into the same directory, and its bad inputs. Ends with "N passed, N failed, N skipped".
set -u
cd "$(dirname "$0")/.."
source tests/lib.sh
scratch heads

"$QKV" toy-data "$T/data" --train 1500 --valid 50 --test 40 >/dev/null
tiny_config "$T/w.yaml" w "$T/data" 'steps: 300, batch_tokens: 1024, log_every: 100, valid_every: 100, checkpoint_every: 100, threads: 2'
"$QKV" train "$T/w.yaml" --set run_dir="$T/run" >"$T/train.log" 2>&1 ||
    { echo "set-up failed: $(tail -3 "$T/train.log")"; exit 1; }
D=$T/data

# ---- the analysis and its files -----------------------------------------------------------
"$QKV" heads "$T/run" --src "$D/test.src" --ref "$D/test.tgt" --gold "$D/test.align" --out "$T/h" >"$T/h.log" 2>&1
rc=$?
masks=$(ls "$T/h/masks" 2>/dev/null | wc -l)
# 4 scopes (all, encoder_self, decoder_self, cross) x 4 orders x 13 points, and the
# default order's 4 x 13 again as default-SCOPE-PCT.txt
if [[ $rc -eq 0 && -s $T/h/heads.json && -s $T/h/heads.svg && -s $T/h/index.html && $masks -eq 260 ]]; then
    ok "heads_writes_json_svg_html_and_260_masks"
else
    bad "heads_writes_json_svg_html_and_260_masks" "exit $rc, $masks masks; $(tail -3 "$T/h.log")"
fi

# on a terminal the curve's progress is one redrawn line, and a stop (Ctrl-C) mid-curve
# says so on a line of its own, not glued to the progress (script(1): a pseudo-terminal;
# the 1,500 training pairs, for a curve of some seconds)
timeout 120 script -qec "'$QKV' heads '$T/run' --src '$D/train.src' --ref '$D/train.tgt' --out '$T/hp'" /dev/null \
    >"$T/hp.tty" 2>&1 &
spid=$!
for _ in $(seq 1800); do grep -aq "curve: [0-9]* of" "$T/hp.tty" 2>/dev/null && break; sleep 0.05; done
pkill -INT -f -- "--out $T/hp\$" 2>/dev/null
wait $spid
lines=$(tr '\r' '\n' <"$T/hp.tty" | sed 's/^\x1b\[K//')
if grep -aq "^qkv heads: curve: [0-9]* of [0-9]* masks decoded" <<<"$lines" &&
    grep -aq "^qkv: stopped by SIGINT" <<<"$lines" && [[ ! -e $T/hp ]]; then
    ok "heads_progress_then_a_stop_on_its_own_line"
else
    bad "heads_progress_then_a_stop_on_its_own_line" "$(grep -aq "curve: [0-9]* of" "$T/hp.tty" || echo "no progress line in 90 s: ")$(tail -c 300 "$T/hp.tty" | tr '\r' '|')"
fi

# heads.json: the format, one object per head ((2 encoder + 2 * 2 decoder layers) * 4
# heads), every field, each layer's importance of L2 norm 1, the curves and their masks
check=$("$PY" - "$T/h" <<'EOF' 2>&1
import json, math, os, sys
out = sys.argv[1]
d = json.load(open(os.path.join(out, "heads.json")))
assert d["format"] == "qkv-heads-1", d["format"]
hs = d["heads"]
assert len(hs) == (2 + 2 * 2) * 4, len(hs)
fields = ["kind", "layer", "head", "rank", "importance", "importance_raw", "delta_nll", "confidence", "entropy",
          "previous", "current", "next", "rare", "sink", "aer", "role", "roles", "roles_by_rule"]
for h in hs:
    missing = [f for f in fields if f not in h]
    assert not missing, (h, missing)
    assert h["kind"] in ("encoder_self", "decoder_self", "cross"), h["kind"]
    assert (h["aer"] is None) == (h["kind"] != "cross"), h
    assert (h["previous"] is None) == (h["kind"] == "cross"), h
    assert (h["rare"] is None) == (h["kind"] == "decoder_self"), h
    assert 0 < h["confidence"] <= 1 and h["entropy"] >= 0, h
    assert 0 <= h["sink"] <= 1 and ("sink" in h["roles"]) == (h["sink"] >= 0.6), h
    rules = h["roles_by_rule"]
    assert sorted(rules) == ["clark", "relative", "voita"], rules
    assert h["roles"] == [r for rule in ("voita", "relative", "clark") for r in rules[rule]], h
    assert h["role"] == "+".join(h["roles"]), h
    assert all(r.startswith(("rel:", "top:")) for r in rules["relative"]) and rules["clark"] in ([], ["sink"]), h
kinds = {k: sum(h["kind"] == k for h in hs) for k in ("encoder_self", "decoder_self", "cross")}
assert kinds == {"encoder_self": 8, "decoder_self": 8, "cross": 8}, kinds
assert sorted(h["rank"] for h in hs) == list(range(1, 25))
# each kind's top head for a share that varies over the kind is named, once
for k in kinds:
    for share in ("previous", "current", "next", "rare"):
        vals = [h[share] for h in hs if h["kind"] == k and h[share] is not None]
        tops = [h for h in hs if h["kind"] == k and "top:" + share in h["roles"]]
        want = 1 if vals and max(vals) > 0 and max(vals) > min(vals) else 0
        assert len(tops) == want, (k, share, len(tops), vals)
        assert not tops or tops[0][share] == max(vals), (k, share, tops[0][share], max(vals))
for k in kinds:
    for l in range(2):
        norm = math.sqrt(sum(h["importance"] ** 2 for h in hs if h["kind"] == k and h["layer"] == l))
        assert abs(norm - 1) < 1e-4, (k, l, norm)
for key in ("spearman", "spearman_raw", "base_nll", "thresholds", "set", "entropy_unit", "importance", "delta_nll"):
    assert key in d, key
assert d["thresholds"]["previous"] == 0.8 and d["set"]["sentences"] == 40 and d["entropy_unit"] == "nats", d
assert d["thresholds"]["sink"] == 0.6 and d["thresholds"]["relative_sds"] == 2, d["thresholds"]
assert -1 <= d["spearman"] <= 1
c = d["curve"]
assert len(c["curves"]) == 16 and c["decoding"]["beam"] == 5, c["decoding"]
orders = ["importance", "importance_raw", "delta_nll", "random"]
assert sorted({cv["order"] for cv in c["curves"]}) == sorted(orders)
# every curve's area, the trapezoids' mean BLEU; the default is the score order whose curve
# over all heads has the largest (ties: delta_nll, importance_raw, importance)
def area(pts):
    return sum((b["pct"] - a["pct"]) * (a["bleu"] + b["bleu"]) / 2 for a, b in zip(pts, pts[1:])) / 100
for cv in c["curves"]:
    assert abs(cv["area"] - area(cv["points"])) < 1e-3, (cv["order"], cv["scope"], cv["area"])
areas = d["order_areas"]
assert sorted(areas) == sorted(orders), areas
for cv in c["curves"]:
    if cv["scope"] == "all":
        assert abs(areas[cv["order"]] - area(cv["points"])) < 1e-3, (cv["order"], areas)
best = max(["delta_nll", "importance_raw", "importance"], key=lambda o: areas[o])  # max keeps the first of a tie
# every order's masks, 4 scopes x 13 points, and the default's again
for o in orders + ["default"]:
    files = [f for f in os.listdir(os.path.join(out, "masks")) if f.startswith(o + "-") and f.endswith(".txt")]
    assert len(files) == 52, (o, len(files))
assert d["default_order"] == best, (d["default_order"], areas)
code = {"encoder_self": "enc", "decoder_self": "dec", "cross": "cross"}
name = lambda h: "%s.%d.%d" % (code[h["kind"]], h["layer"], h["head"])
for cv in c["curves"]:
    pts = cv["points"]
    assert [p["pct"] for p in pts] == [0, 10, 20, 25, 30, 40, 50, 60, 70, 75, 80, 90, 100], pts
    n = cv["heads"]
    prev = set()
    for p in pts:
        lines = open(os.path.join(out, p["mask"])).read().splitlines()
        assert len(lines) == p["removed"] == (p["pct"] * n + 50) // 100, (p, len(lines))
        assert prev <= set(lines), ("masks do not grow", p["mask"])
        prev = set(lines)
        if cv["scope"] != "all":
            assert all(l.startswith(code[cv["scope"]] + ".") for l in lines), (cv["scope"], lines)
    # a score order removes the least important by that score first
    if cv["order"] != "random":
        scope = [h for h in hs if cv["scope"] in ("all", h["kind"])]
        scope.sort(key=lambda h: (h[cv["order"]], h["importance_raw"]))
        k = pts[5]["removed"]
        got = set(open(os.path.join(out, pts[5]["mask"])).read().splitlines())
        assert got == set(name(h) for h in scope[:k]), (cv["order"], cv["scope"], got)
    # the default order's masks again, as default-SCOPE-PCT.txt
    if cv["order"] == d["default_order"]:
        for p in pts:
            alias = os.path.join(out, "masks", "default-%s-%d.txt" % (cv["scope"], p["pct"]))
            assert open(alias).read() == open(os.path.join(out, p["mask"])).read(), alias
# the ranks follow the default order: rank 1 has its highest score
ranked = sorted(hs, key=lambda h: h["rank"])
assert all(a[best] >= b[best] for a, b in zip(ranked, ranked[1:])), [h[best] for h in ranked]
first = [cv["points"][0]["bleu"] for cv in c["curves"]]
assert len(set(first)) == 1 and first[0] > 0, first
print("ok", d["spearman"], first[0], d["default_order"], " ".join("%s %.2f" % (o, areas[o]) for o in orders))
EOF
)
[[ $check == ok* ]] && ok "heads_json_format_fields_norms_and_masks ($check)" || bad "heads_json_format_fields_norms_and_masks" "$check"

# the printed winner and areas are heads.json's, the winner the largest area
printed=$("$PY" - "$T/h/heads.json" "$T/h.log" <<'EOF' 2>&1
import json, re, sys
d = json.load(open(sys.argv[1]))
log = open(sys.argv[2]).read()
m = re.search(r"^default ranking: (\S+) \(the largest area under the BLEU curve over all heads\); areas [^:]*:(( \S+ -?[0-9.]+)+)$",
              log, re.M)
assert m, "no 'default ranking:' line with areas"
areas = dict(zip(m.group(2).split()[::2], map(float, m.group(2).split()[1::2])))
assert m.group(1) == d["default_order"], (m.group(1), d["default_order"])
assert areas == {k: round(v, 4) for k, v in d["order_areas"].items()}, (areas, d["order_areas"])
assert areas[m.group(1)] == max(areas[o] for o in ("importance", "importance_raw", "delta_nll")), areas
assert re.search(r"^heads ranked by %s, the most important first$" % m.group(1), log, re.M), "the table's order"
print("ok", m.group(1))
EOF
)
[[ $printed == ok* ]] && ok "heads_prints_the_winner_with_the_largest_area ($printed)" || bad "heads_prints_the_winner_with_the_largest_area" "$printed"
# the table: every head once, sorted by the default order's column (importance 5, raw 6,
# dNLL 7), most important first
order=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["default_order"])' "$T/h/heads.json")
col=$(case $order in importance) echo 5 ;; importance_raw) echo 6 ;; *) echo 7 ;; esac)
rows=$(awk '/^rank kind/ {on = 1; next} on && NF == 0 {on = 0} on' "$T/h.log")
sorted=$(awk -v c="$col" '{ if (NR > 1 && $c > last + 1e-9) bad = 1; last = $c } END { print NR, bad + 0 }' <<<"$rows")
[[ $sorted == "24 0" ]] && ok "heads_table_sorted_by_the_default_order ($order)" ||
    bad "heads_table_sorted_by_the_default_order" "$order, rows/unsorted: $sorted; $rows"
grep -qE '^Spearman rank correlation with dNLL over the 24 heads: importance (-?[0-9.]+|undefined)' "$T/h.log" &&
    grep -qE '^timing: scores [0-9.]+ s \(importance, dNLL, roles, AER\); curve [0-9.]+ s \([0-9]+ distinct masks' "$T/h.log" &&
    ok "heads_prints_spearman_and_both_timings" || bad "heads_prints_spearman_and_both_timings" "$(tail -15 "$T/h.log")"

# heads.svg: well-formed, one panel a scope, the three score orders solid and random dashed
svg=$("$PY" - "$T/h/heads.svg" <<'EOF' 2>&1
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
ns = "{http://www.w3.org/2000/svg}"
panels = [g.get("data-scope") for g in root.iter(ns + "g")]
lines = list(root.iter(ns + "polyline"))
dashed = [l.get("class") for l in lines if l.get("stroke-dasharray")]
assert panels == ["all", "encoder_self", "decoder_self", "cross"], panels
assert len(lines) == 16 and dashed == ["random"] * 4, (len(lines), dashed)
print("ok")
EOF
)
[[ $svg == ok ]] && ok "heads_svg_four_panels_solid_and_dashed" || bad "heads_svg_four_panels_solid_and_dashed" "$svg"
grep -q '"format":"qkv-heads-view-1"' "$T/h/index.html" && grep -q '"sentences":\[{"format":"qkv-attention-2"' "$T/h/index.html" &&
    [[ $(grep -o '"format":"qkv-attention-2"' "$T/h/index.html" | wc -l) -eq 8 ]] &&
    ok "heads_view_carries_heads_curve_and_8_sentences" || bad "heads_view_carries_heads_curve_and_8_sentences" \
    "$(grep -o '"format":"[a-z0-9-]*"' "$T/h/index.html" | sort | uniq -c | tr '\n' ' ')"

# ---- the masks, read back by --mask-heads ----------------------------------------------------
# a point of the curve is what eval measures with its mask (the same beam search)
want=$("$PY" -c 'import json, sys
c = json.load(open(sys.argv[1]))["curve"]["curves"]
p = [cv for cv in c if cv["order"] == "importance" and cv["scope"] == "all"][0]["points"][2]
print("%.2f %s" % (p["bleu"], p["mask"]))' "$T/h/heads.json")
got=$("$QKV" eval "$T/run" --src "$D/test.src" --ref "$D/test.tgt" --mask-heads "@$T/h/${want#* }" 2>&1 |
    awk -F' = ' '/^BLEU\|/ {split($2, a, " "); print a[1]}')
[[ -n $got && $got == "${want%% *}" ]] && ok "heads_mask_file_reproduces_the_curve_point (BLEU $got)" ||
    bad "heads_mask_file_reproduces_the_curve_point" "eval with ${want#* }: '$got', heads.json: ${want%% *}"
top=$("$PY" -c 'import json, sys
h = [h for h in json.load(open(sys.argv[1]))["heads"] if h["rank"] == 1][0]
print("%s.%d.%d" % ({"encoder_self": "enc", "decoder_self": "dec", "cross": "cross"}[h["kind"]], h["layer"], h["head"]))' "$T/h/heads.json")
"$QKV" translate "$T/run" --greedy <"$D/test.src" >"$T/plain.txt" 2>/dev/null
"$QKV" translate "$T/run" --greedy --mask-heads "$top" <"$D/test.src" >"$T/masked.txt" 2>"$T/masked.err"
changed=$(paste -d'\t' "$T/plain.txt" "$T/masked.txt" | awk -F'\t' '$1 != $2' | wc -l)
[[ -s $T/masked.txt && $changed -gt 0 ]] && ok "heads_masking_the_top_head_changes_translations ($top: $changed of 40 lines)" ||
    bad "heads_masking_the_top_head_changes_translations" "$top: $changed lines changed; $(cat "$T/masked.err")"

# ---- options and re-exports ---------------------------------------------------------------------
small=(--src "$D/test.src" --ref "$D/test.tgt" --sentences 10 --greedy)
# --out that cannot be a directory is refused before the analysis, not after it
: >"$T/afile"
printed=$(timeout 60 "$QKV" heads "$T/run" "${small[@]}" --out "$T/afile" 2>"$T/afile.err")
rc=$?
if [[ $rc -eq 2 && -z $printed && $(cat "$T/afile.err") == "qkv: --out: $T/afile exists and is not a directory" ]]; then
    ok "heads_out_a_file_refused_before_the_work"
else
    bad "heads_out_a_file_refused_before_the_work" "exit $rc, $(wc -l <<<"$printed") lines out, $(head -c 200 "$T/afile.err")"
fi
# ... and so is a place where no folder can be made (under a file), before the work too
printed=$(timeout 60 "$QKV" heads "$T/run" "${small[@]}" --out "$T/afile/h" 2>"$T/afile.err")
rc=$?
if [[ $rc -eq 2 && -z $printed && $(cat "$T/afile.err") == "qkv: --out: $T/afile exists and is not a directory" && ! -e $T/afile/h ]]; then
    ok "heads_out_that_cannot_be_made_refused_before_the_work"
else
    bad "heads_out_that_cannot_be_made_refused_before_the_work" "exit $rc, $(wc -l <<<"$printed") lines out, $(head -c 200 "$T/afile.err")"
fi
"$QKV" heads "$T/run" "${small[@]}" --seed 1 --out "$T/s1" >/dev/null 2>&1
"$QKV" heads "$T/run" "${small[@]}" --seed 2 --out "$T/s2" >/dev/null 2>&1
seeds=$("$PY" - "$T/s1" "$T/s2" <<'EOF' 2>&1
import json, sys
a, b = (json.load(open(d + "/heads.json")) for d in sys.argv[1:])
masks = lambda d, order: [open(d + "/" + p["mask"]).read() for cv in json.load(open(d + "/heads.json"))["curve"]["curves"]
                          if cv["order"] == order for p in cv["points"]]
assert a["set"]["sentences"] == 10, a["set"]
for order in ("importance", "importance_raw", "delta_nll"):
    assert masks(sys.argv[1], order) == masks(sys.argv[2], order), "the %s order moved with the seed" % order
assert masks(sys.argv[1], "random") != masks(sys.argv[2], "random"), "the random order ignores the seed"
print("ok")
EOF
)
[[ $seeds == ok ]] && ok "heads_seed_moves_only_the_random_order" || bad "heads_seed_moves_only_the_random_order" "$seeds"
# --no-curve into a directory that held a full export: the old curve's files go
"$QKV" heads "$T/run" "${small[@]:0:6}" --no-curve --out "$T/s1" >"$T/nc.log" 2>&1
rc=$?
# and the default falls back to delta_nll, said so
if [[ $rc -eq 0 && -s $T/s1/heads.json && ! -e $T/s1/heads.svg && ! -e $T/s1/masks ]] && grep -q '"curve": null' "$T/s1/heads.json" &&
    grep -q "curve skipped (--no-curve)" "$T/nc.log" && grep -q '"default_order": "delta_nll"' "$T/s1/heads.json" &&
    grep -q '"order_areas": null' "$T/s1/heads.json" && grep -q "^default ranking: delta_nll (no curve measured" "$T/nc.log"; then
    ok "heads_no_curve_replaces_a_full_export"
else
    bad "heads_no_curve_replaces_a_full_export" "exit $rc; $(ls "$T/s1" | tr '\n' ' '); $(tail -2 "$T/nc.log")"
fi
# a file of someone else's in DIR/masks: refused, the old export left whole
echo mine >"$T/s2/masks/notes.md"
expect_error "heads_foreign_file_in_masks_refused" 2 "masks/notes\.md: not a mask file of qkv heads" \
    "$QKV" heads "$T/run" "${small[@]}" --out "$T/s2"
[[ $(ls "$T/s2/masks" | wc -l) -eq 261 && -z $(ls -d "$T"/s2.partial-* 2>/dev/null) ]] && ok "heads_refused_export_leaves_old_files" ||
    bad "heads_refused_export_leaves_old_files" "$(ls "$T/s2/masks" | wc -l) files in masks; $(ls -d "$T"/s2.* 2>/dev/null)"
# two exports into one --out at once, a few times: each publishes whole (the last one's masks/
# stands, never a mix), both succeed, and no staging directory stays behind
race_rcs=""
for round in 1 2 3 4; do
    timeout 120 "$QKV" heads "$T/run" "${small[@]}" --out "$T/race" >"$T/race1.log" 2>&1 &
    p1=$!
    timeout 120 "$QKV" heads "$T/run" "${small[@]}" --out "$T/race" >"$T/race2.log" 2>&1 &
    p2=$!
    wait $p1
    r1=$?
    wait $p2
    race_rcs+="$r1,$? "
done
if [[ $race_rcs == "0,0 0,0 0,0 0,0 " && $(ls "$T/race/masks" | wc -l) -eq 260 && -s $T/race/heads.json &&
    -z $(ls -d "$T"/race.partial-* "$T"/race/masks/.old-* 2>/dev/null) ]]; then
    ok "heads_two_at_once_on_one_out"
else
    bad "heads_two_at_once_on_one_out" "exits $race_rcs; $(ls "$T/race/masks" 2>/dev/null | wc -l) masks; $(ls -d "$T"/race.* 2>/dev/null | tr '\n' ' ') $(tail -n 1 "$T/race1.log" "$T/race2.log" | tr '\n' ' ')"
fi

# ---- bad inputs, one line each ----------------------------------------------------------------------
head -n 5 "$D/test.tgt" >"$T/five.tgt"
head -n 7 "$D/test.align" >"$T/seven.align"
expect_error "heads_missing_ref" 2 "^qkv: --ref is required" "$QKV" heads "$T/run" --src "$D/test.src"
expect_error "heads_missing_src" 2 "^qkv: --src is required" "$QKV" heads "$T/run" --ref "$D/test.tgt"
expect_error "heads_ragged_set" 2 "test\.src has 40 lines, .*five\.tgt 5: a source and its reference must be line-aligned" \
    "$QKV" heads "$T/run" --src "$D/test.src" --ref "$T/five.tgt"
expect_error "heads_ragged_gold" 2 "seven\.align has 7 lines, .*test\.src 40: gold alignments must be line-aligned" \
    "$QKV" heads "$T/run" --src "$D/test.src" --ref "$D/test.tgt" --gold "$T/seven.align"
expect_error "heads_missing_file" 2 "nope\.src: No such file" "$QKV" heads "$T/run" --src "$T/nope.src" --ref "$D/test.tgt"
expect_error "heads_no_run" 2 "nope-run: No such file" "$QKV" heads "$T/nope-run" --src "$D/test.src" --ref "$D/test.tgt"
expect_error "heads_bad_sentences" 2 "^qkv: --sentences: '0' is not a count" "$QKV" heads "$T/run" "${small[@]}" --sentences 0
expect_error "heads_mask_heads_refused" 2 "^qkv: --mask-heads: qkv heads masks heads itself" \
    "$QKV" heads "$T/run" "${small[@]}" --mask-heads cross.0.0
# options taken and ignored would pass for figures of a search nobody ran: refused
expect_error "heads_nbest_refused" 2 "^qkv: --nbest 2: qkv heads scores each sentence's best hypothesis alone" \
    "$QKV" heads "$T/run" "${small[@]}" --beam 3 --nbest 2
expect_error "heads_no_curve_refuses_decoding_options" 2 "^qkv: --beam: qkv heads --no-curve draws no curve" \
    "$QKV" heads "$T/run" "${small[@]:0:6}" --no-curve --beam 3
expect_error "heads_no_curve_refuses_seed" 2 "^qkv: --seed: qkv heads --no-curve draws no curve" \
    "$QKV" heads "$T/run" "${small[@]:0:6}" --seed 7 --no-curve
help=$("$QKV" heads --help)
[[ $? -eq 0 ]] && grep -qE -- "^  --beam " <<<"$help" && ! grep -qE -- "^  --(nbest|mask-heads) " <<<"$help" &&
    ok heads_help_lists_what_it_takes || bad heads_help_lists_what_it_takes "$help"
expect_error "heads_empty_out" 2 "^qkv: --out: an empty directory name" "$QKV" heads "$T/run" "${small[@]}" --out ""
: >"$T/empty-freq.txt"
expect_error "heads_empty_freq_file" 2 "^qkv: $T/empty-freq.txt: --freq: no source token in it to count" \
    "$QKV" heads "$T/run" "${small[@]:0:6}" --no-curve --freq "$T/empty-freq.txt"
expect_error "heads_bad_freq_file" 2 "nope\.txt: No such file" "$QKV" heads "$T/run" "${small[@]}" --freq "$T/nope.txt"

# the page in headless Chromium (tests/heads_view.sh on this run's real index.html): the
# head grid, one cell a head, and clicking a head opens its map in the one viewer
view=$(tests/heads_view.sh "$T/h/index.html" 2>&1)
rc=$?
summary=$(tail -n 1 <<<"$view")
if [[ $rc -eq 0 && $summary =~ ^([0-9]+)\ passed,\ 0\ failed ]] && ((BASH_REMATCH[1] > 0)); then
    ok "heads_page_in_chromium ($summary)"
else
    bad heads_page_in_chromium "exit $rc: $(grep -E '^(FAIL|SKIP)' <<<"$view" | head -n 3 | tr '\n' ' ') $summary"
fi

finish
