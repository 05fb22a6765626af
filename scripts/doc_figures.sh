#!/usr/bin/env bash
# The figures README.md and docs/ quote from `make demo`'s run, computed again from a run:
# one line per figure, "FILE<TAB>TEXT", TEXT as FILE says it (blanks and line breaks aside).
# tests/docs.sh trains the demo in a scratch clone, runs this and checks that every TEXT is in
# its FILE; after a change to what the demo trains, run it on your own `make demo` run and
# write what it prints into the docs.
#
# usage: scripts/doc_figures.sh [RUN]    RUN: the demo's run (runs/toy); data/toy/ beside it,
#        QKV the binary (build/qkv). Run from the repository's folder (or a copy of it).
#        scripts/doc_figures.sh --pictures DIR [RUN]: the pictures of docs/ instead (viewer.png,
#        heads.png, explain.png, report.png, live.png), taken in headless Chromium from RUN
#        and written to DIR (docs/ to renew them); each is the size of the one it replaces.
set -euo pipefail
PICTURES=""
if [[ ${1:-} == --pictures ]]; then
    [[ -n ${2:-} ]] || { echo "usage: scripts/doc_figures.sh --pictures DIR [RUN]" >&2; exit 2; }
    PICTURES=$2
    shift 2
fi
RUN=${1:-runs/toy}
QKV=${QKV:-build/qkv}
D=data/toy
W=$(mktemp -d /tmp/qkv-figures.XXXXXX)
serve_pid="" # the live page's server (--pictures), stopped however the script ends
trap '[[ -z $serve_pid ]] || kill "$serve_pid" 2>/dev/null; rm -rf "$W"' EXIT
# The demo's kernels (scripts/demo.sh): the same bits it trained with, or the user's choice.
if [[ -z ${OPENBLAS_CORETYPE:-} ]] && grep -qw avx2 /proc/cpuinfo 2>/dev/null && grep -qw fma /proc/cpuinfo; then
    export OPENBLAS_CORETYPE=Haswell
fi
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-2} # and its threads, as scripts/demo.sh

fig() { printf '%s\t%s\n' "$1" "$2"; }
# r1 .. r4 X, pct X: X rounded as the docs print it
r2() { awk -v x="$1" 'BEGIN { printf "%.2f", x }'; }
r3() { awk -v x="$1" 'BEGIN { printf "%.3f", x }'; }
r1() { awk -v x="$1" 'BEGIN { printf "%.1f", x }'; }
r4() { awk -v x="$1" 'BEGIN { printf "%.4f", x }'; }
# commas N: 4885 as 4,885
commas() { awk -v n="$1" 'BEGIN { s = ""; while (n >= 1000) { s = sprintf(",%03d", n % 1000) s; n = int(n / 1000) }; printf "%d%s", n, s }'; }
pct() { awk -v x="$1" 'BEGIN { printf "%.0f%%", 100 * x }'; }
q() { "$QKV" "$@" 2>/dev/null; }

# ---- the pictures (--pictures DIR) -------------------------------------------------------
# shot FILE WIDTH HEIGHT URL: the page at URL as Chromium draws it in a window of that size
shot() {
    timeout 120 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run \
        --disable-background-networking --user-data-dir="$W/profile" --window-size="$2,$3" \
        --virtual-time-budget=20000 --screenshot="$1" "$4" >/dev/null 2>&1 && [[ -s $1 ]] ||
        { echo "scripts/doc_figures.sh: no picture of $4" >&2; exit 1; }
}
pictures() {
    browser=$(command -v chromium || command -v chromium-browser || true)
    [[ -n $browser ]] || { echo "scripts/doc_figures.sh: --pictures needs Chromium (apt-get install chromium)" >&2; exit 1; }
    mkdir -p "$PICTURES"
    local text="the old farmer sees a red bird"
    q attention "$RUN" --text "$text" --query 5 --layer 1 --head 1 --out "$W/attn" >/dev/null
    shot "$PICTURES/viewer.png" 1100 500 "file://$W/attn/index.html#kind=cross&layer=1&head=1&view=heatmap&value=weights&query=5"
    q explain "$RUN" --text "$text" --out "$W/explain" >/dev/null
    shot "$PICTURES/explain.png" 1200 800 "file://$W/explain/index.html"
    q heads "$RUN" --src "$D/test.src" --ref "$D/test.tgt" --gold "$D/test.align" --greedy --out "$W/heads" >/dev/null
    shot "$PICTURES/heads.png" 1200 800 "file://$W/heads/index.html"
    q report "$RUN" --out "$W/report.html" >/dev/null
    shot "$PICTURES/report.png" 1200 1000 "file://$W/report.html"
    "$QKV" serve "$RUN" --port 0 2>"$W/serve.err" &
    serve_pid=$!
    local port="" i
    for ((i = 0; i < 100; i++)); do
        [[ -z $port ]] || break
        sleep 0.1
        port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' "$W/serve.err" | head -1)
    done
    [[ -n $port ]] || { echo "scripts/doc_figures.sh: qkv serve did not start: $(cat "$W/serve.err")" >&2; exit 1; }
    shot "$PICTURES/live.png" 1200 760 "http://127.0.0.1:$port/#text=${text// /%20}"
    kill "$serve_pid" && wait "$serve_pid" || true
    serve_pid=""
}
if [[ -n $PICTURES ]]; then
    pictures
    exit 0
fi

# The gradient readings of align run on one thread: started first, beside the rest
gold=(--src "$D/test.src" --tgt "$D/test.tgt" --gold "$D/test.align")
q align "$RUN" "${gold[@]}" --method grad >"$W/grad" &
grad_pid=$!

# ---- the demo's own last lines -----------------------------------------------------------
exact=$(q translate "$RUN" --greedy <"$D/test.src" | paste -d'\t' - "$D/test.tgt" |
    awk -F'\t' '{ n++; if ($1 == $2) c++ } END { printf "exact match: %d of %d held-out sentences (%.1f%%)", c, n, 100 * c / n }')
best=$("$QKV" translate "$RUN" --greedy </dev/null 2>&1 >/dev/null | sed -n 's/.*(best, step \([0-9]*\)).*/\1/p')
fig docs/tutorial.md "$exact"
fig docs/tutorial.md "(best, step $best), greedy search"
fig docs/tutorial.md "lowest validation loss (step $best here)"
fig docs/explain.md "whose best checkpoint is step $best"

# ---- one query taken apart ---------------------------------------------------------------
a=$(q attention "$RUN" --text "the old farmer sees a red bird" --query 5 --layer 1 --head 3 --out "$W/attn")
row() { awk -v k="$1" -v n="$2" '$2 == k && NF == 5 { print $n; exit }' <<<"$a"; }
red_s=$(row red 3) red_w=$(row red 4) red_c=$(row red 5)
bird_s=$(row bird 3) bird_w=$(row bird 4) bird_c=$(row bird 5)
a_w=$(row a 4) a_c=$(row a 5)
while read -r line; do fig docs/attention.md "$line"; done < <(awk '$1 ~ /^[0-9]+$/ && NF == 5' <<<"$a")
fig docs/attention.md "$(grep '^sum of weights' <<<"$a")"
ratio=$(awk -v a="$red_w" -v b="$bird_w" 'BEGIN { printf "%.1f", a / b }')
gap=$(r2 "$(awk -v a="$red_s" -v b="$bird_s" 'BEGIN { print a - b }')")
red_n=$(awk -v c="$red_c" -v w="$red_w" 'BEGIN { print c / w }')
bird_n=$(awk -v c="$bird_c" -v w="$bird_w" 'BEGIN { print c / w }')
sends=$(pct "$(awk -v a="$bird_c" -v b="$red_c" 'BEGIN { print a / b }')")
fig docs/tutorial.md "*red* scores $(r2 "$red_s") and takes $(r3 "$red_w") of the weight; *bird* scores $(r2 "$bird_s") and takes $(r3 "$bird_w"), $ratio times less, which is e^($(r2 "$red_s") - $(r2 "$bird_s"))"
fig docs/tutorial.md "(‖v W_O‖ $(r1 "$bird_n") against *red*'s $(r2 "$red_n")), so it still sends $sends as much as *red*"
fig docs/attention.md "The score of *red* ($(r2 "$red_s"))"
fig docs/attention.md "*red* is $gap above *bird*, and its weight is e^$gap = $ratio times larger ($(r3 "$red_w") against $(r4 "$bird_w"))"
fig docs/attention.md "‖v W_O‖ is $(r2 "$red_n") for *red* ($(r3 "$red_c") / $(r3 "$red_w")) and $(r2 "$bird_n") for *bird* ($(r3 "$bird_c") / $(r4 "$bird_w"))"
fig docs/attention.md "still sends $sends as much"
fig docs/attention.md "($(r3 "$bird_w") against $(r3 "$a_w")) and adds $(awk -v a="$bird_c" -v b="$a_c" 'BEGIN { printf "%.1f", a / b }') times as much ($(r3 "$bird_c") against $(r3 "$a_c"))"

# ---- attention over training -------------------------------------------------------------
w=$(q attention "$RUN" --watch --out "$W/watch")
e0=$(awk '$1 == "0" && NF == 3 { print $2, $3; exit }' <<<"$w")
e500=$(awk '$1 == "500" && NF == 3 { print $2, $3; exit }' <<<"$w")
read -r e0a e0b <<<"$e0"
read -r e5a e5b <<<"$e500"
fig docs/tutorial.md "entropy $(r2 "$e0a") nats at step 0, $(r2 "$e5a") at step 500"
fig docs/attention.md "cross-attention entropy $(r2 "$e0a") and $(r2 "$e0b") nats"
fig docs/attention.md "By step 500 it is $(r2 "$e5a") and $(r2 "$e5b")"

# ---- where a word came from --------------------------------------------------------------
x=$(q explain "$RUN" --text "the old farmer sees a red bird" --out "$W/explain")
for word in lo grano veto ruba vida; do
    fig docs/tutorial.md "$(awk -v k="$word" '$1 == k && NF == 11 { print; exit }' <<<"$x")"
done

# ---- what if -----------------------------------------------------------------------------
plain=$(q whatif "$RUN" --text "a red bird sleeps")
pinned=$(q whatif "$RUN" --text "a red bird sleeps" --pin 1.1.3=0)
p_before=$(awk '$1 == "3" { print $6; exit }' <<<"$plain")
h_before=$(awk '$1 == "3" { print $4; exit }' <<<"$plain")
p_after=$(awk '$1 == "3" { print $7; exit }' <<<"$pinned")
h_after=$(awk '$1 == "3" { print $5; exit }' <<<"$pinned")
others=$(for h in 0 2 3; do q whatif "$RUN" --text "a red bird sleeps" --pin "1.$h.3=0" | awk '$1 == "3" { print $7; exit }'; done | sort -n | head -1)
fig docs/tutorial.md "p(*dorma*) falls from $p_before to $p_after, while the same pin on heads 0, 2 or 3 leaves it at $others or more"
fig docs/whatif.md "drops p(dorma) from $p_before to $p_after and spreads the distribution (entropy $(r2 "$h_before") to $(r2 "$h_after") nats), while the same pin on head 0, 2 or 3 leaves it at $others or more"
masked=$(q whatif "$RUN" --text "a red bird sleeps" --mask-heads "cross.1.*" | sed -n 's/^with 4 heads off: *//p')
fig docs/whatif.md "\"a red bird sleeps\" becomes \"$masked\" instead of \"$(sed -n 's/^translation (greedy): //p' <<<"$plain")\""
fig docs/tutorial.md "the translation becomes \"$(cut -d' ' -f1-9 <<<"$masked") ...\""
lens=$(q whatif "$RUN" --text "a red bird sleeps" --lens | awk '/^logit lens/ { on = 1; next } on && $1 ~ /^[0-9]+$/')
range() { sort -n | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%s-%s", lo, hi }'; }
fig docs/whatif.md "layer 0 predicts almost nothing (p of the right word $(awk '{ print $5 }' <<<"$lens" | range)), layer 1 everything ($(awk '{ print $8 }' <<<"$lens" | range))"

# ---- patching ----------------------------------------------------------------------------
p=$(q patch "$RUN" --clean "a red bird sleeps" --corrupt "some red birds sleep" --compare dorma,dorman --at 3 --out "$W/patch")
clean=$(awk '$1 == "clean" { sub(",", "", $2); print $2; exit }' <<<"$p")
corrupt=$(awk '$1 == "clean" { sub(",", "", $4); print $4; exit }' <<<"$p")
fig docs/whatif.md "verb, $(r2 "$clean") clean, $(r2 "$corrupt") corrupted)"
name() {
    case $1 in
        enc.L*@*) local l=${1#enc.L}; echo "encoder stream after layer ${l%@*}, at \"$2\"" ;;
        cross.L*.H*) local l=${1#cross.L}; echo "cross-attention layer ${l%.H*}, head ${l#*.H}" ;;
        *) echo "$1" ;;
    esac
}
comps=$(awk '/^component/ { on = 1; next } on && NF >= 3 && $2 ~ /^[-+][0-9]/' <<<"$p")
while read -r c e est src; do
    src=${src//[()]/}
    fig docs/whatif.md "| $(name "$c" "$src") | $(r2 "$e") | $(r2 "$est") |"
done < <(head -5 <<<"$comps")
rest=$(tail -n +6 <<<"$comps" | awk '{ v = $2 < 0 ? -$2 : $2; if (v > m) m = v } END { printf "%.2f", m }')
fig docs/whatif.md "| every other component | within ±$rest | |"
h1=$(awk '$1 == "cross.L1.H1" { print $2; exit }' <<<"$comps")
fig docs/whatif.md "(alone it carries $(pct "$(awk -v a="$h1" -v c="$clean" -v d="$corrupt" 'BEGIN { print a / (d - c) }')") of the flip)"
rho=$(sed -n 's/.*Spearman rho \([0-9.-]*\).*/\1/p' <<<"$p")
fig docs/whatif.md "ranks the components as patching does (Spearman $(r2 "$rho"))"
s=$(q patch "$RUN" --clean "a red bird sleeps" --corrupt "the red birds sleeps" --compare dorma,dorman --at 3 --out "$W/patch2")
subj=$(awk '$1 == "clean" { sub(",", "", $4); print $4; exit }' <<<"$s")
fig docs/whatif.md "moves the metric by $(r2 "$(awk -v a="$clean" -v b="$subj" 'BEGIN { print a - b }')") ($(r2 "$clean") to $(r2 "$subj"))"

# ---- alignments --------------------------------------------------------------------------
aer() { awk -v k="$2" 'index($0, k) == 1 { print $NF == "(default)" ? $(NF - 1) : $NF; exit }' <<<"$1"; }
out=$(q align "$RUN" "${gold[@]}" --method output)
off=$(q align "$RUN" "${gold[@]}" --method output --null off)
shift_=$(q align "$RUN" "${gold[@]}" --method shift)
contrib=$(q align "$RUN" "${gold[@]}" --method contrib)
wait "$grad_pid" || { echo "scripts/doc_figures.sh: align --method grad failed" >&2; exit 1; }
grad=$(cat "$W/grad")
bh=$(sed -n 's/^best head: \(layer [0-9]*, head [0-9]*\), AER \([0-9.]*\).*/\1|\2/p' <<<"$out")
fig docs/attention.md "| \`--method output\` (last layer, heads averaged) | $(aer "$out" 'layer 1, average') |"
fig docs/attention.md "| \`--method output\`, best single head (${bh%|*}) | ${bh#*|} |"
fig docs/attention.md "| \`--method shift\` (last layer) | $(aer "$shift_" 'shift.L1') |"
fig docs/attention.md "| default, \`--method contrib\` (the last layer's contributions) | $(aer "$contrib" 'contrib.layer') |"
fig docs/attention.md "| \`--method contrib\`, rollout | $(aer "$contrib" 'contrib.rollout') |"
fig docs/attention.md "| \`--method grad\` (default: saliency) | $(aer "$grad" 'saliency') |"
fig docs/attention.md "| \`--method grad\`, integrated gradients / x-gradient-l2 / x-gradient | $(aer "$grad" 'integrated-gradients') / $(aer "$grad" 'x-gradient-l2') / $(aer "$grad" 'x-gradient ') |"
null=$(sed -n 's/^null: \([0-9]*\) of \([0-9]*\) target words left unaligned.*/\1 of \2/p' <<<"$out")
nullc="${null%% *} of $(commas "${null##* }")"
contrib_off=$(q align "$RUN" "${gold[@]}" --method contrib --null off)
fig docs/attention.md "(\`--null off\`: $(aer "$contrib_off" 'contrib.layer') against the best head's $(sed -n 's/^best head: .*, AER \([0-9.]*\).*/\1/p' <<<"$off"))"
fig docs/attention.md "(on the demo run, $nullc: the toy pair has no unaligned words, and AER moves from $(aer "$off" 'layer 1, average') to $(aer "$out" 'layer 1, average'))"

# ---- faithfulness on the test set --------------------------------------------------------
c=$(q explain "$RUN" --src "$D/test.src" --ref "$D/test.tgt" --gold "$D/test.align" --out "$W/corpus")
meth() { awk -v k="$1" '$1 == k { print; exit }' <<<"$c"; }
erow() { # LABEL KEY: k=1, k=3, AOPC and AER of KEY's row, as the table prints them
    local r
    r=$(meth "$2")
    fig docs/explain.md "| $1 | $(awk '{ print $2 " | " $4 " | " $6 " | " $7 }' <<<"$r") |"
}
erow "leave-one-out" leave-one-out
erow "contributions, rollout" contrib.rollout
erow "x-gradient-l2 (magnitude)" x-gradient-l2
erow "integrated gradients (32 steps)" integrated-gradients
erow "last layer's attention, heads averaged" L1.avg
erow saliency saliency
erow "first layer's attention, heads averaged" L0.avg
erow "x-gradient (signed)" x-gradient
erow "shift-att, last layer" shift.L1
bestl1=$(awk '$1 ~ /^L1\.H/ && $6 > m { m = $6; k = $1 } END { print k }' <<<"$c")
erow "last layer's best single head (H${bestl1#L1.H})" "$bestl1"
r=$(meth contrib.layer)
fig docs/explain.md "| contributions, last layer | $(awk '{ print $2 " | " $4 " | " $6 " | **" $7 "**" }' <<<"$r") |"
fig docs/explain.md "| random orders (10) | | | $(awk '$1 == "random" { print $2 }' <<<"$c") (sd $(sed -n 's/^random.*(sd \([0-9.]*\).*/\1/p' <<<"$c")) | |"
tokens=$(sed -n 's/^[0-9]* sentence pairs, \([0-9]*\) target tokens.*/\1/p' <<<"$c")
fig docs/explain.md "$(commas "$tokens") target words"
fig docs/explain.md "left $nullc words unaligned here"
fig docs/explain.md "faithful by its magnitude ($(r2 "$(awk '{ print $6 }' <<<"$(meth x-gradient-l2)")"), beside saliency) and unfaithful by its sign ($(r2 "$(awk '{ print $6 }' <<<"$(meth x-gradient)")"))"
taus=$(awk '/^Kendall tau, cross-attention vs leave-one-out/ { on = 1; next } on && $1 == "layer" { for (i = 3; i <= NF; i++) print $i } on && $1 == "mean" { exit }' <<<"$c" | sort -g)
fig docs/explain.md "tau between any head and leave-one-out stays low ($(r2 "$(head -1 <<<"$taus")") to $(r2 "$(tail -1 <<<"$taus")"))"
shares=$(sed -n 's/^source share (contributions rolled out), mean over target tokens, after each decoder layer: //p' <<<"$c")
fig docs/explain.md "The source share is $(r2 "${shares% *}") after the first decoder layer and $(r2 "${shares#* }") after the second"

# ---- heads -------------------------------------------------------------------------------
h=$(q heads "$RUN" --src "$D/test.src" --ref "$D/test.tgt" --gold "$D/test.align" --greedy --out "$W/heads")
fig docs/heads.md "$(grep '^default ranking:' <<<"$h")"
fig docs/heads.md "$(grep 'beats random by' <<<"$h" | sed 's/^ *//')"
# the table's rows: rank kind layer head importance raw dNLL conf entropy prev cur next rare sink AER role
rows=$(awk '$1 ~ /^[0-9]+$/ && NF == 16' <<<"$h")
d00=$(awk '$2 == "decoder_self" && $3 == 0 && $4 == 0' <<<"$rows")
by_imp=$(sort -k5,5gr <<<"$rows" | awk '$2 == "decoder_self" && $3 == 0 && $4 == 0 { print NR; exit }')
fig docs/heads.md "decoder self-attention layer 0 head 0, the head whose removal costs most ($(r2 "$(awk '{ print $7 }' <<<"$d00")") nats a token), ranks ${by_imp}th of 24 by importance"
sp=$(sed -n 's/^Spearman rank correlation with dNLL over the 24 heads: importance \([0-9.-]*\), raw score \([0-9.-]*\)/\1 \2/p' <<<"$h")
fig docs/heads.md "(Spearman $(r2 "${sp% *}") normalised, $(r2 "${sp#* }") raw)"
fig docs/heads.md "the largest \`sink\` is $(awk '$14 > m { m = $14 } END { printf "%.2f", m }' <<<"$rows")"
aligns=$(awk '$2 == "cross" && $16 ~ /aligns/' <<<"$rows" | wc -l)
words=(No One Two Three Four Five Six Seven Eight)
fig docs/heads.md "${words[$aligns]} of the eight cross heads align"
# curve SCOPE ORDER: that curve's line (ORDER, 13 points, area); a scope's first line names it
curve() {
    awk -v s="$1" -v o="$2" '/^pruning curve/ { on = 1; next }
        on && NF == 16 { scope = $1; $1 = ""; $0 = $0 }
        on && NF == 15 && scope == s && $1 == o { print; exit }' <<<"$h"
}
at60() { curve all "$1" | awk '{ print $9 }'; }
area() { r1 "$(curve "$1" "$2" | awk '{ print $15 }')"; }
fig docs/heads.md "at 60% removed the delta_nll order keeps $(at60 delta_nll) BLEU, importance $(at60 importance), importance_raw $(at60 importance_raw) and random order $(at60 random)"
named=$(awk '$2 != "cross" && $16 != "-" { k = $2 == "encoder_self" ? "encoder self" : "decoder self"; printf "%s|%d|%d|%s\n", k, $3, $4, $16 }' <<<"$rows" |
    sort -t'|' -k1,1r -k2,2n -k3,3n | awk -F'|' '{ printf "%s%s layer %d head %d `%s`", (NR > 1 ? ", " : ""), $1, $2, $3, $4 }')
fig docs/heads.md "the roles named in the other kinds: $named"
fig docs/heads.md "(cross $(area cross importance), $(area cross importance_raw), $(area cross delta_nll) against random $(area cross random); decoder self $(area decoder_self importance), $(area decoder_self importance_raw), $(area decoder_self delta_nll) against $(area decoder_self random))"

# ---- the report --------------------------------------------------------------------------
fig docs/report.md "\`make demo\`'s report.html is $(awk -v b="$(stat -c %s "$RUN/report.html")" 'BEGIN { printf "%.1f", b / 1e6 }') MB"
