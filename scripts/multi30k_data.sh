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
# checksum, a mirror that stops sending, a full disk) is one line on stderr naming the file
# and what to do, exit 1 (2 for a wrong argument, a folder that cannot be written, or an
# entry of DIR in a file's place that is no file), and leaves no partial file in DIR.
# QKV_MULTI30K_SUMS=FILE checks against FILE instead, unpinned: for the tests, which serve
# small files of their own, and for mirrors of other files. QKV_MULTI30K_STALL_S (default
# 50): a download that receives nothing for that long is tried once more, then given up.
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
stall=${QKV_MULTI30K_STALL_S:-50}
[[ $stall =~ ^[1-9][0-9]{0,3}$ ]] || die 2 "QKV_MULTI30K_STALL_S: '$stall' is not a number of seconds (1 to 9999)"
# reason TEXT: the cause that ends a tool's last line of message ("bash: line 3: /x/y:
# Read-only file system" -> "Read-only file system"); curl's, without "curl: (N) "
reason() { tail -n 1 <<<"$1" | sed -E 's/^.*: ([^:]+)$/\1/'; }
curl_said() { tail -n 1 <<<"$1" | sed -E 's/^curl: \([0-9]+\) //'; }
msg=$(mkdir -p -- "$dest" 2>&1) || die 2 "cannot make the folder '$dest' ($(reason "$msg"))"
trap 'rm -f "$dest"/.*.part' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# A folder that takes no new file (a read-only mount, a folder not ours) is said once, now.
msg=$( { : >"$dest/.probe.part"; } 2>&1) ||
    die 2 "cannot write into $dest ($(reason "$msg")): name a folder that can be written (scripts/multi30k_data.sh DIR)"
rm -f "$dest/.probe.part"
# write_fault: after a tool failed, why writing into $dest fails, if it does (a full disk,
# the tool's own message lost or vague): a 64 KiB probe's reason, or nothing
write_fault() {
    local m
    m=$( { head -c 65536 /dev/zero >"$dest/.probe.part"; } 2>&1) && m=""
    rm -f "$dest/.probe.part"
    [[ -n $m ]] && reason "$m"
}
# die_unwritten FILE: the disk's fault, when it is one (returns when it is not)
die_unwritten() {
    local fault
    fault=$(write_fault)
    [[ -z $fault ]] || die 1 "cannot write $1 into $dest: $fault (free some space there, or name another folder)"
}

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
# every file's place in $dest holds a file or nothing: a folder there would take the file
# into itself, and report the corpus there every run after
for n in "${names[@]}"; do
    for lang in de en; do
        f=$dest/$n.$lang
        [[ ! -e $f && ! -L $f ]] || [[ -f $f && ! -L $f ]] ||
            die 2 "$f is not a file ($(stat -c %F -- "$f" 2>/dev/null)): move it away, and run this again"
    done
done

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
            msg=$( { cat <"$where" >"$part"; } 2>&1) || { die_unwritten "$f"; die 1 "cannot copy $where to $dest ($(reason "$msg"))"; }
            [[ $(sum_of "$part") == "$sum" ]] ||
                die 1 "$where does not match its checksum in $sums: it is not this corpus's file (replace it with the dataset's own, or point QKV_MULTI30K at a copy that is)"
        else
            where=$url/$f.gz
            # the messages are kept in memory: a file for them on a full disk would be empty
            msg=$(curl -fsS -L --connect-timeout 20 --max-time 900 --speed-limit 1 --speed-time "$stall" --retry 1 \
                -o "$dest/.$f.gz.part" "$where" 2>&1)
            rc=$?
            if [[ $rc -eq 23 ]]; then die_unwritten "$f.gz"; fi
            [[ $rc -ne 28 ]] || die 1 "$where: the mirror sent nothing for $stall s, twice (or took over 15 minutes): try again later, or set QKV_MULTI30K_URL to another mirror or QKV_MULTI30K to a folder holding the corpus"
            [[ $rc -eq 0 ]] ||
                die 1 "cannot download $where ($(curl_said "$msg")): check the network and run make multi30k-data again, or set QKV_MULTI30K_URL to a mirror or QKV_MULTI30K to a folder holding the corpus"
            msg=$( { gzip -dc <"$dest/.$f.gz.part" >"$part"; } 2>&1) || {
                die_unwritten "$f"
                die 1 "$where is not a whole gzip file ($(reason "$msg")): the download was cut short or is not the dataset's; run make multi30k-data again"
            }
            [[ $(sum_of "$part") == "$sum" ]] ||
                die 1 "$where does not decompress to the $f of $sums: the server holds other files; run make multi30k-data again, or set QKV_MULTI30K_URL to a mirror of the dataset's data/task1/raw"
        fi
        msg=$(mv -fT -- "$part" "$dest/$f" 2>&1) || die 1 "cannot write $dest/$f ($(reason "$msg"))"
        fetched=$((fetched + 1))
        echo "multi30k: $f from $where, checked"
    done
done
echo "multi30k: $dest holds the corpus ($fetched files fetched, $kept kept; all checked against $sums)"
