#!/usr/bin/env bash
# make multi30k: the real-corpus recipe. Trains configs/multi30k.yaml (German -> English on
# data/multi30k, fetched and checked first by scripts/multi30k_data.sh; a joint BPE model
# trained first) into runs/multi30k, then evaluates test_2016_flickr with the run's default
# decoding (beam 5 with the average of its last checkpoints, train.average_last) and with
# greedy search, and test_2017_mscoco, printing sacrebleu-identical BLEU and chrF with
# their signatures; scores the word alignments of val's first 40 pairs against
# data/multi30k-val40.align; prints ten translations beside their references. An existing run is
# resumed to its configured budget, not restarted. The recipe was chosen on val alone
# (scripts/sweep.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
QKV=${QKV:-build/qkv}
M30K=data/multi30k
RUN=runs/multi30k
scripts/multi30k_data.sh "$M30K"

if [[ -f $RUN/config.yaml ]]; then
    echo "== resuming $RUN"
    "$QKV" resume "$RUN"
else
    echo "== training configs/multi30k.yaml into $RUN"
    "$QKV" train configs/multi30k.yaml
fi

echo
echo "== test_2016_flickr, the run's default decoding: beam 5, length penalty 1.0, the average of its last checkpoints"
"$QKV" eval "$RUN" --src $M30K/test_2016_flickr.de --ref $M30K/test_2016_flickr.en
echo
echo "== test_2016_flickr, greedy search"
"$QKV" eval "$RUN" --src $M30K/test_2016_flickr.de --ref $M30K/test_2016_flickr.en --greedy
echo
echo "== test_2017_mscoco, the run's default decoding"
"$QKV" eval "$RUN" --src $M30K/test_2017_mscoco.de --ref $M30K/test_2017_mscoco.en

echo
echo "== word alignments of val's first 40 pairs against data/multi30k-val40.align (the default reading)"
head -n 40 $M30K/val.de >"$RUN/val40.de"
head -n 40 $M30K/val.en >"$RUN/val40.en"
"$QKV" align "$RUN" --src "$RUN/val40.de" --tgt "$RUN/val40.en" --gold data/multi30k-val40.align

echo
echo "== ten translations of test_2016_flickr beside their references"
head -n 10 $M30K/test_2016_flickr.de >"$RUN/sample.de"
"$QKV" translate "$RUN" <"$RUN/sample.de" >"$RUN/sample.hyp" 2>/dev/null
paste -d'\n' "$RUN/sample.de" "$RUN/sample.hyp" <(head -n 10 $M30K/test_2016_flickr.en) /dev/null |
    awk 'NR%4==1{print "  source:     " $0} NR%4==2{print "  qkv:        " $0} NR%4==3{print "  reference:  " $0} NR%4==0{print ""}'
