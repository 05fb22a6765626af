#!/usr/bin/env bash
# scripts/multi30k_data.sh [DIR] (make multi30k-data): puts Multi30k task 1, German and
# English (train, val, test_2016_flickr, test_2017_flickr, test_2017_mscoco), decompressed,
# into DIR (default data/multi30k, git-ignored), taking each file from the first source
# there is:
#   1. QKV_MULTI30K=FOLDER: a copy the user names, holding the decompressed files;
#   2. ../shared/corpora/multi30k beside the project, when it is there;
#   3. a download of FILE.gz from QKV_MULTI30K_URL (default: the dataset repository's
#      data/task1/raw/, github.com/multi30k/dataset, branch master; a mirror of that folder,
#      or a file:// one, will do), decompressed.
# Every file is checked against scripts/multi30k.sha256 (the checksums of the decompressed
# files), and that file against the checksum written below: an edited copy is refused. A
# file already in DIR with the right checksum is kept, so a run after a failure fetches only
# what is still missing. Any failure (no network, an HTTP error, a cut download, a wrong
# checksum) is one line on stderr naming the file and what to do, exit 1 (2 for a wrong
# argument or folder), and leaves no partial file in DIR.
# QKV_MULTI30K_SUMS=FILE checks against FILE instead, unpinned: for the tests, which serve
# small files of their own, and for mirrors of other files.
# Needs curl (for a download; make deps installs it), gzip and sha256sum.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# sha256 of scripts/multi30k.sha256 as the project keeps it
sums_pin=bf5ca3800dd6a5e64b86a0f9792a9ebaf0f3e498df7c2b7550b198bf9b0be5e7
names=(train val test_2016_flickr test_2017_flickr test_2017_mscoco)
url=${QKV_MULTI30K_URL:-https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw}
url=${url%/}
shared=$(dirname "$root")/shared/corpora/multi30k

die() { # die EXIT MESSAGE: the one line, and nothing partial left behind
    echo "qkv: multi30k: $2" >&2
    exit "$1"
}
[[ $# -le 1 ]] || die 2 "usage: scripts/multi30k_data.sh [DIR] (default data/multi30k)"
dest=${1:-$root/data/multi30k}
mkdir -p "$dest" || die 2 "cannot make the folder '$dest'"
trap 'rm -f "$dest"/.*.part' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [[ -n ${QKV_MULTI30K_SUMS:-} ]]; then
    sums=$QKV_MULTI30K_SUMS
    [[ -f $sums ]] || die 2 "QKV_MULTI30K_SUMS: no file '$sums'"
else
    sums=$root/scripts/multi30k.sha256
    [[ $(sha256sum <"$sums" 2>/dev/null) == "$sums_pin  -" ]] ||
        die 1 "$sums is not the file the project keeps (edited?): restore it (git checkout -- scripts/multi30k.sha256)"
fi
# want NAME: NAME's checksum in the sums file
want() { awk -v n="$1" '$2 == n && length($1) == 64 && $1 ~ /^[0-9a-f]+$/ { print $1; exit }' "$sums"; }
sum_of() { sha256sum <"$1" | cut -d' ' -f1; }
# one line of a tool's stderr, its own name dropped
said() { tail -n 1 "$1" | sed -E 's/^(curl: \([0-9]+\) |gzip: (stdin: )?)//'; }

from=""
if [[ -n ${QKV_MULTI30K:-} ]]; then
    from=$QKV_MULTI30K
    [[ -d $from ]] || die 2 "QKV_MULTI30K: '$from' is not a folder (it names a folder holding train.de, train.en, ...)"
elif [[ -d $shared ]]; then
    from=$shared
fi
if [[ -z $from ]]; then
    command -v curl >/dev/null || die 1 "curl is not installed: make deps installs it (or set QKV_MULTI30K to a folder holding the corpus)"
fi

kept=0
fetched=0
for n in "${names[@]}"; do
    for lang in de en; do
        f=$n.$lang
        sum=$(want "$f")
        [[ -n $sum ]] || die 1 "$sums: no checksum for $f"
        if [[ -f $dest/$f && $(sum_of "$dest/$f") == "$sum" ]]; then
            kept=$((kept + 1))
            continue
        fi
        part=$dest/.$f.part
        if [[ -n $from ]]; then
            where=$from/$f
            [[ -f $where && -r $where ]] ||
                die 1 "no readable $where: put the corpus's decompressed files there, or point QKV_MULTI30K at a folder that holds them"
            # a copy of the bytes alone: the folder's own files stay writable, whatever the source's modes
            cat <"$where" >"$part" || die 1 "cannot copy $where to $dest"
            [[ $(sum_of "$part") == "$sum" ]] ||
                die 1 "$where does not match its checksum in $sums: it is not this corpus's file (replace it with the dataset's own, or point QKV_MULTI30K at a copy that is)"
        else
            where=$url/$f.gz
            curl -fsS -L --connect-timeout 20 --max-time 900 --retry 2 -o "$dest/.$f.gz.part" "$where" 2>"$dest/.err.part" ||
                die 1 "cannot download $where ($(said "$dest/.err.part")): check the network and run make multi30k-data again, or set QKV_MULTI30K_URL to a mirror or QKV_MULTI30K to a folder holding the corpus"
            gzip -dc <"$dest/.$f.gz.part" >"$part" 2>"$dest/.err.part" ||
                die 1 "$where is not a whole gzip file ($(said "$dest/.err.part")): the download was cut short or is not the dataset's; run make multi30k-data again"
            [[ $(sum_of "$part") == "$sum" ]] ||
                die 1 "$where does not decompress to the $f of $sums: the server holds other files; run make multi30k-data again, or set QKV_MULTI30K_URL to a mirror of the dataset's data/task1/raw"
        fi
        mv -f "$part" "$dest/$f" || die 1 "cannot write $dest/$f"
        fetched=$((fetched + 1))
        echo "multi30k: $f from $where, checked"
    done
done
echo "multi30k: $dest holds the corpus ($fetched files fetched, $kept kept; all checked against $sums)"
