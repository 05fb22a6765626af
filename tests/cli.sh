#!/usr/bin/env bash
# Command-line tests: exit codes and one-line errors for bad input, the toy generator,
# an end-to-end run. (The learning test is tests/readme.sh's: make demo's run.) Ends with
# "N passed, N failed, N skipped".
set -u
cd "$(dirname "$0")/.."
source tests/lib.sh
scratch cli

# ---- the toy generator ------------------------------------------------------------------
"$QKV" toy-data "$T/toy" --train 2000 --valid 200 --test 200 >/dev/null
"$QKV" toy-data "$T/toy2" --train 2000 --valid 200 --test 200 >/dev/null
if cmp -s "$T/toy/train.src" "$T/toy2/train.src" && cmp -s "$T/toy/test.align" "$T/toy2/test.align"; then
    ok "toy_data_is_deterministic"
else
    bad "toy_data_is_deterministic" "two runs with the same seed differ"
fi
# every target word has one gold link to a source word in range; lengths 3-20
problems=$(paste -d'\t' "$T/toy/train.src" "$T/toy/train.tgt" "$T/toy/train.align" | awk -F'\t' '{
    ns = split($1, s, " "); nt = split($2, t, " "); na = split($3, a, " ");
    if (ns < 3 || ns > 20) print "length " ns;
    if (na != nt) print "line " NR ": " na " links for " nt " target words";
    for (k = 1; k <= na; k++) { split(a[k], p, "-"); if (p[1] >= ns || p[2] >= nt || p[2] != k - 1) print "line " NR ": bad link " a[k]; }
}' | head -3)
[[ -z $problems ]] && ok "toy_data_alignments_cover_every_target_word" || bad "toy_data_alignments_cover_every_target_word" "$problems"
# each gold link joins a word and its translation, in both tasks that have gold worth the name:
# determiners, "and" and prepositions by their forms; every other source word always to one
# target stem (agreement endings off); a determiner's number is its noun's (the next word's)
"$QKV" toy-data "$T/particles" --task particles --train 2000 --valid 10 --test 10 >/dev/null
gold_lexicon() { # DIR -> the first three links that are not translations, or nothing
    paste -d'\t' "$1/train.src" "$1/train.tgt" "$1/train.align" | awk -F'\t' '
    BEGIN { split("the lo la los las a un una an un una some unos unas and e near apud under sub with kun behind post", f, " ")
        for (k = 1; k <= 27; k++) if (f[k] ~ /^(the|a|an|some|and|near|under|with|behind)$/) w = f[k]; else form[w, f[k]] = 1 }
    { ns = split($1, s, " "); nt = split($2, t, " "); na = split($3, a, " ")
      for (k = 1; k <= na; k++) { split(a[k], p, "-"); sw = s[p[1] + 1]; tw = t[p[2] + 1]
        if (sw ~ /^(the|a|an|some|and|near|under|with|behind)$/) { if (!((sw, tw) in form)) print NR ": " sw " -> " tw; continue }
        stem = tw; sub(/(os|as|an|es|o|a|s)$/, "", stem)
        if (sw in stems && stems[sw] != stem) print NR ": " sw " -> " tw ", elsewhere " stems[sw]; stems[sw] = stem }
      for (j = 1; j < nt; j++) if (t[j] ~ /^(lo|la|un|una)$/ && t[j + 1] ~ /s$/ || t[j] ~ /^(los|las|unos|unas)$/ && t[j + 1] !~ /s$/)
        print NR ": " t[j] " " t[j + 1] }' | head -3
}
wrong="$(gold_lexicon "$T/toy")$(gold_lexicon "$T/particles")"
[[ -z $wrong ]] && ok "toy_data_gold_links_translations" || bad "toy_data_gold_links_translations" "$wrong"
# reordering really happens: some links cross
if awk '{for(k=1;k<=NF;k++){split($k,p,"-"); if(p[1]<last) x=1; last=p[1]} last=-1} END{exit !x}' "$T/toy/train.align"; then
    ok "toy_data_reorders_words"
else
    bad "toy_data_reorders_words" "no crossing alignment links"
fi
if cmp -s "$T/toy/train.src" "$T/toy/train.tgt"; then bad "toy_data_translates" "target equals source"; else ok "toy_data_translates"; fi
for task in copy reverse; do "$QKV" toy-data "$T/$task" --task $task --train 3000 --valid 100 --test 100 >/dev/null; done
if [[ $(head -1 "$T/reverse/test.src" | awk '{for(i=NF;i>0;i--) printf "%s%s", $i, (i>1?" ":"\n")}') == $(head -1 "$T/reverse/test.tgt") ]]; then
    ok "toy_data_reverse_task"
else
    bad "toy_data_reverse_task" "target is not the reversed source"
fi
expect_error "toy_data_unknown_task" 2 "^qkv: unknown toy task 'sideways'" "$QKV" toy-data "$T/x" --task sideways
expect_error "toy_data_bad_seed_names_it" 2 "^qkv: --seed: '-1' is not a seed from 0 to 10000000$" "$QKV" toy-data "$T/x" --seed -1
expect_error "toy_data_bad_count_names_it" 2 "^qkv: --valid: 'x' is not a count from 0 to 10000000$" "$QKV" toy-data "$T/x" --valid x

# ---- commands and configs ------------------------------------------------------------------
expect_error "unknown_command" 2 "^qkv: 'trian' is not a command; see 'qkv --help'" "$QKV" trian
# no command is a usage error: the list goes to stderr, like every error, and stdout stays empty
out=$(timeout 10 "$QKV" 2>"$T/usage.err")
rc=$?
if [[ $rc -eq 2 && -z $out ]] && head -1 "$T/usage.err" | grep -q "^usage: qkv COMMAND" && grep -q "^  translate " "$T/usage.err"; then
    ok "no_command_lists_the_commands_on_stderr"
else
    bad "no_command_lists_the_commands_on_stderr" "exit $rc, stdout '${out:0:60}', stderr '$(head -c 60 "$T/usage.err")'"
fi
expect_error "config_missing_file" 2 "^qkv: $T/none.yaml: No such file" "$QKV" train "$T/none.yaml"

base="data:
  train: {src: $T/toy/train.src, tgt: $T/toy/train.tgt}
  valid: {src: $T/toy/valid.src, tgt: $T/toy/valid.tgt}"
printf '%s\nmodel:\n  d_modle: 64\n' "$base" >"$T/c1.yaml"
expect_error "config_unknown_key" 2 "^qkv: $T/c1.yaml:5:3: unknown key 'model.d_modle' \(did you mean 'model.d_model'\?\)$" "$QKV" train "$T/c1.yaml"
printf '%s\ntrain:\n  steps: ten\n' "$base" >"$T/c2.yaml"
expect_error "config_wrong_type" 2 "^qkv: $T/c2.yaml:5:10: train.steps: expected an integer, got 'ten'$" "$QKV" train "$T/c2.yaml"
printf '%s\nmodel:\n  d_model: 30\n  heads: 4\n' "$base" >"$T/c3.yaml"
expect_error "config_d_model_not_divisible" 2 "^qkv: $T/c3.yaml:5:12: model.d_model \(30\) must be divisible by model.heads \(4\)$" "$QKV" train "$T/c3.yaml"
printf '%s\nmodel:\n  dropout: 1\n' "$base" >"$T/c4.yaml"
expect_error "config_dropout_range" 2 "^qkv: $T/c4.yaml:5:12: model.dropout: 1 is out of range \[0, 1\)$" "$QKV" train "$T/c4.yaml"
printf '%s\nmodel:\n  encoder_layers: 0\n' "$base" >"$T/c5.yaml"
expect_error "config_non_positive_size" 2 "^qkv: $T/c5.yaml:5:19: model.encoder_layers: 0 is out of range" "$QKV" train "$T/c5.yaml"
printf 'data:\n  train: {src: %s/nope.src, tgt: %s/toy/train.tgt}\n' "$T" "$T" >"$T/c6.yaml"
expect_error "config_missing_data_file" 2 "^qkv: $T/c6.yaml:2:16: data.train.src: '$T/nope.src': No such file or directory$" "$QKV" train "$T/c6.yaml"
printf 'model:\n  d_model: 64\n' >"$T/c7.yaml"
expect_error "config_missing_data_path" 2 "^qkv: $T/c7.yaml: data.train.src is required$" "$QKV" train "$T/c7.yaml"
printf '%s\nmodel: {d_model: 64\n' "$base" >"$T/c8.yaml"
expect_error "config_yaml_syntax_error" 2 "^qkv: $T/c8.yaml:[0-9]+:[0-9]+: YAML syntax error: " "$QKV" train "$T/c8.yaml"
printf '%s\n' "$base" >"$T/ok.yaml"
expect_error "config_set_unknown_key" 2 "^qkv: --set train.stepz=5: unknown key 'train.stepz' \(did you mean 'train.steps'\?\)$" "$QKV" train "$T/ok.yaml" --set train.stepz=5
expect_error "config_set_bad_value" 2 "^qkv: --set model.dropout=-1: model.dropout: -1 is out of range" "$QKV" train "$T/ok.yaml" --set model.dropout=-1

# ---- corpora -------------------------------------------------------------------------------
head -n 50 "$T/toy/train.src" >"$T/r.src"
head -n 49 "$T/toy/train.tgt" >"$T/r.tgt"
printf 'data:\n  train: {src: %s, tgt: %s}\nrun_dir: %s\n' "$T/r.src" "$T/r.tgt" "$T/ragged" >"$T/ragged.yaml"
expect_error "corpus_ragged" 2 "^qkv: $T/r.src has 50 lines but $T/r.tgt has 49: parallel files must be line-aligned$" "$QKV" train "$T/ragged.yaml"
printf 'data:\n  train: {src: %s, tgt: %s}\nrun_dir: %s\n' "$T/empty.src" "$T/empty.tgt" "$T/empty" >"$T/empty.yaml"
: >"$T/empty.src"
: >"$T/empty.tgt"
expect_error "corpus_empty" 2 "^qkv: $T/empty.src: no usable sentence pairs" "$QKV" train "$T/empty.yaml"
# files that are not files: refused at once, never read or waited on (a FIFO has no writer)
mkfifo "$T/fifo"
expect_error "fifo_is_not_a_corpus" 2 "fifo: a FIFO, not a regular file" timeout 10 "$QKV" score "$T/fifo" "$T/empty.src"
expect_error "device_is_not_a_checkpoint" 2 "^qkv: /dev/zero: a character device, not a regular file$" timeout 10 "$QKV" info /dev/zero
# curves from extreme or missing numbers: drawn in bounded time and size
mkdir -p "$T/plot"
plot_ok=1
for v in 1.7e308 1e-320 1e-13; do
    printf '{"step": 10, "loss": %s}\n{"step": 20, "loss": %s, "valid_loss": null}\n' $v $v >"$T/plot/metrics.jsonl"
    timeout 10 "$QKV" plot "$T/plot" >/dev/null 2>&1 && (($(stat -c %s "$T/plot/curves.svg") < 100000)) || plot_ok=0
done
((plot_ok)) && ok "plot_bounded_for_extreme_values" || bad "plot_bounded_for_extreme_values" "a plot failed, hung or grew past 100 kB"
# the error contract: one line, "qkv: ...", exit 2
expect_error "getopt_error_reads_qkv" 2 "^qkv: train: unrecognized option '--bogus'$" "$QKV" train --bogus
# every command answers --help (and qkv help CMD, the same text) with its usage, its
# options and an example, exit 0; each option the help names is one its parser takes
cmds=$("$QKV" help | awk '/^  [a-z]/ {print $1}')
n_cmds=0 help_bad=""
for c in $cmds; do
    n_cmds=$((n_cmds + 1))
    h=$("$QKV" "$c" --help 2>&1) rc=$?
    [[ $rc -eq 0 && $h == "usage: qkv $c "* && $h == *$'\nexample:\n  qkv '"$c"* ]] || { help_bad+="$c --help (exit $rc); "; continue; }
    [[ $("$QKV" help "$c" 2>&1) == "$h" ]] || help_bad+="qkv help $c differs; "
    # "  --beam K   what it does": the option, and a value when the help names one (a
    # name in capitals, or a choice of lower-case words: "--null on|off"); no operand,
    # so the parser reads the option and stops at the usage, doing nothing
    while read -r o v; do
        e=$("$QKV" "$c" "$o" ${v:+1} 2>&1 >/dev/null </dev/null)
        [[ $e == *"unrecognized option"* || $e == *"requires an argument"* || $e == *"doesn't allow"* ]] &&
            help_bad+="$c $o: $e; "
    done < <(grep -oE '^  --[a-z-]+( [A-Z][A-Z0-9.=|_]*| [a-z]+(\|[a-z]+)+)?' <<<"$h")
done
[[ $n_cmds -ge 14 && -z $help_bad ]] && ok every_command_answers_help || bad every_command_answers_help "$n_cmds commands; $help_bad"
expect_error "unknown_command_help" 2 "^qkv: 'bogus' is not a command; see 'qkv help'$" "$QKV" help bogus
expect_error "usage_points_at_help" 2 "^usage: qkv translate RUN_DIR\|WEIGHTS .*\(qkv translate --help lists the options\)$" "$QKV" translate
expect_error "name_dot_dot_refused" 2 "name: must be a plain directory name" "$QKV" train "$T/ok.yaml" --set name=.. --set run_dir=
sets=(); for _ in $(seq 65); do sets+=(--set seed=1); done
expect_error "too_many_sets_said" 2 "^qkv: --set: more than 64 overrides" "$QKV" train "$T/ok.yaml" "${sets[@]}"
truncate -s 2M "$T/huge.yaml"
expect_error "oversized_config_refused_unread" 2 "huge.yaml: 2097152 bytes, more than the 1048576 this file may hold" timeout 10 "$QKV" train "$T/huge.yaml"
expect_error "directory_is_not_a_reference" 2 "toy: a directory, not a regular file" timeout 10 "$QKV" score "$T/empty.src" "$T/toy"

# ---- an end-to-end run on the copy task: files, metrics, translation of odd input ----------
# the copy task's files, as every run below on it names them
copy_data=(--set data.train.src="$T/copy/train.src" --set data.train.tgt="$T/copy/train.tgt"
    --set data.valid.src="$T/copy/valid.src" --set data.valid.tgt="$T/copy/valid.tgt")
run="$T/copyrun"
"$QKV" train configs/toy.yaml "${copy_data[@]}" --set run_dir="$run" \
    --set train.steps=60 --set train.log_every=20 --set train.valid_every=30 >"$T/copy.log" 2>&1
rc=$?
if [[ $rc -eq 0 && -f $run/config.yaml && -f $run/src.vocab && -f $run/tgt.vocab && -f $run/ckpt/step-000060.safetensors &&
    -f $run/ckpt/best.safetensors && -z $(find "$run" -name '*.tmp') ]]; then
    ok "train_writes_run_directory"
else
    bad "train_writes_run_directory" "exit $rc; $(tail -3 "$T/copy.log")"
fi
if [[ $(awk '{printf "%s ", $2}' "$run/metrics.jsonl") == "20, 30, 40, 60, " ]] &&
    awk '!/"step": [0-9]+, "loss": [0-9.]+, "lr": [0-9.e+-]+, "tokens_per_s": [0-9.]+, "elapsed_s": [0-9.]+/{bad=1} END{exit bad}' "$run/metrics.jsonl" &&
    [[ $(grep -c '"valid_loss"' "$run/metrics.jsonl") -eq 2 ]]; then
    ok "train_metrics_jsonl"
else
    bad "train_metrics_jsonl" "$(cat "$run/metrics.jsonl")"
fi
if grep -q '<polyline' "$run/curves.svg" && grep -q 'validation loss' "$run/curves.svg" && "$QKV" plot "$run" >/dev/null; then
    ok "train_draws_curves_svg"
else
    bad "train_draws_curves_svg" "no curves.svg with both curves"
fi
expect_error "plot_without_metrics" 2 "^qkv: $T/nowhere/metrics.jsonl: No such file" "$QKV" plot "$T/nowhere"
# a file of nothing but bad lines is damaged, not empty: its first bad line is named
mkdir -p "$T/badplot" && printf '\n{"step": 100, "loss": "x"}\n[1, 2]\n' >"$T/badplot/metrics.jsonl"
expect_error "plot_damaged_metrics_names_the_line" 2 "^qkv: $T/badplot/metrics.jsonl:2: not a metrics record" \
    timeout 10 "$QKV" plot "$T/badplot"
mkdir -p "$T/emptyplot" && : >"$T/emptyplot/metrics.jsonl"
expect_error "plot_empty_metrics_is_no_metrics_yet" 2 "^qkv: $T/emptyplot/metrics.jsonl: no metrics to plot yet$" \
    timeout 10 "$QKV" plot "$T/emptyplot"
if grep -q 'steps: 60' "$run/config.yaml" && grep -q 'd_model: 64' "$run/config.yaml" && grep -q 'warmup: 400' "$run/config.yaml"; then
    ok "train_writes_resolved_config"
else
    bad "train_writes_resolved_config" "overrides or defaults missing from $run/config.yaml"
fi
expect_error "train_refuses_existing_run" 2 "^qkv: $run: already holds a run; resume it with" "$QKV" train configs/toy.yaml --set run_dir="$run" \
    "${copy_data[@]}"
# a directory that holds no run but files of a run's names (someone's metrics.jsonl, a
# report.html of their own, run_dir: . in a project): refused, nothing touched, no lock
# left; --force writes there
mkdir -p "$T/theirs" && echo precious >"$T/theirs/metrics.jsonl" && echo mine >"$T/theirs/notes.txt"
expect_error "train_refuses_someones_files" 2 "^qkv: $T/theirs: holds metrics.jsonl and no run: a new run would write over it; pass --force" \
    timeout 60 "$QKV" train configs/toy.yaml --set run_dir="$T/theirs" --set train.steps=2 "${copy_data[@]}"
[[ $(cat "$T/theirs/metrics.jsonl") == precious && $(ls "$T/theirs" | tr '\n' ' ') == "metrics.jsonl notes.txt " ]] &&
    ok train_refused_leaves_someones_files_as_they_were ||
    bad train_refused_leaves_someones_files_as_they_were "$(ls -A "$T/theirs"; cat "$T/theirs/metrics.jsonl")"
if timeout 60 "$QKV" train configs/toy.yaml --set run_dir="$T/theirs" --set train.steps=2 --set train.valid_every=2 \
    --set train.checkpoint_every=2 "${copy_data[@]}" --force >/dev/null 2>&1 &&
    [[ -f $T/theirs/ckpt/step-000002.safetensors && $(cat "$T/theirs/notes.txt") == mine ]]; then
    ok train_force_writes_there
else
    bad train_force_writes_there "$(ls -A "$T/theirs")"
fi
# --force starts the run over: the old run's journal, evaluations, report and head analysis
# go with its checkpoints (they would be read as the new model's); files of other names stay
mkdir -p "$T/theirs/heads/masks" && echo '{}' >"$T/theirs/heads/heads.json" && echo x >"$T/theirs/heads/masks/default-all-0.txt"
echo '{"bleu": 99}' >"$T/theirs/eval.jsonl" && echo old >"$T/theirs/samples.jsonl"
if timeout 60 "$QKV" train configs/toy.yaml --set run_dir="$T/theirs" --set train.steps=2 --set train.valid_every=2 \
    --set train.checkpoint_every=2 "${copy_data[@]}" --force >/dev/null 2>&1 &&
    [[ ! -e $T/theirs/heads && ! -e $T/theirs/eval.jsonl && ! -e $T/theirs/samples.jsonl &&
        $(grep -c '"event": "start"' "$T/theirs/journal.jsonl") -eq 1 && $(cat "$T/theirs/notes.txt") == mine ]]; then
    ok train_force_starts_the_runs_history_over
else
    bad train_force_starts_the_runs_history_over "$(ls -A "$T/theirs"; grep -c start "$T/theirs/journal.jsonl")"
fi
# a file named lock that is not a run's (no process id in it) is someone's too: train and
# resume refuse it, and a resume of a folder that holds no run leaves no lock there
mkdir -p "$T/locked" "$T/norun" && echo "my precious notes" >"$T/locked/lock"
expect_error "train_refuses_someones_lock" 2 "^qkv: $T/locked: holds lock and no run: a new run would write over it" \
    timeout 60 "$QKV" train configs/toy.yaml --set run_dir="$T/locked" --set train.steps=2 "${copy_data[@]}"
expect_error "resume_of_no_run_says_so" 2 "^qkv: $T/norun: not a run directory \(no config.yaml\)$" timeout 60 "$QKV" resume "$T/norun"
cp -r "$run" "$T/lockedrun" && echo "my precious notes" >"$T/lockedrun/lock"
expect_error "resume_refuses_someones_lock" 2 "^qkv: $T/lockedrun: holds a file named lock that is not a run's" \
    timeout 60 "$QKV" resume "$T/lockedrun"
[[ $(cat "$T/locked/lock") == "my precious notes" && $(cat "$T/lockedrun/lock") == "my precious notes" && ! -e $T/norun/lock ]] &&
    ok "someones_lock_left_as_it_was" || bad "someones_lock_left_as_it_was" "$(cat "$T/locked/lock" "$T/lockedrun/lock"; ls -A "$T/norun")"
rm -rf "$T/locked" "$T/norun" "$T/lockedrun"
# ... but the config.yaml trained from, put in the run directory, is the run's to rewrite
mkdir -p "$T/own" && cp configs/toy.yaml "$T/own/config.yaml"
timeout 60 "$QKV" train "$T/own/config.yaml" --set run_dir="$T/own" --set train.steps=2 --set train.valid_every=2 \
    --set train.checkpoint_every=2 "${copy_data[@]}" >"$T/own.log" 2>&1 && [[ -f $T/own/ckpt/step-000002.safetensors ]] &&
    ok train_from_the_config_in_its_run_directory || bad train_from_the_config_in_its_run_directory "$(cat "$T/own.log")"
printf 'a b c\n\nzzz unknown words\n   \nb\n' >"$T/odd.src"
out=$("$QKV" translate "$run" --greedy <"$T/odd.src" 2>/dev/null)
rc=$?
if [[ $rc -eq 0 && $(printf '%s\n' "$out" | wc -l) -eq 5 && -z $(printf '%s\n' "$out" | sed -n 2p) && -z $(printf '%s\n' "$out" | sed -n 4p) ]]; then
    ok "translate_keeps_lines_and_empty_lines"
else
    bad "translate_keeps_lines_and_empty_lines" "exit $rc, output: $out"
fi
# random bytes, NUL bytes taken out: those are refused (below), everything else is a line
head -c 20000 /dev/urandom | tr -d '\000' >"$T/garbage.src"
lines=$(awk 'END{print NR}' "$T/garbage.src")
# the output goes to a file, not down a pipe: a pipeline's status inside $( ) is lost
# (PIPESTATUS read afterwards describes the assignment), and a crash must fail the test
"$QKV" translate "$run" <"$T/garbage.src" >"$T/garbage.hyp" 2>/dev/null
rc=$?
out_lines=$(wc -l <"$T/garbage.hyp")
[[ $rc -eq 0 && $out_lines -eq $lines ]] && ok "translate_survives_binary_input" || bad "translate_survives_binary_input" "exit $rc, $out_lines of $lines lines"
# a NUL byte would end its line's text unseen: refused with its line, from a file and down a pipe
printf 'ein haus\nein h\000aus\n' >"$T/nul.src"
expect_error "translate_refuses_a_nul_byte" 2 "^qkv: standard input: line 2 holds a NUL byte: not text$" \
    timeout 60 "$QKV" translate "$run" <"$T/nul.src"
# down a pipe the lines are taken as they come, after the note naming the checkpoint
out=$(cat "$T/nul.src" | timeout 60 "$QKV" translate "$run" 2>"$T/nul.err")
rc=$?
if [[ $rc -eq 2 && -z $out && $(tail -1 "$T/nul.err") == "qkv: standard input: line 2 holds a NUL byte: not text" ]]; then
    ok "translate_refuses_a_nul_byte_arriving"
else
    bad "translate_refuses_a_nul_byte_arriving" "exit $rc, stdout '$out', stderr '$(tail -1 "$T/nul.err")'"
fi
awk 'BEGIN{for(i=0;i<500;i++) printf "a "; print ""}' >"$T/long.src"
"$QKV" translate "$run" <"$T/long.src" >"$T/long.hyp" 2>/dev/null
rc=$?
out_lines=$(wc -l <"$T/long.hyp")
[[ $rc -eq 0 && $out_lines -eq 1 ]] && ok "translate_survives_overlong_line" || bad "translate_survives_overlong_line" "exit $rc, $out_lines lines"
awk 'BEGIN{for(i=0;i<40000;i++) printf "a "; print ""; print "b"}' >"$T/verylong.src"
"$QKV" translate "$run" --greedy <"$T/verylong.src" >"$T/verylong.hyp" 2>/dev/null
rc=$?
[[ $rc -eq 0 && $(wc -l <"$T/verylong.hyp") -eq 2 ]] && ok "translate_reads_lines_past_64k_whole" || bad "translate_reads_lines_past_64k_whole" "exit $rc, $(wc -l <"$T/verylong.hyp") lines for 2"
# gold alignments: every distinct link counts, however many a line has (a repeated one once)
awk 'BEGIN{for(i=0;i<50;i++) printf "a "; print ""}' >"$T/al.src"
awk 'BEGIN{for(i=0;i<50;i++) for(j=0;j<50;j++) printf "%d-%d ", i, j; print "0-0"}' >"$T/al.gold"
"$QKV" align "$run" --src "$T/al.src" --tgt "$T/al.src" --gold "$T/al.gold" --method output >"$T/al.out" 2>&1
grep -q "(1 sentence pairs, 2500 gold links)" "$T/al.out" && ok "align_gold_counts_every_link" || bad "align_gold_counts_every_link" "$(tail -1 "$T/al.out")"
echo "0-99999999999" >"$T/al.bad"
expect_error "align_gold_index_out_of_range" 2 "al.bad:1: not Pharaoh alignments" "$QKV" align "$run" --src "$T/al.src" --tgt "$T/al.src" --gold "$T/al.bad"
expect_error "bench_warmup_not_a_number" 2 "^qkv: --warmup: 'abc' is not a step count$" "$QKV" bench "$T/ok.yaml" --warmup abc
expect_error "bench_batches_only_needs_a_dump" 2 "^qkv: --batches-only writes a dump: give --dump FILE.json$" "$QKV" bench "$T/ok.yaml" --batches-only
# the batches a peer trains on (make race) carry the hashes of the vocabulary and of the
# encoded training ids, equal to those the run on the same config recorded
"$QKV" bench configs/toy.yaml "${copy_data[@]}" \
    --batches-only --warmup 1 --steps 4 --decode 3 --dump "$T/job.json" >/dev/null 2>"$T/job.err"
hashes() { grep -ao "\"$2\": *\"[0-9a-f]*\"" "$1" | head -1 | grep -o '[0-9a-f]\{16\}'; }
ckpt_head="$T/ckpt-head"
head -c 100000 "$run/ckpt/step-000060.safetensors" >"$ckpt_head"
if [[ $(wc -l <"$T/job.json.batches.jsonl") -eq 5 && -n $(hashes "$T/job.json" data_hash) &&
    $(hashes "$T/job.json" data_hash) == $(hashes "$ckpt_head" data_hash) &&
    $(hashes "$T/job.json" vocab_hash) == $(hashes "$ckpt_head" vocab_hash) ]]; then
    ok "bench_batches_only_same_ids_as_the_run"
else
    bad "bench_batches_only_same_ids_as_the_run" "$(wc -l <"$T/job.json.batches.jsonl") lines; data $(hashes "$T/job.json" data_hash) vs $(hashes "$ckpt_head" data_hash); $(cat "$T/job.err")"
fi
# a dump is published as one set (batches, weights, the dump): when the weights cannot be
# written (a file size limit, as a full disk, above the batches' size and below theirs),
# an earlier run's set stays as it was (its batches told apart by a line), and no part of
# the new one is left
set_run() { "$QKV" bench configs/toy.yaml "${copy_data[@]}" --warmup 1 --steps 4 --decode 3 --dump "$T/set.json"; }
set_run >/dev/null 2>&1 && echo '{"earlier": true}' >>"$T/set.json.batches.jsonl"
before=$(cat "$T/set.json" "$T/set.json.batches.jsonl" "$T/set.json.safetensors" 2>/dev/null | sha256sum)
small=$(stat -c %s "$T/set.json.batches.jsonl") big=$(stat -c %s "$T/set.json.safetensors")
err=$(trap '' XFSZ; ulimit -f $(((small + big) / 2048)); set_run 2>&1 >/dev/null)
rc=$?
left=$(ls "$T" | grep '^set\.json' | tr '\n' ' ')
[[ $rc -eq 1 && $((small * 4)) -lt $big && $(wc -l <<<"$err") -eq 1 && $err == "qkv: $T/set.json.safetensors"*"File too large"* &&
    $left == "set.json set.json.batches.jsonl set.json.safetensors " &&
    $(cat "$T/set.json" "$T/set.json.batches.jsonl" "$T/set.json.safetensors" | sha256sum) == "$before" ]] &&
    ok "bench_dump_that_cannot_be_written_leaves_the_old_set" ||
    bad "bench_dump_that_cannot_be_written_leaves_the_old_set" "exit $rc: $err; sizes $small $big; left '$left'"
# a benchmark's padding share is the timed batches' positions that hold no token, as the
# batches it recorded show them (the warm-up's batch is not timed)
if "$QKV" bench configs/toy.yaml "${copy_data[@]}" --warmup 1 --steps 4 \
    --decode 3 --dump "$T/timed.json" >"$T/timed.out" 2>"$T/timed.err" &&
    why=$(/usr/bin/python3 - "$T/timed.out" "$T/timed.json.batches.jsonl" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
bs = [json.loads(l) for l in open(sys.argv[2])][1:]
real = sum(sum(b["src_len"]) + sum(b["tgt_len"]) for b in bs)
padded = sum(b["B"] * (b["S"] + b["T"]) for b in bs)
want = 1 - real / padded
if len(bs) != 4 or not 0 < want < 1 or abs(r["padding_share"] - want) > 1e-4:
    print(f"{len(bs)} timed batches, padding_share {r['padding_share']}, the batches say {want:.4f}")
PY
    ) && [[ -z $why ]]; then
    ok "bench_padding_share_from_its_batches"
else
    bad "bench_padding_share_from_its_batches" "${why:-$(tail -2 "$T/timed.err")}"
fi
# the products alone run the step's own shapes: a pass's mean rows, each layer's products
# and the classifier, over the passes the shards ran; their FLOPs are the timed batches'
# matrix-product FLOPs (the step's less attention's) up to the rounding of the mean rows (the
# classifier alone is 2.4% of them here)
if [[ -s $T/timed.out ]] && why=$(/usr/bin/python3 - "$T/timed.out" "$T/timed.json" "$T/timed.json.batches.jsonl" <<'PY'
import json, sys
r, m = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
bs = [json.loads(l) for l in open(sys.argv[3])][1:]
d, ff, E, D, V = m["d_model"], m["d_ff"], m["encoder_layers"], m["decoder_layers"], m["tgt_vocab"]
per_src = 2 * (E * (4 * d * d + 2 * d * ff) + D * 2 * d * d)
per_tgt = 2 * (D * (6 * d * d + 2 * d * ff) + d * V)
want = 3 * sum(per_src * sum(b["src_len"]) + per_tgt * sum(b["tgt_len"]) for b in bs) / len(bs)
got = r["products_alone_flops_per_step"]
if not r["products_alone_ms"] > 0 or not 0 < r["products_alone_gflops"] < 10 * r["peak_gflops"] or abs(got / want - 1) > 0.01:
    print(f"products alone: {r['products_alone_ms']} ms, {r['products_alone_gflops']} GFLOP/s, {got:.4g} FLOPs a step; the batches say {want:.4g}")
PY
    ) && [[ -z $why ]]; then
    ok "bench_products_alone_are_the_steps_products"
else
    bad "bench_products_alone_are_the_steps_products" "${why:-$(tail -2 "$T/timed.err")}"
fi
# a ceiling the step's products beat is measured again, not divided by: given 1 GFLOP/s, the
# benchmark measures its own (on the training threads) and says how often; no MFU over 100%
# unless it says the ceiling was beaten each time
if "$QKV" bench configs/toy.yaml "${copy_data[@]}" --set train.threads=3 --warmup 1 \
    --steps 3 --decode 3 --ceiling 1 --timeline "$T/low.svg" >"$T/low.out" 2>"$T/low.err" &&
    "$QKV" bench configs/toy.yaml "${copy_data[@]}" --set train.threads=3 \
        --peak >"$T/peak.out" 2>>"$T/low.err" &&
    why=$(/usr/bin/python3 - "$T/low.out" "$T/peak.out" <<'PY'
import json, sys
r, p = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
if not (r["ceiling_remeasured"] >= 1 and r["peak_gflops"] > 1 and r["ceiling_threads"] == 3 and
        (r["mfu"] <= 1 or r["ceiling_beaten"])):
    print(f"ceiling {r['peak_gflops']} on {r['ceiling_threads']} threads, measured again {r['ceiling_remeasured']} times, mfu {r['mfu']}")
if not (p["threads"] == 3 and p["peak_gflops"] > 0 and p["peak_1thread_gflops"] > 0 and p["peak_rounds"] == 8 and
        0 < p["peak_low_gflops"] <= p["peak_median_gflops"] <= p["peak_gflops"]):
    print(f"--peak: {p}")
PY
    ) && [[ -z $why ]] &&
    grep -q "^sgemm ceiling on 3 threads: [0-9.]* GFLOP/s (the best of 8 rounds after 0.5 s of warm-up; median [0-9.]*, lowest [0-9.]*: [0-9.]*% below the best); [0-9.]* on one (OpenBLAS " "$T/low.err"; then
    ok "bench_ceiling_beaten_is_measured_again"
else
    bad "bench_ceiling_beaten_is_measured_again" "${why:-$(tail -2 "$T/low.err")}"
fi
# two threads' ceiling is at most about twice one's: a round timed by the thread that waits
# at the barriers, scheduled late on a busy core, once read 2.5 times one thread's rate
if "$BOUNDED" "$QKV" bench configs/toy.yaml "${copy_data[@]}" --set train.threads=2 --peak >"$T/peak2.out" 2>"$T/peak2.err"; then
    why=$(/usr/bin/python3 - "$T/peak2.out" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
if not 0 < p["peak_gflops"] <= 2 * 1.15 * p["peak_1thread_gflops"]:
    print("2 threads %s GFLOP/s against %s on one" % (p["peak_gflops"], p["peak_1thread_gflops"]))
PY
    ) || why="the check did not run: $why"
    [[ -z $why ]] && ok "bench_ceiling_of_two_threads_at_most_twice_one" || bad "bench_ceiling_of_two_threads_at_most_twice_one" "$why"
else
    bad "bench_ceiling_of_two_threads_at_most_twice_one" "$(tail -2 "$T/peak2.err")"
fi
# progress on a terminal: what the benchmark is doing, each training step with an ETA, on
# one redrawn line of stderr (under script(1), a pseudo-terminal); none when stderr is a
# file, where the results are all there is
if timeout 120 script -qec "timeout 100 '$QKV' bench configs/toy.yaml $(printf '%q ' "${copy_data[@]}") \
    --warmup 1 --steps 3 --decode 2" /dev/null >"$T/tty.out" 2>&1 &&
    timeout 100 "$QKV" bench configs/toy.yaml "${copy_data[@]}" --warmup 1 --steps 3 --decode 2 >"$T/notty.out" 2>"$T/notty.err" &&
    lines=$(tr '\r' '\n' <"$T/tty.out") &&
    grep -q "qkv bench: the sgemm ceiling on 2 threads" <<<"$lines" &&
    grep -q "qkv bench: training step 4 of 4 (1 warm-up), ETA [0-9]" <<<"$lines" &&
    grep -q "qkv bench: beam search of 2 sentences" <<<"$lines" && [[ ! -s $T/notty.err ]] &&
    /usr/bin/python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$T/notty.out" &&
    head -20 "$T/copy/valid.src" >"$T/twenty.src" &&
    timeout 120 script -qec "timeout 100 '$QKV' bench '$run' --translate '$T/twenty.src'" /dev/null >"$T/tty2.out" 2>&1 &&
    lines=$(tr '\r' '\n' <"$T/tty2.out") && grep -q "qkv bench: the sgemm ceiling on [0-9]* threads" <<<"$lines" &&
    grep -q "qkv bench: greedy search of 20 lines" <<<"$lines" &&
    grep -q "qkv bench: beam search (beam 5) of 20 lines" <<<"$lines"; then
    ok "bench_progress_on_a_terminal_only"
else
    bad "bench_progress_on_a_terminal_only" "$(tr '\r' '\n' <"$T/tty.out" | grep -a "qkv bench" | tail -3; head -c 200 "$T/notty.err")"
fi
# more training threads than the CPUs this process may use: the kernels' line says so and
# names the count that fits; a count that fits says nothing more (taskset: one CPU)
cpus_line() { # THREADS: the openblas line of a one-step run held to CPU 0
    timeout 120 taskset -c 0 "$QKV" train configs/toy.yaml "${copy_data[@]}" --set run_dir="$T/cpus$1" --set train.steps=1 \
        --set train.threads="$1" 2>&1 | grep '^openblas:'
}
over=$(cpus_line 2) && fits=$(cpus_line 1)
if [[ $over == *"2 threads, each running"*"; only 1 CPU to run them on, so each step waits for the threads the OS runs late (train.threads: 1 is likely faster)" &&
    $fits == *"; 1 thread" ]]; then
    ok "train_says_more_threads_than_cpus"
else
    bad "train_says_more_threads_than_cpus" "2 threads: '$over'; 1 thread: '$fits'"
fi
# more threads than a batch has rows: the shards left empty run no pass, and the benchmark
# counts none for them (it divided by their zero rows: SIGFPE at 16 threads on 512 tokens)
if timeout 120 "$QKV" bench configs/toy.yaml "${copy_data[@]}" --set train.batch_tokens=48 \
    --set train.threads=8 --warmup 1 --steps 2 --decode 0 >"$T/fewrows.out" 2>"$T/fewrows.err" &&
    why=$(/usr/bin/python3 - "$T/fewrows.out" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
work = r["timeline"]["shard_gflop"]
if r["steps"] != 2 or len(work) != 8 or 0 not in work or not r["tokens_per_s"] > 0:
    print(f"steps {r['steps']}, shard work {work}, {r['tokens_per_s']} tok/s")
PY
    ) && [[ -z $why ]]; then
    ok "bench_more_threads_than_rows"
else
    bad "bench_more_threads_than_rows" "${why:-$(tail -2 "$T/fewrows.err")}"
fi
# the same run's timeline: every thread's phases and waits fill its span of the step exactly,
# and the main thread's fill the step (its time alone besides); another thread's span may
# start late or end after the step returns (three threads on fewer cores: the OS runs one
# late), so only the main thread's is held to the step. The timed steps and threads are all
# there, and the picture has a lane per thread
if [[ -s $T/low.out ]] && why=$(/usr/bin/python3 - "$T/low.out" "$T/low.svg" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["timeline"]
svg = open(sys.argv[2]).read()
if t["threads"] != 3 or t["steps"] != 3 or len(t["per_step"]) != 3 or not 0 <= t["waiting_share"] < 1:
    print(f"timeline of {t['threads']} threads, {t['steps']} steps, waiting {t['waiting_share']}")
for k, s in enumerate(t["per_step"]):
    for i, th in enumerate(s["threads"]):
        busy = th["shard_ms"] + th["fold_ms"] + th["adam_ms"] + th["wait_ms"]
        alone = s["ms"] - busy
        fills = abs(busy - (th["to_ms"] - th["from_ms"])) <= 0.005 and 0 <= th["from_ms"] <= th["to_ms"]
        if not (th["shard_ms"] > 0 and th["shard_gflop"] > 0 and fills and
                (i > 0 or (-0.05 <= alone <= 0.05 * s["ms"] + 0.2 and th["to_ms"] <= s["ms"]))):
            print(f"step {k} thread {i}: {th} in a step of {s['ms']} ms")
if svg.count(">thread ") != 3 or not svg.rstrip().endswith("</svg>"):
    print("the picture has no lane per thread")
PY
    ) && [[ -z $why ]]; then
    ok "bench_timeline_accounts_for_every_thread"
else
    bad "bench_timeline_accounts_for_every_thread" "${why:-no timeline}"
fi
# the picture as a person opens it: Chromium parses it as SVG (an XML error would show its own
# page instead) and draws it (build/timeline.png, to look at)
if [[ -z $browser ]]; then
    skip_missing browser "Chromium is not installed: the timeline picture was NOT opened in a browser"
elif [[ -s $T/low.svg ]]; then
    browser_flags "$T/profile" --window-size=960,260
    browser_dom "file://$T/low.svg" "$T/low.dom"
    mkdir -p "${BUILD:-build}"
    browser_shot "file://$T/low.svg" "${BUILD:-build}/timeline.png" 960,260
    lanes=$(grep -o '>thread [0-9]*<' "$T/low.dom" | wc -l)
    [[ $lanes -eq 3 ]] && ! grep -q parsererror "$T/low.dom" && [[ -s ${BUILD:-build}/timeline.png ]] &&
        ok "bench_timeline_opens_in_chromium" ||
        bad "bench_timeline_opens_in_chromium" "$lanes lanes; $(grep -o 'parsererror.\{0,120\}' "$T/low.dom" | head -1)"
fi
expect_error "bench_timeline_read_only_dir" 2 "^qkv: /sys/t.svg: cannot create" "$QKV" bench configs/toy.yaml \
    "${copy_data[@]}" --warmup 0 --steps 1 --decode 0 \
    --ceiling 1000000 --timeline /sys/t.svg
# bench's --dump (FILE, FILE.batches.jsonl, FILE.safetensors) and --timeline are checked as
# export's --out is, before any work: never a checkpoint or a file already in a run (the
# config's, or one a folder above the name holds, however spelled), a FIFO or a device
toy_yaml=$PWD/configs/toy.yaml
bench_out() { # bench OPTIONS...: two quick steps of the copy task, no decoding
    timeout 60 "$QKV" bench "$toy_yaml" "${copy_data[@]}" --warmup 0 --steps 2 --decode 0 --ceiling 100 "$@"
}
in_dir() { (cd "$1" && shift && "$@"); }
cp "$run/ckpt/best.safetensors" "$T/best.before" && ls -l "$run/ckpt" "$run" >"$T/run.before"
expect_error "bench_dump_refuses_a_runs_checkpoint" 2 \
    "^qkv: $run/ckpt/best.safetensors: --dump is a checkpoint of the run $run, which the benchmark would replace" \
    bench_out --dump "$run/ckpt/best.safetensors"
expect_error "bench_dump_refuses_weights_over_a_checkpoint" 2 \
    "^qkv: $run/ckpt/step-000060.safetensors: --dump's weights file is a checkpoint of the run $run" \
    bench_out --dump "$run/ckpt/step-000060"
expect_error "bench_timeline_refuses_a_checkpoint" 2 \
    "^qkv: $run/../copyrun/ckpt/step-000060.safetensors: --timeline is a checkpoint of the run" \
    bench_out --timeline "$run/../copyrun/ckpt/step-000060.safetensors"
expect_error "bench_dump_refuses_a_file_of_a_run" 2 "^qkv: $run/config.yaml: --dump is a file of the run $run, which" \
    bench_out --dump "$run/config.yaml" --set run_dir="$T/elsewhere"
expect_error "bench_dump_refuses_a_checkpoint_named_from_inside" 2 \
    "^qkv: step-000060.safetensors: --dump's weights file is a checkpoint of the run \.\., which" \
    in_dir "$run/ckpt" bench_out --dump step-000060
cmp -s "$run/ckpt/best.safetensors" "$T/best.before" && ls -l "$run/ckpt" "$run" | cmp -s - "$T/run.before" &&
    ok "bench_refused_leaves_the_run_alone" || bad "bench_refused_leaves_the_run_alone" "$(ls -l "$run/ckpt")"
mkfifo "$T/bench.fifo"
expect_error "bench_dump_refuses_a_fifo" 2 "^qkv: $T/bench.fifo: a FIFO, not a regular file$" bench_out --dump "$T/bench.fifo"
# a device through a link (a write that got past the check would replace the link, or
# fail in the device, never replace the device itself)
ln -s /dev/full "$T/full"
expect_error "bench_timeline_refuses_a_device" 2 "^qkv: $T/full: a character device, not a regular file$" \
    bench_out --timeline "$T/full"
expect_error "bench_dump_refuses_a_device" 2 "^qkv: $T/full: a character device, not a regular file$" bench_out --dump "$T/full"
[[ -L $T/full && -z $(ls "$T" | grep '^full\.') ]] && ok "bench_dump_refused_writes_nothing_beside" ||
    bad "bench_dump_refused_writes_nothing_beside" "$(ls -l "$T"/full*)"
rm -f "$T"/full*
expect_error "bench_dump_and_timeline_one_file" 2 "^qkv: $T/same: both --dump and --timeline" \
    bench_out --dump "$T/same" --timeline "$T/same"
# checked before the work: before the training data is read (here its sides differ in length)
expect_error "bench_outputs_checked_before_the_work" 2 "^qkv: $T/bench.fifo: a FIFO" \
    bench_out --dump "$T/bench.fifo" --set data.train.tgt="$T/copy/valid.tgt"
# --translate reads its file as eval reads --src: a FIFO with no writer is refused at once,
# before the ceiling is measured and the run loaded, never waited on
expect_error "bench_translate_refuses_a_fifo" 2 "^qkv: $T/bench.fifo: a FIFO, not a regular file$" \
    timeout 20 "$QKV" bench "$run" --translate "$T/bench.fifo"
rm -f "$T/bench.fifo"
# a write that fails (a file size limit) is one line and exit 1, and leaves no file, whole or part
mkdir -p "$T/cut"
for mode in "" --batches-only; do
    err=$(trap '' XFSZ; ulimit -f 1; bench_out $mode --dump "$T/cut/d.json" 2>&1 >/dev/null)
    rc=$?
    left=$(ls "$T/cut")
    [[ $rc -eq 1 && $err == "qkv: $T/cut/d.json.batches.jsonl."*".tmp: write failed: File too large" &&
        $(wc -l <<<"$err") -eq 1 && -z $left ]] && ok "bench_dump_write_fault_exit_1_leaves_nothing ${mode:-(timed)}" ||
        bad "bench_dump_write_fault_exit_1_leaves_nothing ${mode:-(timed)}" "exit $rc: $err; left: $left"
done
err=$(trap '' XFSZ; ulimit -f 1; bench_out --timeline "$T/cut/t.svg" 2>&1 >/dev/null)
rc=$?
left=$(ls "$T/cut")
[[ $rc -eq 1 && $err == "qkv: $T/cut/t.svg."*".tmp: write failed: File too large" && -z $left ]] &&
    ok "bench_timeline_write_fault_exit_1_leaves_nothing" || bad "bench_timeline_write_fault_exit_1_leaves_nothing" "exit $rc: $err; left: $left"
# written whole: the dump names its batches and weights, all three there, no tmp file beside
if bench_out --dump "$T/cut/d.json" --timeline "$T/cut/t.svg" >/dev/null 2>"$T/cut.err" &&
    [[ $(ls "$T/cut" | tr '\n' ' ') == "d.json d.json.batches.jsonl d.json.safetensors t.svg " ]] &&
    grep -q "\"weights\": \"$T/cut/d.json.safetensors\"" "$T/cut/d.json" &&
    [[ $(wc -l <"$T/cut/d.json.batches.jsonl") -eq 2 ]] && timeout 60 "$QKV" info "$T/cut/d.json.safetensors" >/dev/null; then
    ok "bench_dump_written_whole"
else
    bad "bench_dump_written_whole" "$(ls "$T/cut"; cat "$T/cut.err")"
fi
rm -rf "$T/cut"
# an output place that cannot hold the file is bad input (2), the same for every command;
# a write that fails on the way (here a file size limit) is a runtime fault (1)
expect_error "export_read_only_dir" 2 "^qkv: /sys/x.safetensors: cannot create: " "$QKV" export "$run" --out /sys/x.safetensors
expect_error "grads_read_only_dir" 2 "^qkv: /sys/g: cannot create: " "$QKV" grads "$run" --out /sys/g
# a dump cut short by a file size limit leaves nothing: no directory, no half of the files
err=$(trap '' XFSZ; ulimit -f 1; "$QKV" grads "$run" --out "$T/gcut/g" 2>&1 >/dev/null)
rc=$?
[[ $rc -eq 1 && $err == *"File too large"* && $(wc -l <<<"$err") -eq 1 && ! -e $T/gcut/g && -z $(ls -d "$T"/gcut/g.partial-* 2>/dev/null) ]] &&
    ok "grads_write_fault_leaves_nothing" || bad "grads_write_fault_leaves_nothing" "exit $rc: $err; $(ls -R "$T/gcut" 2>&1)"
rm -rf "$T/gcut"
expect_error "toy_data_read_only_dir" 2 "^qkv: /sys/toy: cannot create: " "$QKV" toy-data /sys/toy
mkdir -p "$run/eval.jsonl"
expect_error "eval_result_file_is_a_directory" 2 "eval.jsonl: cannot append the result: Is a directory" "$QKV" eval "$run" --src "$T/al.src" --ref "$T/al.src" --greedy
rmdir "$run/eval.jsonl"
mkdir -p "$T/plotdir/curves.svg" && cp "$run/metrics.jsonl" "$T/plotdir/"
expect_error "plot_output_is_a_directory" 2 "curves.svg: cannot rename into place: Is a directory" "$QKV" plot "$T/plotdir"
# --out is replaced whole by a rename: never a FIFO or a device node (nor what a link there
# points to), a file of the run the export reads, or the very weights file it reads
mkfifo "$T/export.fifo" && ln -s /dev/null "$T/null.safetensors" && cp "$run/config.yaml" "$T/config.before"
"$QKV" export "$run" --out "$T/self.safetensors" >/dev/null 2>&1 && cp "$T/self.safetensors" "$T/self.before"
expect_error "export_refuses_the_file_it_reads" 2 "^qkv: $T/self.safetensors: --out is the weights file the export reads" \
    "$QKV" export "$T/self.safetensors" --out "$T/self.safetensors"
expect_error "export_refuses_a_fifo" 2 "^qkv: $T/export.fifo: a FIFO, not a regular file$" "$QKV" export "$run" --out "$T/export.fifo"
expect_error "export_refuses_a_link_to_a_device" 2 "^qkv: $T/null.safetensors: a character device, not a regular file$" \
    "$QKV" export "$run" --out "$T/null.safetensors"
expect_error "export_refuses_the_runs_config" 2 "^qkv: $run/../copyrun/config.yaml: --out is a file of the run $run, which the export would replace" \
    "$QKV" export "$run" --out "$run/../copyrun/config.yaml"
[[ -p $T/export.fifo && -L $T/null.safetensors ]] && cmp -s "$run/config.yaml" "$T/config.before" &&
    cmp -s "$T/self.safetensors" "$T/self.before" && ok "export_refused_leaves_the_files_alone" ||
    bad "export_refused_leaves_the_files_alone" "$(ls -la "$T/export.fifo" "$T/null.safetensors" 2>&1)"
rm -f "$T/export.fifo" "$T/null.safetensors" "$T/config.before" "$T/self.safetensors" "$T/self.before"
# --average N of a checkpoint given: the N step checkpoints ending at that one (not the
# run's newest N), the run's folder and files named as a user spells them, not "ckpt/.."
avg=$T/avgrun
timeout 120 "$QKV" train configs/toy.yaml "${copy_data[@]}" --set run_dir="$avg" --set train.steps=60 \
    --set train.checkpoint_every=20 --set train.valid_every=20 --set train.average_last=2 >"$T/avgrun.log" 2>&1
avg_is() { # OUT STEP...: OUT's weights are the mean of those step checkpoints' (python prints why not)
    /usr/bin/python3 - "$avg" "$@" <<'PY'
import json, struct, sys
def load(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n]); d = b[8 + n:]
    return {k: struct.unpack("<%df" % ((v["data_offsets"][1] - v["data_offsets"][0]) // 4), d[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in h.items() if k != "__metadata__" and not k.startswith("optim.")}, h["__metadata__"]
got, meta = load(sys.argv[2])
steps = sys.argv[3:]
ws = [load("%s/ckpt/step-%06d.safetensors" % (sys.argv[1], int(s)))[0] for s in steps]
worst = max(abs(sum(w[k][i] for w in ws) / len(ws) - got[k][i]) for k in got for i in range(len(got[k])))
if worst > 1e-6 or meta["step"] != steps[-1]:
    print(f"off by {worst}, step {meta['step']}, not the mean of steps {steps}")
PY
}
timeout 120 "$QKV" export "$avg/ckpt/step-000040.safetensors" --average 2 --out "$T/avg40.safetensors" >"$T/avg40.log" 2>&1
why=$(avg_is "$T/avg40.safetensors" 20 40)
[[ -z $why && $(head -1 "$T/avg40.log") == "averaged the 2 checkpoints of $avg ending at step 40:" &&
    $(sed -n 2,3p "$T/avg40.log") == "  $avg/ckpt/step-000020.safetensors"$'\n'"  $avg/ckpt/step-000040.safetensors" ]] &&
    ok "export_average_ends_at_the_checkpoint_given" || bad "export_average_ends_at_the_checkpoint_given" "$why $(cat "$T/avg40.log")"
timeout 120 "$QKV" export "$avg/ckpt/step-000020.safetensors" --average 1 --out "$T/avg20.safetensors" >"$T/avg20.log" 2>&1
why=$(avg_is "$T/avg20.safetensors" 20)
[[ -z $why ]] && grep -q "^wrote $T/avg20.safetensors: .* of step 20, " "$T/avg20.log" &&
    ok "export_average_1_of_a_checkpoint_is_its_weights" || bad "export_average_1_of_a_checkpoint_is_its_weights" "$why $(cat "$T/avg20.log")"
# named from inside ckpt/, the run is ".." and its files "../ckpt/..."
out=$(in_dir "$avg/ckpt" timeout 120 "$QKV" export step-000060.safetensors --average 3 --out "$T/avg60.safetensors" 2>&1)
[[ $(head -1 <<<"$out") == "averaged the 3 checkpoints of .. ending at step 60:" &&
    $(grep -c '^  \.\./ckpt/step-0000[246]0\.safetensors$' <<<"$out") -eq 3 && -z $(avg_is "$T/avg60.safetensors" 20 40 60) ]] &&
    ok "export_average_named_from_inside_ckpt" || bad "export_average_named_from_inside_ckpt" "$out"
# best.safetensors ends the mean at the step it holds
best_step=$(/usr/bin/python3 -c 'import json, struct, sys; b = open(sys.argv[1], "rb").read(1 << 20)
print(json.loads(b[8:8 + struct.unpack("<Q", b[:8])[0]])["__metadata__"]["step"])' "$avg/ckpt/best.safetensors")
out=$(timeout 120 "$QKV" export "$avg/ckpt/best.safetensors" --average 1 --out "$T/avgbest.safetensors" 2>&1)
[[ -n $best_step && $(head -1 <<<"$out") == "averaged the 1 checkpoints of $avg ending at step $best_step:" &&
    -z $(avg_is "$T/avgbest.safetensors" "$best_step") ]] && ok "export_average_of_best_ends_at_its_step" ||
    bad "export_average_of_best_ends_at_its_step" "$out (best holds step $best_step)"
expect_error "export_average_refuses_too_few_before_the_checkpoint" 2 \
    "^qkv: $avg: --average 2 ending at step 20, but the run has 1 step checkpoints up to it" \
    "$QKV" export "$avg/ckpt/step-000020.safetensors" --average 2 --out "$T/x.safetensors"
expect_error "export_average_refuses_the_runs_average" 2 \
    "^qkv: $avg/ckpt/average.safetensors: --average 2: this is the run's mean of its newest checkpoints, not one checkpoint" \
    "$QKV" export "$avg/ckpt/average.safetensors" --average 2 --out "$T/x.safetensors"
cp -r "$avg" "$T/avgkept" && ln "$T/avgkept/ckpt/step-000040.safetensors" "$T/avgkept/ckpt/kept.safetensors" &&
    rm "$T/avgkept/ckpt/step-000040.safetensors"
expect_error "export_average_refuses_a_step_the_run_no_longer_keeps" 2 \
    "^qkv: $T/avgkept/ckpt/kept.safetensors: holds step 40, but the run $T/avgkept keeps no step checkpoint of it" \
    "$QKV" export "$T/avgkept/ckpt/kept.safetensors" --average 1 --out "$T/x.safetensors"
[[ ! -e $T/x.safetensors ]] && ok "export_average_refused_writes_nothing" || bad "export_average_refused_writes_nothing" "$T/x.safetensors written"
err=$(trap '' XFSZ; ulimit -f 1; "$QKV" export "$run" --out "$T/big.safetensors" 2>&1 >/dev/null)
rc=$?
[[ $rc -eq 1 && $err == *"write failed: File too large" && $(wc -l <<<"$err") -eq 1 ]] && ok "export_write_fault_is_runtime" || bad "export_write_fault_is_runtime" "exit $rc: $err"
# an eval result cut short by a file size limit (1 KiB, the old lines 1000 bytes) is taken
# back: eval.jsonl holds the old lines only, never the start of a new one
[[ -e $run/eval.jsonl ]] && mv "$run/eval.jsonl" "$T/eval.saved"
printf '{"pad": "%s"}\n' "$(printf 'x%.0s' $(seq 987))" >"$run/eval.jsonl" && cp "$run/eval.jsonl" "$T/eval.before"
err=$(trap '' XFSZ; ulimit -f 1; timeout 120 "$QKV" eval "$run" --src "$T/al.src" --ref "$T/al.src" --greedy 2>&1 >/dev/null)
rc=$?
[[ $rc -eq 1 && $err == "qkv: $run/eval.jsonl: cannot append the result: File too large" ]] && cmp -s "$run/eval.jsonl" "$T/eval.before" &&
    ok "eval_cut_result_line_taken_back" ||
    bad "eval_cut_result_line_taken_back" "exit $rc: $err; $(wc -c <"$run/eval.jsonl") bytes, was $(wc -c <"$T/eval.before")"
rm -f "$run/eval.jsonl" "$T/eval.before"
# a source file whose name is not UTF-8 keeps its key in eval.jsonl, the bad byte as U+FFFD
cp "$T/al.src" "$T/al"$'\xff'".src"
if timeout 120 "$QKV" eval "$run" --src "$T/al"$'\xff'".src" --ref "$T/al.src" --greedy >/dev/null 2>&1 &&
    tail -1 "$run/eval.jsonl" | grep -qF "\"src\": \"$T/al"$'\xef\xbf\xbd'".src\""; then
    ok "eval_src_name_not_utf8_keeps_its_key"
else
    bad "eval_src_name_not_utf8_keeps_its_key" "$(tail -1 "$run/eval.jsonl" | head -c 300)"
fi
rm -f "$run/eval.jsonl" "$T/al"$'\xff'".src"
[[ -e $T/eval.saved ]] && mv "$T/eval.saved" "$run/eval.jsonl"
# a source longer than the model's positions is cut, said in one line as translate says it
awk 'BEGIN{for(i=0;i<300;i++) printf "a "; print ""}' >"$T/long.src"
cp "$T/long.src" "$T/long2.src" && cat "$T/al.src" >>"$T/long2.src"
cat "$T/al.src" "$T/al.src" >"$T/long2.ref"
err=$(timeout 120 "$QKV" eval "$run" --src "$T/long2.src" --ref "$T/long2.ref" --greedy 2>&1 >/dev/null)
rc=$?
[[ $rc -eq 0 && $(grep -c "^qkv: warning: 1 lines longer than [0-9]* tokens were truncated$" <<<"$err") -eq 1 ]] &&
    ok "eval_says_sources_truncated" || bad "eval_says_sources_truncated" "exit $rc: $err"
# a small address-space limit: OpenBLAS's threads would spin for ever on buffers they
# cannot map (every command hung, even help); now help runs, and work that multiplies
# matrices is refused in one line, exit 1 (sanitizer runtimes reserve more than any such
# limit allows, so not under them)
if ldd "$QKV_BIN" | grep -q 'libasan\|libtsan'; then
    skip address_space_limit "a sanitizer build cannot run under ulimit -v"
else
    out=$(ulimit -v 100000; QKV_TIMEOUT=30 "$QKV" help 2>&1)
    rc=$?
    [[ $rc -eq 0 && $out == usage:* ]] && ok "help_under_100mb_address_limit" || bad "help_under_100mb_address_limit" "exit $rc: ${out:0:200}"
    expect_error "train_under_500mb_address_limit" 1 "^qkv: the address-space limit \(ulimit -v\) is 488 MiB, and 2 threads multiplying matrices need at least 576 MiB" \
        bash -c 'ulimit -v 500000; QKV_TIMEOUT=30 exec "$0" train "$1" --set run_dir="$2" --set train.threads=2' "$QKV" "$T/ok.yaml" "$T/ulimit-run"
    expect_error "translate_under_200mb_address_limit" 1 "^qkv: the address-space limit \(ulimit -v\) is 195 MiB, and 1 thread multiplying" \
        bash -c 'ulimit -v 200000; echo a | QKV_TIMEOUT=30 exec "$0" translate "$1"' "$QKV" "$run"
fi
expect_error "translate_missing_run" 2 "^qkv: $T/nowhere: No such file or directory$" "$QKV" translate "$T/nowhere"
mkdir -p "$T/notarun"
expect_error "translate_not_a_run" 2 "^qkv: $T/notarun: not a run directory" "$QKV" translate "$T/notarun"
head -c 1000 "$run/ckpt/step-000060.safetensors" >"$run/ckpt/cut.safetensors"
expect_error "translate_truncated_checkpoint" 2 "^qkv: $run/ckpt/cut.safetensors: " "$QKV" translate "$run/ckpt/cut.safetensors"
rm "$run/ckpt/cut.safetensors"

# ---- OpenBLAS's kernels: the user's choice kept; a choice weaker than the CPU replaced, once --
# QKV_TEST_PRETEND_OPENBLAS_CHOSE (a test hook) makes qkv take that set as OpenBLAS's choice.
# ktrain NAME VAR=VALUE...: 10 steps on the copy task with those variables, in $T/k-NAME; an
# OPENBLAS_CORETYPE of the caller's environment is not inherited (each case sets its own)
ktrain() {
    local name=$1
    shift
    env -u OPENBLAS_CORETYPE "$@" "$QKV" train configs/toy.yaml "${copy_data[@]}" --set run_dir="$T/k-$name" \
        --set train.steps=10 --set train.log_every=5 >"$T/k-$name.log" 2>&1
}
kline() { grep -m1 '^openblas: ' "$T/k-$1.log"; }
machine() { grep -m1 -o '"machine": {[^}]*}' "$T/k-$1/journal.jsonl"; }
# the strongest set this CPU runs, read from what Linux lists (AVX-512 F/BW/DQ/VL, BF16; AVX2, FMA)
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() { [[ $flags == *" $1 "* ]]; }
if has avx512f && has avx512bw && has avx512dq && has avx512vl; then
    best=$(has avx512_bf16 && echo Cooperlake || echo SkylakeX)
elif has avx2 && has fma; then
    best=Haswell
else
    best=""
fi
ktrain user OPENBLAS_CORETYPE=Prescott QKV_TEST_PRETEND_OPENBLAS_CHOSE=Prescott
if [[ $(kline user) == "openblas: Prescott kernels (OPENBLAS_CORETYPE from the environment); "* &&
    $(machine user) == *'"openblas_coretype": "Prescott"'* && $(machine user) != *openblas_chose* ]]; then
    ok "kernels_user_coretype_kept"
else
    bad "kernels_user_coretype_kept" "$(kline user) $(machine user) $(tail -2 "$T/k-user.log")"
fi
if [[ -z $best ]]; then
    skip "kernels_upgraded_when_openblas_chose_weaker" "no AVX2 and FMA here: nothing stronger than SSE to choose"
else
    family=$(grep -m1 '^cpu family' /proc/cpuinfo | grep -o '[0-9]*$')
    model=$(grep -m1 '^model[[:space:]]' /proc/cpuinfo | grep -o '[0-9]*$')
    want="openblas: $best kernels (OpenBLAS chose Prescott for this CPU, family $family model $model; set OPENBLAS_CORETYPE to choose); "
    ktrain up QKV_TEST_PRETEND_OPENBLAS_CHOSE=Prescott
    if [[ $(kline up) == "$want"* && $(machine up) == *'"openblas": "'$best'", "openblas_chose": "Prescott"'* &&
        $(machine up) != *openblas_coretype* && -f $T/k-up/ckpt/step-000010.safetensors ]]; then
        ok "kernels_upgraded_when_openblas_chose_weaker"
    else
        bad "kernels_upgraded_when_openblas_chose_weaker" "'$(kline up)', want '$want'; $(machine up) $(tail -2 "$T/k-up.log")"
    fi
    # the run is that of the set chosen by hand: the same weights and moments, bit for bit
    ktrain hand OPENBLAS_CORETYPE=$best
    if same_tensors "$T/k-up/ckpt/step-000010.safetensors" "$T/k-hand/ckpt/step-000010.safetensors"; then
        ok "kernels_upgraded_run_is_the_set_s_own"
    else
        bad "kernels_upgraded_run_is_the_set_s_own" "checkpoints differ from OPENBLAS_CORETYPE=$best's; $(kline hand)"
    fi
    # the marker stops a second start: OpenBLAS's own choice, said without a note
    ktrain again QKV_KERNELS_UPGRADED="Prescott:$best" QKV_TEST_PRETEND_OPENBLAS_CHOSE=Prescott
    [[ $(kline again) =~ ^openblas:\ [A-Za-z0-9_]+\ kernels\;\  && $(machine again) != *openblas_c* ]] &&
        ok "kernels_marker_stops_a_second_start" || bad "kernels_marker_stops_a_second_start" "$(kline again) $(machine again)"
    # a process that inherits the marker but another OPENBLAS_CORETYPE: the user's choice
    ktrain child QKV_KERNELS_UPGRADED="Prescott:$best" OPENBLAS_CORETYPE=Prescott
    [[ $(kline child) == "openblas: Prescott kernels (OPENBLAS_CORETYPE from the environment); "* ]] &&
        ok "kernels_marker_of_another_set_is_not_read" || bad "kernels_marker_of_another_set_is_not_read" "$(kline child)"
fi

finish
