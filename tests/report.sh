#!/usr/bin/env bash
# `qkv report` and the report training keeps: a short toy run, and one with every part
# (watched sentences, BLEU samples, an eval, alignment scores, qkv heads with its curve, a resume) load in
# headless Chromium with no JS errors (screenshots in build/); the page loads nothing
# from the network; its curves hold metrics.jsonl's values exactly; a run with an empty
# or cut metrics.jsonl still gets a page that says what is missing; the status reads
# running, then stopped by the signal, then killed without a word; training goes on
# when the page cannot be written; and strings and pictures from the run's files are
# shown, never run (a page with scripts planted in them runs none in Chromium). Ends with "N passed, N failed, N skipped".
set -u
cd "$(dirname "$0")/.."
source tests/lib.sh
scratch report
bg=""
trap '[[ -n $bg ]] && kill -KILL $bg 2>/dev/null; rm -rf "$T"' EXIT

"$QKV" toy-data "$T/data" --train 1500 --valid 100 --test 60 >/dev/null
D=$T/data
# the short run: no BLEU, no watch, nothing added afterwards
tiny_config "$T/short.yaml" short "$D" 'steps: 60, batch_tokens: 1024, log_every: 20, valid_every: 30, threads: 2'
"$QKV" train "$T/short.yaml" --set run_dir="$T/short" >"$T/short.log" 2>&1 || { echo "set-up failed: $(tail -3 "$T/short.log")"; exit 1; }
# the full run: 100 steps, then eval, heads and a resume to 150
tiny_config "$T/full.yaml" full "$D" 'steps: 100, batch_tokens: 1024, log_every: 10, valid_every: 50, threads: 2, valid_bleu: true, watch: ["the old farmer sees a red bird"]'
{
    "$QKV" train "$T/full.yaml" --set run_dir="$T/full" &&
        "$QKV" eval "$T/full" --src "$D/test.src" --ref "$D/test.tgt" &&
        "$QKV" align "$T/full" --src "$D/test.src" --tgt "$D/test.tgt" --gold "$D/test.align" >"$T/align.txt" &&
        "$QKV" align "$T/full" --src "$D/test.src" --tgt "$D/test.tgt" --gold "$D/test.align" --method output \
            --null off >"$T/align-output.txt" &&
        "$QKV" heads "$T/full" --src "$D/test.src" --ref "$D/test.tgt" --sentences 20 &&
        "$QKV" resume "$T/full" --steps 150
} >"$T/full.log" 2>&1 || { echo "set-up failed: $(tail -3 "$T/full.log")"; exit 1; }

# ---- what training leaves, and qkv report ------------------------------------------------
[[ -s $T/short/report.html && -s $T/full/report.html ]] && ok report_written_by_training ||
    bad report_written_by_training "$(ls "$T/short" "$T/full")"
out=$("$QKV" report "$T/full" 2>&1)
[[ $out =~ ^wrote\ .*/full/report.html\ \(([0-9]+)\ bytes\)\ in\ [0-9.]+\ s$ && ${BASH_REMATCH[1]} -eq $(stat -c %s "$T/full/report.html") ]] &&
    ok report_command_says_what_it_wrote || bad report_command_says_what_it_wrote "$out"
"$QKV" report "$T/full" --out "$T/elsewhere.html" >/dev/null 2>&1 && [[ -s $T/elsewhere.html ]] &&
    ok report_out_option || bad report_out_option "no $T/elsewhere.html"
expect_error report_not_a_run 2 "nope: not a run directory" "$QKV" report "$T/nope"
expect_error report_empty_out 2 "^qkv: --out: an empty file name" "$QKV" report "$T/full" --out ""
# --out is replaced whole by a rename: never a FIFO or a device node, nor one of the files
# the page is made from (anything in the run but its report.html, however it is spelled)
mkfifo "$T/page.fifo" && ln -s /dev/null "$T/null.html" && ln -s "$T/full/config.yaml" "$T/config-link.html" && cp "$T/full/config.yaml" "$T/config.before"
expect_error report_out_refuses_a_fifo 2 "^qkv: $T/page.fifo: a FIFO, not a regular file$" "$QKV" report "$T/full" --out "$T/page.fifo"
expect_error report_out_refuses_a_device 2 "^qkv: $T/null.html: a character device, not a regular file$" "$QKV" report "$T/full" --out "$T/null.html"
expect_error report_out_refuses_the_runs_config 2 "^qkv: $T/full/../full/config.yaml: --out is inside the run $T/full, whose files" \
    "$QKV" report "$T/full" --out "$T/full/../full/config.yaml"
expect_error report_out_refuses_a_checkpoint 2 "^qkv: $T/full/ckpt/best.safetensors: --out is inside the run" \
    "$QKV" report "$T/full" --out "$T/full/ckpt/best.safetensors"
expect_error report_out_refuses_a_link_to_a_run_file 2 "^qkv: $T/config-link.html: --out is inside the run" \
    "$QKV" report "$T/full" --out "$T/config-link.html"
"$QKV" report "$T/full" --out "$T/full/../full/report.html" >/dev/null 2>&1 && [[ -p $T/page.fifo && -L $T/null.html ]] &&
    cmp -s "$T/full/config.yaml" "$T/config.before" && ok report_out_refused_leaves_the_files_alone ||
    bad report_out_refused_leaves_the_files_alone "$(ls -la "$T/page.fifo" "$T/null.html" "$T/full/config.yaml" 2>&1)"
rm -f "$T/page.fifo" "$T/null.html" "$T/config-link.html" "$T/config.before"

# every part of the full run is there; the short run's page names what it lacks
full=$T/full/report.html
missing=$(grep -c 'class="missing"' "$full")
[[ $missing -eq 0 ]] && grep -q '<iframe id="watch"' "$full" && grep -q '<iframe id="headgrid"' "$full" &&
    grep -q '<img alt="the pruning curve (heads/heads.svg)" style="max-width:100%" src="data:image/svg+xml;base64,' "$full" && grep -q '<td class="hyp">' "$full" && grep -q '<b>finished</b>' "$full" &&
    ok report_full_run_has_every_part || bad report_full_run_has_every_part "$missing parts missing: $(grep -o 'class="missing">[^<]*' "$full")"
# the watch data keeps queries and keys for the last of its snapshots alone (they are
# nearly two thirds of a snapshot, and only the Q.K picture reads them)
snaps=$(ls "$T/full/watch" | wc -l)
last_step=$(ls "$T/full/watch" | tail -1 | sed 's/^step-0*\([0-9][0-9]*\)\.json$/\1/')
[[ $(grep -o 'cross_queries' "$full" | wc -l) -eq 1 && $(grep -o 'cross_keys' "$full" | wc -l) -eq 1 &&
    $snaps -ge 3 && $(grep -o 'cross_scores' "$full" | wc -l) -eq $snaps ]] && ok report_watch_keeps_the_last_queries_and_keys ||
    bad report_watch_keeps_the_last_queries_and_keys "$(grep -o 'cross_queries' "$full" | wc -l) queries, $(grep -o 'cross_scores' "$full" | wc -l) scores"
short=$T/short/report.html
grep -q 'No samples' "$short" && grep -q 'No watched sentences' "$short" && grep -q 'No evaluations' "$short" &&
    grep -q 'No head analysis' "$short" && grep -q 'No alignment scores: align.jsonl is missing' "$short" && ok report_short_run_names_what_it_lacks ||
    bad report_short_run_names_what_it_lacks "$(grep -o 'class="missing">[^<]*' "$short")"
# qkv align --gold's tables, each a row of the page: the default reading's scores as the
# command printed them, the best reading's AER the table's lowest, the unaligned words
rows=$("$BOUNDED" "$PY" - "$full" "$T/align.txt" "$T/align-output.txt" <<'PYEOF'
import re, sys
page = open(sys.argv[1], encoding="utf-8").read()
table = page[page.index("<h3>Alignments</h3>"):].split("</table>")[0]
rows = [re.findall(r"<td>(.*?)</td>", r) for r in table.split("<tr>")[2:]]
wrong = [] if len(rows) == 2 else [f"{len(rows)} rows, not 2"]
for row, path, method in zip(rows, sys.argv[2:], ("contrib", "output")):
    printed = [l.split() for l in open(path) if l[:1] != " " and len(l.split()) >= 4]
    scores = {" ".join(p[:-4] if p[-1] == "(default)" else p[:-3]): p[-4:-1] if p[-1] == "(default)" else p[-3:]
              for p in printed[1:] if re.match(r"^[0-9.]+$", (p[-2] if p[-1] == "(default)" else p[-1]))}
    default = next(" ".join(p[:-4]) for p in printed if p[-1] == "(default)")
    best = min(scores, key=lambda k: float(scores[k][2]))
    want = [f"{default} (--method {method})"] + scores[default][:2] + [f"<b>{scores[default][2]}</b>"]
    if row[4:8] != want: wrong.append(f"{method}: {row[4:8]} against {want}")
    if row[9] != f"{best}: {scores[best][2]}": wrong.append(f"{method}: best {row[9]} against {best}")
    null = re.search(r"null: ([0-9]+) of ([0-9]+) target words", open(path).read())
    unaligned = f"{null[1]} of {null[2]}" if method == "contrib" else "none (--null off)"
    if row[8] != unaligned or row[1:4] != ["100", "test.align", "60"]: wrong.append(f"{method}: {row[1:4]} {row[8]}")
print("; ".join(wrong) or "ok")
PYEOF
)
[[ $rows == ok ]] && ok report_shows_the_alignment_scores || bad report_shows_the_alignment_scores "$rows"
# the config's keys that differ from their defaults are marked, and only those
grep -q '^<mark>  d_model: 32</mark>$' "$full" && grep -q '^  heads: 4$' "$full" && grep -q '^<mark>  watch: $' "$full" &&
    grep -q '^  keep_checkpoints: 3$' "$full" && ok report_marks_the_changed_config_keys ||
    bad report_marks_the_changed_config_keys "$(grep -A3 '<pre class="config">' "$full")"
grep -q 'class="resume"' "$full" && grep -q 'resumed at step 100' "$full" && grep -q 'the resume of step 100' "$full" &&
    ok report_marks_the_resume || bad report_marks_the_resume "no resume mark"

# ---- what a run's files say is shown as text: no string of theirs becomes markup or script ----
# payloads in every string the page shows from journal.jsonl, eval.jsonl, align.jsonl and samples.jsonl,
# and a heads.svg with scripts of its own; each one that ran would mark the page
cp -r "$T/full" "$T/evil"
sed -i 's/^  steps: .*/  steps: 100000/' "$T/evil/config.yaml" # not finished: the end line's how is shown
"$BOUNDED" "$PY" - "$T/evil" <<'PYEOF'
import json, sys
d = sys.argv[1]
mark = "document.documentElement.setAttribute('data-pwned', '%s')"
tag = lambda w: f'<img src=x onerror="{mark % w}">'
script = lambda w: f"</script><script>{mark % w}</script><!--"
rows = [json.loads(l) for l in open(d + "/journal.jsonl")]
for o in rows:
    if o.get("event") in ("start", "resume"):
        o["time"], o["data"]["tokenizer"] = tag("time"), tag("tokenizer")
        m = o["machine"]
        m["openblas"], m["cpu"], m["host"], m["openblas_coretype"] = script("openblas"), tag("cpu"), tag("host"), tag("coretype")
rows.append({"event": "end", "step": 1, "how": tag("how"), "signal": 15, "error": script("error")})
open(d + "/journal.jsonl", "w").write("".join(json.dumps(o) + "\n" for o in rows))
for name, keys in (("eval.jsonl", ("weights", "src", "mask_heads")), ("samples.jsonl", ()),
                   ("align.jsonl", ("weights", "gold", "default", "method"))):
    rows = [json.loads(l) for l in open(d + "/" + name)]
    for o in rows:
        for k in keys: o[k] = tag(k)
        for s in o.get("samples", []): s["src"], s["ref"], s["hyp"] = tag("src"), script("ref"), tag("hyp")
        for r in o.get("readings", []): r["name"] = script("reading")
    open(d + "/" + name, "w").write("".join(json.dumps(o) + "\n" for o in rows))
open(d + "/heads/heads.svg", "w").write(
    f'<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10" onload="{mark % "svg-onload"}">'
    f'<script>{mark % "svg-script"}</script><foreignObject><img xmlns="http://www.w3.org/1999/xhtml" src="x" '
    f'onerror="{mark % "svg-img"}"/></foreignObject><rect width="10" height="10"/></svg>')
PYEOF
"$QKV" report "$T/evil" >/dev/null 2>&1
check=$("$BOUNDED" "$PY" - "$T/evil/report.html" "$T/full/report.html" "$T/evil/heads/heads.svg" <<'PYEOF'
import base64, html.parser, sys
class Page(html.parser.HTMLParser):
    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.scripts, self.handlers, self.imgs, self.text = 0, [], [], []
        self.feed(text)
    def handle_starttag(self, t, attrs):
        self.scripts += t == "script"
        self.handlers += [f"<{t} {k}>" for k, _ in attrs if k.startswith("on")]
        if t == "img": self.imgs.append(dict(attrs).get("src", ""))
    def handle_data(self, d): self.text.append(d)
evil, full = Page(open(sys.argv[1], encoding="utf-8").read()), Page(open(sys.argv[2], encoding="utf-8").read())
shown = "".join(evil.text)
svg = open(sys.argv[3], "rb").read()
wrong = []
if evil.scripts != full.scripts: wrong.append(f"{evil.scripts} scripts, not {full.scripts}")
if evil.handlers: wrong.append(f"event handlers {evil.handlers[:3]}")
prefix = "data:image/svg+xml;base64,"
if [s[:len(prefix)] for s in evil.imgs] != [prefix] or base64.b64decode(evil.imgs[0][len(prefix):]) != svg:
    wrong.append(f"images {[s[:40] for s in evil.imgs]}, not heads.svg as one data: URI")
for w in ("time", "tokenizer", "cpu", "host", "coretype", "how", "weights", "src", "mask_heads", "hyp"):
    if f"""setAttribute('data-pwned', '{w}')">""" not in shown: wrong.append(f"{w} not shown as text")
for w in ("openblas", "error", "ref"):
    if f"""<script>document.documentElement.setAttribute('data-pwned', '{w}')</script><!--""" not in shown:
        wrong.append(f"{w} not shown as text")
print("; ".join(wrong) or "ok")
PYEOF
)
[[ $check == ok ]] && ok report_shows_the_run_files_strings_as_text || bad report_shows_the_run_files_strings_as_text "$check"

# nothing from the network: no element, style or frame loads an http(s) address (the SVG
# namespace names are names, not loads); the frames' pages are inside the attribute
for f in "$short" "$full"; do
    hits=$("$BOUNDED" "$PY" - "$f" <<'PYEOF'
import html, re, sys
page = open(sys.argv[1], encoding="utf-8").read()
# the framed pages, unescaped, are checked as pages too
docs = [page] + [html.unescape(m) for m in re.findall(r'srcdoc="([^"]*)"', page)]
bad = []
for d in docs:
    bad += re.findall(r'''(?:src|href|action|poster|data)\s*=\s*["']?\s*(?:https?:)?//[^"' >]*''', d, re.I)
    bad += re.findall(r'url\(\s*["\']?\s*(?:https?:)?//[^)]*\)', d, re.I)
    bad += re.findall(r'@import|<link\b|<base\b', d, re.I)
    bad += re.findall(r'fetch\(\s*["\']https?:', d, re.I)
print(len(docs), len(bad), bad[:3])
PYEOF
)
    [[ $hits =~ ^[0-9]+\ 0\  ]] && ok "report_loads_nothing_from_the_network_$(basename "$(dirname "$f")")" ||
        bad "report_loads_nothing_from_the_network_$(basename "$(dirname "$f")")" "$hits"
done

# the curves' values are metrics.jsonl's, every point of every line
check=$("$BOUNDED" "$PY" - "$full" "$T/full/metrics.jsonl" <<'PYEOF'
import html, json, re, sys
page = open(sys.argv[1], encoding="utf-8").read()
rows = [json.loads(l) for l in open(sys.argv[2])]
keys = {"training loss (label-smoothed)": "loss", "validation loss (NLL)": "valid_loss",
        "validation perplexity": "valid_ppl", "validation BLEU (greedy)": "valid_bleu",
        "learning rate": "lr", "tokens/s": "tokens_per_s"}
seen, wrong = set(), []
for m in re.finditer(r'<polyline [^>]*data-label="([^"]*)" data-steps="([^"]*)" data-values="([^"]*)"', page):
    label, steps, values = html.unescape(m.group(1)), m.group(2).split(), m.group(3).split()
    key = keys[label]
    want = [(r["step"], r[key]) for r in rows if isinstance(r.get(key), (int, float))]
    got = [(float(s), float(v)) for s, v in zip(steps, values)]
    if got != [(float(s), float(v)) for s, v in want]:
        wrong.append(f"{label}: {got[:3]} vs {want[:3]}")
    seen.add(key)
print("ok" if not wrong and seen == set(keys.values()) else f"wrong {wrong} seen {sorted(seen)}")
PYEOF
)
[[ $check == ok ]] && ok report_curves_hold_the_metrics_values || bad report_curves_hold_the_metrics_values "$check"

# ---- a cut or empty metrics.jsonl ---------------------------------------------------------
cp -r "$T/short" "$T/cut"
size=$(stat -c %s "$T/cut/metrics.jsonl")
head -c $((size - 20)) "$T/short/metrics.jsonl" >"$T/cut/metrics.jsonl" # the last line cut mid-way, as a kill leaves it
"$QKV" report "$T/cut" >/dev/null 2>&1 && grep -q '1 line of metrics.jsonl could not be read' "$T/cut/report.html" &&
    grep -q '<polyline' "$T/cut/report.html" && ok report_of_a_cut_metrics_file_says_so ||
    bad report_of_a_cut_metrics_file_says_so "$(grep -o 'class="missing">[^<]*' "$T/cut/report.html")"
: >"$T/cut/metrics.jsonl"
"$QKV" report "$T/cut" >/dev/null 2>&1 && grep -q 'No metrics yet: metrics.jsonl is empty' "$T/cut/report.html" &&
    ok report_of_an_empty_metrics_file_says_so || bad report_of_an_empty_metrics_file_says_so "$(grep -c . "$T/cut/report.html")"
# lines that are no record: said so, not called empty or cut (eval.jsonl too)
echo 'hello world' >"$T/cut/metrics.jsonl" && printf 'hello\n[1]\n' >"$T/cut/eval.jsonl"
"$QKV" report "$T/cut" >/dev/null 2>&1 &&
    grep -q 'No metrics yet: metrics.jsonl holds 1 line and no record qkv wrote' "$T/cut/report.html" &&
    grep -q 'No evaluations: eval.jsonl holds 2 lines and no record qkv wrote' "$T/cut/report.html" &&
    ok report_of_files_of_no_record_says_so ||
    bad report_of_files_of_no_record_says_so "$(grep -o 'class="missing">[^<]*' "$T/cut/report.html")"
rm -f "$T/cut/metrics.jsonl" "$T/cut/journal.jsonl" "$T/cut/eval.jsonl"
"$QKV" report "$T/cut" >/dev/null 2>&1 && grep -q 'No metrics yet: metrics.jsonl is missing' "$T/cut/report.html" &&
    grep -q 'The machine is unknown' "$T/cut/report.html" && ok report_of_a_run_without_metrics_or_journal ||
    bad report_of_a_run_without_metrics_or_journal "$(grep -o 'class="missing">[^<]*' "$T/cut/report.html")"

# ---- something other than a file where a run file goes: said what it is, never waited on -------
cp -r "$T/short" "$T/odd"
rm -f "$T/odd/metrics.jsonl" "$T/odd/journal.jsonl" "$T/odd/samples.jsonl" "$T/odd/eval.jsonl"
mkfifo "$T/odd/metrics.jsonl" "$T/odd/samples.jsonl" "$T/odd/align.jsonl" && ln -s /dev/zero "$T/odd/journal.jsonl" && mkdir "$T/odd/eval.jsonl"
out=$(QKV_TIMEOUT=30 "$QKV" report "$T/odd" 2>&1)
rc=$? page=$T/odd/report.html
[[ $rc -eq 0 ]] && grep -q 'No metrics yet: metrics.jsonl could not be read: a FIFO, not a regular file' "$page" &&
    grep -q 'No samples: samples.jsonl could not be read: a FIFO, not a regular file' "$page" &&
    grep -q 'journal.jsonl could not be read: a character device, not a regular file' "$page" &&
    grep -q 'No evaluations: eval.jsonl could not be read: a directory, not a regular file' "$page" &&
    grep -q 'No alignment scores: align.jsonl could not be read: a FIFO, not a regular file' "$page" &&
    ! grep -q 'is missing' "$page" && ok report_says_what_is_wrong_with_a_run_file_that_is_no_file ||
    bad report_says_what_is_wrong_with_a_run_file_that_is_no_file "exit $rc: $out; $(grep -o 'class="missing">[^<]*' "$page" 2>&1)"
rm -rf "$T/odd"

# ---- a long samples.jsonl: training rewrites it at every validation, so it only grows ---------
cp -r "$T/short" "$T/many"
"$BOUNDED" "$PY" - "$T/many/samples.jsonl" <<'PYEOF'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(20000):
        f.write(json.dumps({"step": 10 * (i + 1), "valid_bleu": 12.5, "samples": [
            {"line": k, "src": "the old farmer sees a red bird", "ref": "le vieux fermier", "hyp": f"le vieux {i}"}
            for k in range(3)]}) + "\n")
PYEOF
t0=$EPOCHREALTIME
"$QKV" report "$T/many" >/dev/null 2>&1
rc=$? took=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')
rows=$(grep -c '<td class="hyp">le vieux' "$T/many/report.html")
# linear in the lines: about 0.6 s here, where comparing each line with every later one took 24 s
[[ $rc -eq 0 && $rows -eq 60000 ]] && awk -v s="$took" 'BEGIN { exit !(s < 5) }' && ok report_of_20000_samples_lines_is_quick ||
    bad report_of_20000_samples_lines_is_quick "exit $rc, $rows rows, $took s (at most 5)"
rm -rf "$T/many"

# ---- each sample's own BLEU beside the validation set's: a translation equal to its reference
# scores 100 whatever the set's BLEU was at that step, and "the the the the" 1.39 (as qkv score
# --sentence gives it, smoothed: no word of it is in the reference)
cp -r "$T/short" "$T/own"
"$BOUNDED" "$PY" - "$T/own/samples.jsonl" <<'PYEOF'
import json, sys
ref = "a man sleeping in a green room on a couch ."
with open(sys.argv[1], "w") as f:
    for step, hyp in ((10, "the the the the"), (20, ref)):
        f.write(json.dumps({"step": step, "valid_bleu": 12.5, "samples": [{"line": 1, "src": "x", "ref": ref, "hyp": hyp}]}) + "\n")
PYEOF
"$QKV" report "$T/own" >/dev/null 2>&1
rows=$(grep -o '<tr><td>[0-9]*</td><td>[0-9.]*</td><td>[0-9.]*</td>' "$T/own/report.html" | tr '\n' ' ')
[[ $rows == '<tr><td>10</td><td>1.39</td><td>12.50</td> <tr><td>20</td><td>100.00</td><td>12.50</td> ' ]] &&
    ok report_samples_show_each_translations_own_bleu || bad report_samples_show_each_translations_own_bleu "rows: $rows"
rm -rf "$T/own"

# ---- status: running while it trains, then stopped by the signal ----------------------------
tiny_config "$T/live.yaml" live "$D" 'steps: 100000, batch_tokens: 1024, log_every: 10, valid_every: 20, threads: 2'
"$BOUNDED" "$QKV_BIN" train "$T/live.yaml" --set run_dir="$T/live" >"$T/live.log" 2>&1 &
bg=$!
if wait_for "$T/live.log" "step 40/" 120; then
    "$QKV" report "$T/live" --out "$T/live-now.html" >/dev/null 2>&1
    grep -q "<b>running</b>" "$T/live-now.html" && grep -q "(process $bg is training it)" "$T/live-now.html" &&
        ok report_of_a_run_in_training_says_running || bad report_of_a_run_in_training_says_running "$(grep -o 'class="status">.*' "$T/live-now.html")"
    grep -q "<b>running</b>" "$T/live/report.html" && ok report_training_writes_says_running ||
        bad report_training_writes_says_running "$(grep -o 'class="status">.*' "$T/live/report.html")"
else
    bad report_of_a_run_in_training_says_running "training did not reach step 40: $(tail -2 "$T/live.log")"
fi
kill -INT $bg
wait $bg
bg=""
grep -q "<b>stopped at step [0-9]*</b>" "$T/live/report.html" && grep -q "the last ended: stopped by signal 2" "$T/live/report.html" &&
    ok report_after_ctrl_c_says_stopped_by_the_signal || bad report_after_ctrl_c_says_stopped_by_the_signal "$(grep -o 'class="status">.*' "$T/live/report.html")"

# ... and a process killed without a word: its journal has no end, and the page says so
"$BOUNDED" "$QKV_BIN" resume "$T/live" --steps 100000 >"$T/live2.log" 2>&1 &
bg=$!
wait_for "$T/live2.log" "valid" 120
kill -KILL $bg
wait $bg 2>/dev/null
bg=""
"$QKV" report "$T/live" >/dev/null 2>&1
grep -q "<b>stopped at step [0-9]*</b>" "$T/live/report.html" &&
    grep -q "the last training process ended without saying how (killed?)" "$T/live/report.html" &&
    ok report_after_sigkill_says_the_process_ended_without_a_word ||
    bad report_after_sigkill_says_the_process_ended_without_a_word "$(grep -o 'class="status">.*' "$T/live/report.html")"

# ---- training goes on when the page cannot be written ---------------------------------------
mkdir -p "$T/blocked/report.html" # a directory where the page goes: no rename can replace it
tiny_config "$T/blocked.yaml" blocked "$D" 'steps: 40, batch_tokens: 1024, log_every: 10, valid_every: 20, threads: 2'
"$QKV" train "$T/blocked.yaml" --set run_dir="$T/blocked" --force >"$T/blocked.log" 2>&1
rc=$?
[[ $rc -eq 0 && -f $T/blocked/ckpt/step-000040.safetensors ]] && grep -q "qkv: warning: .*report.html" "$T/blocked.log" &&
    ok report_unwritable_is_a_warning_and_training_goes_on || bad report_unwritable_is_a_warning_and_training_goes_on "exit $rc: $(tail -3 "$T/blocked.log")"

# ---- both pages in headless Chromium: no JS error, and a screenshot each ---------------------
if [[ -z $browser ]]; then
    skip_missing report_pages_in_a_browser "Chromium is not installed: the report was NOT loaded in a browser"
else
    for run in short full; do
        browser_flags "$T/profile-$run" --virtual-time-budget=10000 --hide-scrollbars --window-size=1300,2400
        shot=${BUILD:-build}/report-$run.png
        browser_shot "file://$T/$run/report.html" "$shot" 1300,2400
        [[ -s $shot && -z $console ]] && ok "report_${run}_run_loads_in_chromium_without_errors" ||
            bad "report_${run}_run_loads_in_chromium_without_errors" "screenshot: $(ls -la "$shot" 2>&1); console: $console"
    done
    # the watch frame on its own: at step 0 the Q.K picture says where its queries and keys
    # are, at the last step it draws them
    "$PY" -c 'import html, re, sys
page = open(sys.argv[1]).read()
open(sys.argv[2], "w").write(html.unescape(re.search(r"<iframe id=\"watch\"[^>]*srcdoc=\"([^\"]*)\"", page).group(1)))' \
        "$full" "$T/watch-frame.html"
qk() {
    browser_dom "file://$T/watch-frame.html#view=qk&kind=cross&head=0&step=$1" "$T/qk-$1.html" "$T/profile-qk-$1"
    cat "$T/qk-$1.html"
}
first=$(qk 0) last=$(qk $((snaps - 1)))
# (the page's own script holds both texts with placeholders: the drawn ones have numbers)
[[ $first == *"keeps the queries and keys of the last step only (step $last_step)"* && $first != *"PCA of all "[0-9]* &&
    $last == *"PCA of all "[0-9]* ]] && ok report_watch_qk_view_at_every_step ||
    bad report_watch_qk_view_at_every_step "last step $last_step; step 0: $(grep -o 'keeps the queries[^<]*\|PCA of all [0-9][^<]*' <<<"$first" | tr '\n' ' '); last step: $(grep -o 'PCA of all [0-9][^<]*' <<<"$last")"
    # the page whose run files carry scripts: none of them runs
    browser_dom "file://$T/evil/report.html" "$T/evil-dom.html" "$T/profile-evil"
    dom=$(cat "$T/evil-dom.html")
    [[ $dom == *'<h2 id="heads">'* && $dom != *'data-pwned="'* ]] && ok report_run_file_scripts_do_not_run_in_chromium ||
        bad report_run_file_scripts_do_not_run_in_chromium "$(grep -o 'data-pwned="[^"]*"' <<<"$dom" | head -3) $(tail -c 300 "$T/evil-dom.html.err")"
    # the charts as Chromium lays them out, glyph by glyph: a run resumed twice 4 steps
    # apart and with 36 short epochs still draws every label inside its chart and clear of
    # the others, and every validation marker whole inside its plot (the last one sits on
    # the last step); the epochs' round stride is tests/test_pictures.c's
    cp -r "$T/full" "$T/crowded"
    "$BOUNDED" "$PY" - "$T/crowded" <<'PYEOF'
import json, sys
d = sys.argv[1]
rows = [json.loads(l) for l in open(d + "/metrics.jsonl")]
for o in rows: o["epoch"] = o["step"] / 4.1
open(d + "/metrics.jsonl", "w").write("".join(json.dumps(o) + "\n" for o in rows))
rows = [json.loads(l) for l in open(d + "/journal.jsonl")]
again = dict(next(o for o in rows if o.get("event") == "resume"), step=104)
open(d + "/journal.jsonl", "w").write("".join(json.dumps(o) + "\n" for o in rows + [again]))
PYEOF
    "$QKV" report "$T/crowded" --out "$T/crowded-measured.html" >/dev/null 2>&1
    cat >>"$T/crowded-measured.html" <<'JSEOF'
<script>
const wrong = [], inside = (b, f) => b.x >= f.x - 0.5 && b.y >= f.y - 0.5 && b.x + b.width <= f.x + f.width + 0.5 &&
  b.y + b.height <= f.y + f.height + 0.5;
for (const svg of document.querySelectorAll("svg.chart")) {
  const name = svg.querySelector("text").textContent, all = { x: 0, y: 0, width: +svg.getAttribute("width"),
    height: +svg.getAttribute("height") }, texts = [...svg.querySelectorAll("text")].map(t => [t.textContent, t.getBBox()]);
  texts.forEach(([t, b], i) => {
    if (!inside(b, all)) wrong.push(`${name}: '${t}' leaves the chart`);
    for (const [u, c] of texts.slice(0, i))
      if (Math.min(b.x + b.width, c.x + c.width) - Math.max(b.x, c.x) > 0.5 &&
          Math.min(b.y + b.height, c.y + c.height) - Math.max(b.y, c.y) > 0.5) wrong.push(`${name}: '${u}' and '${t}' overlap`);
  });
  const frame = svg.querySelector('rect[fill="none"][stroke="#888"]').getBBox();
  for (const c of svg.querySelectorAll("circle")) if (!inside(c.getBBox(), frame)) wrong.push(`${name}: a marker crosses the frame`);
  const e = [...svg.querySelectorAll("text.epoch")].map(t => parseInt(t.textContent.replace("epoch ", ""), 10));
  if (e.length < 5 || e.some((v, i) => i && !(v > e[i - 1]))) wrong.push(`${name}: epoch labels ${e.join(" ")}`);
}
document.body.setAttribute("data-pictures", wrong.length ? wrong.slice(0, 4).join("; ") : "ok");
</script>
JSEOF
    browser_dom "file://$T/crowded-measured.html" "$T/crowded-dom.html" "$T/profile-crowded"
    charts=$(grep -o 'data-pictures="[^"]*"' "$T/crowded-dom.html")
    [[ $charts == 'data-pictures="ok"' ]] && ok report_charts_labels_and_markers_fit_in_chromium ||
        bad report_charts_labels_and_markers_fit_in_chromium "${charts:-no answer: $(tail -c 300 "$T/crowded-dom.html.err")}"
fi

finish
