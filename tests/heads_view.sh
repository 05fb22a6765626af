#!/usr/bin/env bash
# The heads view (format qkv-heads-view-1) of the one viewer page, in headless Chromium: the
# grid of every head, its colours, roles and tooltips, a click on a head opening its map in
# the viewer's panels, the sentence selector. Usage: tests/heads_view.sh [PAGE]
#   PAGE: an index.html that `qkv heads` wrote. Without it, the test builds its own: a short
#   toy run, `qkv attention` maps of three sentences, made-up numbers for every head, put
#   into the viewer page (its parts joined, as the build joins them) at its marker the way
#   attnview_write() does.
# Skipped, loudly, only when Chromium is not installed. Ends with "N passed, N failed, N skipped".
set -u
page=${1:-}
[[ -z $page || $page == /* ]] || page=$PWD/$page
cd "$(dirname "$0")/.."
source tests/lib.sh
scratch heads-view

# embed JSON_FILE OUT: the viewer page with the JSON at its marker, '<' written \u003c (attnview.c)
embed() {
    scripts/join_page.sh src/attention/viewer/page.html >"$T/viewer.html" &&
        "$BOUNDED" "$PY" -c 'import sys
page = open(sys.argv[3], encoding="utf-8").read()
data = open(sys.argv[1], encoding="utf-8").read().strip().replace("<", "\\u003c")
at = page.index("__QKV_DATA__")
open(sys.argv[2], "w", encoding="utf-8").write(page[:at] + data + page[at + len("__QKV_DATA__"):])' "$1" "$2" "$T/viewer.html"
}

if [[ -z $page ]]; then
    sentences=("the old farmer sees a red bird" "the cat sleeps" "a small dog eats the green apple")
    "$QKV" toy-data "$T/data" --train 1500 --valid 50 --test 50 >/dev/null &&
        "$QKV" train configs/toy.yaml --set run_dir="$T/run" --set train.steps=200 --set model.d_model=32 --set train.watch= \
            --set data.train.src="$T/data/train.src" --set data.train.tgt="$T/data/train.tgt" \
            --set data.valid.src="$T/data/valid.src" --set data.valid.tgt="$T/data/valid.tgt" >"$T/train.log" 2>&1 ||
        { echo "set-up failed: $(tail -3 "$T/train.log")"; exit 1; }
    for i in "${!sentences[@]}"; do
        "$QKV" attention "$T/run" --text "${sentences[$i]}" --out "$T/maps$i" >"$T/attn$i.log" 2>&1 ||
            { echo "set-up failed: $(tail -2 "$T/attn$i.log")"; exit 1; }
    done
    # made-up numbers for every (kind, layer, head) of the model; the roles include an empty
    # one, one longer than a line of its cell and one of three roles joined by '+' (each must
    # show whole); a '<' in a role tests the escaping. The encoder's
    # positional shares are an object {prev, self, next}, the decoder's the fields previous,
    # current, next, with a list of roles: the page reads both.
    "$BOUNDED" "$PY" -c 'import json, sys, random
maps = [json.load(open(f, encoding="utf-8")) for f in sys.argv[1:]]
m, rnd, heads = maps[0], random.Random(7), []
roles = {"encoder_self": ["previous", "current", "next", "rare", ""], "decoder_self": ["previous", "current", "<eos>-sink", ""],
         "cross": ["aligns", "rare", "aligns", ""]}
for kind in ["encoder_self", "decoder_self", "cross"]:
    for layer in range(len(m[kind])):
        for head in range(m["heads"]):
            raw = rnd.uniform(0.0005, 0.02)
            pos = {k: round(rnd.random() / 2, 4) for k in ["prev", "self", "next"]} if kind != "cross" else None
            h = {"kind": kind, "layer": layer, "head": head, "importance_raw": raw, "delta_nll": round(raw * 3.1, 5),
                 "confidence": round(rnd.random(), 4), "entropy": round(rnd.uniform(0.1, 2.0), 4), "positional": pos,
                 "rare": round(rnd.random(), 4), "aer": round(rnd.random(), 4) if kind == "cross" else None,
                 "role": rnd.choice(roles[kind])}
            if kind == "decoder_self":
                del h["positional"]
                h.update(previous=pos["prev"], current=pos["self"], next=pos["next"], roles=[r for r, k in [("previous", "prev"), ("next", "next")] if pos[k] > 0.25])
            heads.append(h)
heads[0]["role"] = "rel:current+top:previous+sink"
heads[1]["role"] = "rel:previous+rel:rare-and-more-than-a-line"
top = max(h["importance_raw"] for h in heads)
for rank, h in enumerate(sorted(heads, key=lambda h: -h["importance_raw"]), 1):
    h["importance"], h["rank"] = round(h["importance_raw"] / top, 4), rank
for k, h in enumerate(heads): # the sink share and the roles by rule of qkv-heads-1, on every other head
    if k % 2:
        h["sink"] = round(rnd.random(), 4)
        h["roles_by_rule"] = {"voita": h.get("roles", []), "relative": ["top:previous"] if k % 4 == 1 else [],
                              "clark": ["sink"] if h["sink"] >= 0.6 else []}
        h["roles"] = [r for rule in h["roles_by_rule"].values() for r in rule]
# ranked and coloured by the raw score, as when qkv heads measures that order best
print(json.dumps({"format": "qkv-heads-view-1", "default_order": "importance_raw", "heads": heads, "sentences": maps},
                 ensure_ascii=False, separators=(",", ":")))' \
        "$T"/maps{0,1,2}/maps.json >"$T/heads.json" && embed "$T/heads.json" "$T/index.html" ||
        { echo "set-up failed: no sample heads view"; exit 1; }
    page=$T/index.html
fi

[[ -s $page ]] && grep -q '"format": *"qkv-heads-view-1"' "$page" && ! grep -q '__QKV_DATA__' "$page" &&
    ok "heads_view_page_holds_the_format" || bad "heads_view_page_holds_the_format" "$page: no qkv-heads-view-1 data at the marker"
if grep -qiE '(src|href)=["'"'"']?(https?:)?//' "$page" || grep -q '<link' "$page"; then
    bad "heads_view_needs_no_network" "$page refers to something outside itself"
else
    ok "heads_view_needs_no_network"
fi

if [[ -z $browser ]]; then
    skip_missing browser "Chromium is not installed: the heads view was NOT tested in a browser"
    finish
    exit
fi
browser_flags "$T/profile"

selftest "$page"
if has '"ok":true' && has '"errors":[]' && has '"heads":{' && [[ -z $console ]]; then
    ok "browser_heads_view_every_control_changes_the_picture_no_errors"
else
    bad "browser_heads_view_every_control_changes_the_picture_no_errors" "result: ${result:-none}; console: $console"
fi
cells=$(grep -o '"cells":[0-9]*,"modelHeads":[0-9]*' <<<"$result")
has '"oneCellPerHead":true' && ok "browser_heads_grid_one_cell_per_head (${cells:-?})" ||
    bad "browser_heads_grid_one_cell_per_head" "${result:-none}"
has '"colouredByImportance":true' && has '"labelledWithRole":true' && has '"gridAboveMaps":true' &&
    ok "browser_heads_grid_coloured_by_importance_labelled_by_role_above_the_maps" ||
    bad "browser_heads_grid_coloured_by_importance_labelled_by_role_above_the_maps" "${result:-none}"
has '"colouredByDefaultOrder":true' && ok "browser_heads_grid_scored_and_ranked_by_the_default_order" ||
    bad "browser_heads_grid_scored_and_ranked_by_the_default_order" "${result:-none}"
has '"tooltip":true' && ok "browser_heads_tooltip_gives_the_numbers" || bad "browser_heads_tooltip_gives_the_numbers" "${result:-none}"
has '"opensOnTopHead":true' && has '"clickOpensHead":true' && has '"clickAnotherHead":true' &&
    ok "browser_heads_click_selects_the_head_and_the_map_panel_shows_it" ||
    bad "browser_heads_click_selects_the_head_and_the_map_panel_shows_it" "${result:-none}"
if has '"sentenceSwitch":null'; then
    skip "browser_heads_sentence_switch" "the page holds one sentence"
else
    has '"sentenceSwitch":true' && has '"clickAfterSwitch":true' && ok "browser_heads_sentence_switch_keeps_the_head" ||
        bad "browser_heads_sentence_switch_keeps_the_head" "${result:-none}"
fi

# the check can fail: the same page with one head left out of "heads" must not pass
"$BOUNDED" "$PY" -c 'import sys, json
page = open(sys.argv[1], encoding="utf-8").read()
start = page.index(">", page.index("<script id=\"attn-data\"")) + 1
end = page.index("</script>", start)
data = json.loads(page[start:end])
data["heads"].pop()
data = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")
open(sys.argv[2], "w", encoding="utf-8").write(page[:start] + data + page[end:])' "$page" "$T/short.html" 2>"$T/short.err"
selftest "$T/short.html"
has '"ok":false' && has '"oneCellPerHead":false' && ok "browser_heads_selftest_fails_without_a_head" ||
    bad "browser_heads_selftest_fails_without_a_head" "result: ${result:-none}; $(head -2 "$T/short.err")"

# a picture of the page, opened on a chosen head, beside the qkv that drew it
shot=$(dirname "${QKV_BIN:-$QKV}")/heads-view.png
browser_shot "file://$page#kind=cross&layer=1&head=2&view=heatmap&query=2&sentence=0" "$shot" 1300,1200
[[ -s $shot && $(stat -c %s "$shot") -gt 10000 ]] && ok "browser_heads_screenshot ($shot)" || bad "browser_heads_screenshot" "$shot"

finish
