#!/usr/bin/env bash
# The corpus fetch (scripts/multi30k_data.sh, make multi30k-data), with no network: a
# mirror folder made here (ten small .gz files and their checksums, QKV_MULTI30K_SUMS)
# served by file:// and by a loopback HTTP server; then a wrong file, a cut .gz, a missing
# one, nothing listening, each one line and no partial file, and the run after the fix
# keeping what was good; a folder the user names, ../shared beside the project, and the
# kept checksum file refused when edited. The script runs from a copy of the project's
# scripts/ in a folder of its own, so that no ../shared of the real project's is seen.
# Ends with "N passed, N failed, N skipped".
set -u
cd "$(dirname "$0")/.."
server=""
source tests/lib.sh
scratch fetch
trap '[[ -n $server ]] && kill "$server" 2>/dev/null; rm -rf "$T"' EXIT

files=()
for n in train val test_2016_flickr test_2017_flickr test_2017_mscoco; do files+=("$n.de" "$n.en"); done
# the project: its two files in scripts/, nothing else; the corpus goes to proj/data/multi30k
mkdir -p "$T/proj/scripts" "$T/plain" "$T/mirror"
cp scripts/multi30k_data.sh scripts/multi30k.sha256 "$T/proj/scripts/"
fetch() { "$BOUNDED" "$T/proj/scripts/multi30k_data.sh"; }
fetch_from() { QKV_MULTI30K_URL=$1 fetch; }                                 # fetch_from URL
fetch_named() { QKV_MULTI30K=$1 QKV_MULTI30K_URL=file://$T/nowhere fetch; } # fetch_named FOLDER
# fetch_kept_sums URL: checked against the project's own checksum file
fetch_kept_sums() { (unset QKV_MULTI30K_SUMS && fetch_from "$1"); }
got=$T/proj/data/multi30k
for f in "${files[@]}"; do
    printf '%s, line %d: ein Hund läuft über die Wiese\n' "$f" 1 2 3 >"$T/plain/$f"
    gzip -c "$T/plain/$f" >"$T/mirror/$f.gz"
done
(cd "$T/plain" && sha256sum "${files[@]}") >"$T/sums"
export QKV_MULTI30K_SUMS=$T/sums

# same_as_plain: every file fetched, equal to the one it was made from, nothing partial
same_as_plain() {
    local f
    for f in "${files[@]}"; do cmp -s "$got/$f" "$T/plain/$f" || return 1; done
    [[ -z $(find "$got" -name '*.part') ]]
}
# nothing_of FILE: neither FILE nor any partial file in the folder
nothing_of() { [[ ! -e $got/$1 && -z $(find "$got" -name '*.part') ]]; }
# stamps: each file's inode and modification time (a kept file keeps both)
stamps() { (cd "$got" && stat -c '%n %i %Y.%y' "${files[@]}" 2>&1); }

# ---- file:// -------------------------------------------------------------------------------
if fetch_from "file://$T/mirror" >"$T/out" 2>&1 && same_as_plain &&
    grep -q "10 files fetched, 0 kept" "$T/out"; then
    ok fetch_from_a_file_url
else
    bad fetch_from_a_file_url "$(tail -n 3 "$T/out")"
fi
# a second run: nothing fetched (the mirror is gone), every file kept as it was
before=$(stamps)
if fetch_from "file://$T/nowhere" >"$T/out" 2>&1 && same_as_plain && [[ $(stamps) == "$before" ]] &&
    grep -q "0 files fetched, 10 kept" "$T/out"; then
    ok fetch_again_keeps_what_is_there
else
    bad fetch_again_keeps_what_is_there "$(tail -n 3 "$T/out")"
fi
# a file of the folder that is not the corpus's is fetched again
echo "something else" >"$got/val.de"
fetch_from "file://$T/mirror" >"$T/out" 2>&1 && same_as_plain && grep -q "1 files fetched, 9 kept" "$T/out" &&
    ok fetch_replaces_a_wrong_file_in_the_folder || bad fetch_replaces_a_wrong_file_in_the_folder "$(tail -n 3 "$T/out")"

# ---- failures, each one line naming the file, and nothing partial left -------------------
rm -rf "$got"
cp -r "$T/mirror" "$T/bad"
echo "not the corpus" | gzip -c >"$T/bad/test_2017_mscoco.en.gz"
expect_error fetch_wrong_checksum_is_one_line 1 "test_2017_mscoco\.en\.gz does not decompress to the test_2017_mscoco\.en of .*sums" \
    fetch_from "file://$T/bad"
nothing_of test_2017_mscoco.en && [[ -f $got/test_2017_mscoco.de ]] && ok fetch_wrong_checksum_leaves_no_file ||
    bad fetch_wrong_checksum_leaves_no_file "$(ls -A "$got")"
# the run after the fix takes the good files as they are: the mirror now holds that file alone
before=$(stamps | grep -v test_2017_mscoco.en)
mkdir "$T/fix" && cp "$T/mirror/test_2017_mscoco.en.gz" "$T/fix/"
fetch_from "file://$T/fix" >"$T/out" 2>&1 && same_as_plain &&
    [[ $(stamps | grep -v test_2017_mscoco.en) == "$before" ]] && grep -q "1 files fetched, 9 kept" "$T/out" &&
    ok fetch_after_the_fix_keeps_the_good_files || bad fetch_after_the_fix_keeps_the_good_files "$(tail -n 3 "$T/out")"

rm -rf "$got"
cp "$T/mirror/test_2017_mscoco.en.gz" "$T/bad/"
head -c 30 "$T/mirror/val.en.gz" >"$T/bad/val.en.gz"
expect_error fetch_cut_gzip_is_one_line 1 "val\.en\.gz is not a whole gzip file \(unexpected end of file\).*again" \
    fetch_from "file://$T/bad"
nothing_of val.en && ok fetch_cut_gzip_leaves_no_file || bad fetch_cut_gzip_leaves_no_file "$(ls -A "$got")"

cp "$T/mirror/val.en.gz" "$T/bad/"
rm "$T/bad/test_2016_flickr.de.gz"
expect_error fetch_missing_file_url_is_one_line 1 "cannot download file://.*/test_2016_flickr\.de\.gz \(.*\): check the network" \
    fetch_from "file://$T/bad"
nothing_of test_2016_flickr.de && ok fetch_missing_file_leaves_no_file || bad fetch_missing_file_leaves_no_file "$(ls -A "$got")"

# ---- a loopback HTTP server ----------------------------------------------------------------
rm -rf "$got"
"$BOUNDED" /usr/bin/python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$T/bad" >"$T/http.log" 2>&1 &
server=$!
if wait_for "$T/http.log" "^Serving HTTP on 127.0.0.1 port [0-9]" 30; then
    port=$(sed -nE 's/^Serving HTTP on 127.0.0.1 port ([0-9]+).*/\1/p' "$T/http.log" | head -n 1)
    # the mirror without test_2016_flickr.de.gz: a 404
    expect_error fetch_http_404_is_one_line 1 "cannot download http://127.0.0.1:$port/test_2016_flickr\.de\.gz \(.*404.*\)" \
        fetch_from "http://127.0.0.1:$port"
    nothing_of test_2016_flickr.de && [[ -f $got/val.en ]] && ok fetch_http_404_leaves_no_file ||
        bad fetch_http_404_leaves_no_file "$(ls -A "$got")"
    # the fix on the server; the next run fetches only the files still missing
    cp "$T/mirror/test_2016_flickr.de.gz" "$T/bad/"
    fetch_from "http://127.0.0.1:$port/" >"$T/out" 2>&1 && same_as_plain &&
        grep -q "6 files fetched, 4 kept" "$T/out" && ok fetch_over_http || bad fetch_over_http "$(tail -n 3 "$T/out")"
    rm -rf "$got"
    fetch_from "http://127.0.0.1:$port" >"$T/out" 2>&1 && same_as_plain &&
        grep -q "10 files fetched, 0 kept" "$T/out" && ok fetch_all_over_http || bad fetch_all_over_http "$(tail -n 3 "$T/out")"
    # the server gone: nothing listens on its port
    kill "$server" && wait "$server" 2>/dev/null
    server=""
    rm -rf "$got"
    expect_error fetch_nothing_listening_is_one_line 1 "cannot download http://127.0.0.1:$port/train\.de\.gz \(.*[Cc]onnect.*\): check the network" \
        fetch_from "http://127.0.0.1:$port"
    nothing_of train.de && ok fetch_nothing_listening_leaves_no_file ||
        bad fetch_nothing_listening_leaves_no_file "$(ls -A "$got")"
else
    bad fetch_over_http "the loopback server did not start: $(tail -n 3 "$T/http.log")"
fi

# ---- a mirror that stalls, a folder in a file's place, a read-only folder, a full disk ------
# a server that sends the headers and 100 bytes of a file, then nothing: given up after
# QKV_MULTI30K_STALL_S seconds twice (once more tried), one line naming the file and mirror
rm -rf "$got"
cat >"$T/stall.py" <<'PYEOF'
import http.server, sys, time
class Stall(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "100000")
        self.end_headers()
        self.wfile.write(b"\x1f\x8b" + b"x" * 98)
        self.wfile.flush()
        time.sleep(60)
    def log_message(self, *a): pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Stall)
print("port", s.server_address[1], flush=True)
s.serve_forever()
PYEOF
"$BOUNDED" /usr/bin/python3 -u "$T/stall.py" >"$T/stall.log" 2>&1 &
stalling=$!
if wait_for "$T/stall.log" "^port [0-9]" 30; then
    port=$(sed -nE 's/^port ([0-9]+)/\1/p' "$T/stall.log")
    start=$SECONDS
    QKV_MULTI30K_STALL_S=2 expect_error fetch_stalled_mirror_gives_up 1 \
        "^qkv: multi30k: http://127\.0\.0\.1:$port/train\.de\.gz: the mirror sent nothing for 2 s, twice" \
        fetch_from "http://127.0.0.1:$port"
    took=$((SECONDS - start))
    ((took < 20)) && nothing_of train.de && ok fetch_stalled_mirror_gives_up_in_time ||
        bad fetch_stalled_mirror_gives_up_in_time "$took s; $(ls -A "$got")"
else
    bad fetch_stalled_mirror_gives_up "the stalling server did not start: $(tail -n 3 "$T/stall.log")"
fi
kill "$stalling" 2>/dev/null
wait "$stalling" 2>/dev/null
# a folder where a file goes: refused, naming it, every run (it was taken in and "done")
rm -rf "$got"
mkdir -p "$got/val.en"
expect_error fetch_folder_for_a_file_refused 2 "^qkv: multi30k: .*/val\.en is not a file \(directory\): move it away" \
    fetch_from "file://$T/mirror"
[[ -z $(ls -A "$got/val.en") && ! -e $got/train.de ]] && ok fetch_folder_for_a_file_fetches_nothing ||
    bad fetch_folder_for_a_file_fetches_nothing "$(ls -AR "$got")"
# a read-only folder and a full disk, each a mount of its own in a mount namespace of the
# test's (root and unshare(1) needed: where they are missing, these are skipped)
rm -rf "$got"
mkdir -p "$got"
if [[ $(id -u) -eq 0 ]] && "$BOUNDED" unshare -m true 2>/dev/null; then
    # in_mount MOUNT-ARGS... -- : the fetch from the mirror, with $got mounted so
    in_mount() { "$BOUNDED" unshare -m bash -c 'mount "$@" "$0" "$0" 2>/dev/null || mount "$@" none "$0" || exit 99
        QKV_MULTI30K_URL=$URL QKV_MULTI30K_SUMS=$SUMS "$FETCH"' "$got" "$@"; }
    export FETCH=$T/proj/scripts/multi30k_data.sh URL=file://$T/mirror SUMS=$QKV_MULTI30K_SUMS
    expect_error fetch_read_only_folder_is_one_line 2 \
        "^qkv: multi30k: cannot write into $got \(Read-only file system\): name a folder that can be written" \
        in_mount --bind -o ro
    # a mirror whose train.de does not compress: its .gz overfills a 64 KiB disk
    mkdir -p "$T/big"
    cp "$T/mirror/"*.gz "$T/big/"
    head -c 150000 /dev/urandom | base64 >"$T/big.train.de"
    gzip -c "$T/big.train.de" >"$T/big/train.de.gz"
    sed "s/^[0-9a-f]*  train\.de\$/$(sha256sum <"$T/big.train.de" | cut -d' ' -f1)  train.de/" "$T/sums" >"$T/big.sums"
    URL=file://$T/big SUMS=$T/big.sums expect_error fetch_full_disk_is_one_line 1 \
        "^qkv: multi30k: cannot write train\.de\.gz into $got: No space left on device \(free some space there" \
        in_mount -t tmpfs -o size=64k
    # decompressed, the file fills the disk: gzip's write fails, and that is said too
    head -c 40000 /dev/zero >"$T/big.train.de"
    gzip -c "$T/big.train.de" >"$T/big/train.de.gz"
    sed "s/^[0-9a-f]*  train\.de\$/$(sha256sum <"$T/big.train.de" | cut -d' ' -f1)  train.de/" "$T/sums" >"$T/big.sums"
    URL=file://$T/big SUMS=$T/big.sums expect_error fetch_full_disk_decompressing_is_one_line 1 \
        "^qkv: multi30k: cannot write train\.de into $got: No space left on device" \
        in_mount -t tmpfs -o size=32k
else
    skip fetch_read_only_and_full_disk "needs root and unshare -m"
fi

# ---- a folder the user names, ../shared beside the project ---------------------------------
rm -rf "$got"
fetch_named "$T/plain" >"$T/out" 2>&1 && same_as_plain &&
    ok fetch_from_a_named_folder || bad fetch_from_a_named_folder "$(tail -n 3 "$T/out")"
rm -rf "$got"
cp -r "$T/plain" "$T/wrong"
echo "a line of its own" >>"$T/wrong/train.en"
expect_error fetch_named_folder_wrong_file_is_one_line 1 "wrong/train\.en does not match its checksum" \
    fetch_named "$T/wrong"
nothing_of train.en && ok fetch_named_folder_wrong_file_leaves_no_file ||
    bad fetch_named_folder_wrong_file_leaves_no_file "$(ls -A "$got")"
expect_error fetch_named_folder_missing_is_one_line 2 "QKV_MULTI30K: '.*/none' is not a folder" \
    fetch_named "$T/none"
rm -rf "$got"
mkdir -p "$T/shared/corpora"
cp -r "$T/plain" "$T/shared/corpora/multi30k"
fetch_from "file://$T/nowhere" >"$T/out" 2>&1 && same_as_plain && grep -q "from $T/shared/corpora/multi30k/" "$T/out" &&
    ok fetch_from_shared_beside_the_project || bad fetch_from_shared_beside_the_project "$(tail -n 3 "$T/out")"
rm -rf "$T/shared"

# ---- the kept checksum file --------------------------------------------------------------
# as kept, it is accepted (the fault found is the mirror's small files, not the sums file) ...
rm -rf "$got"
expect_error fetch_kept_checksums_accepted 1 "train\.de\.gz does not decompress to the train\.de of .*proj/scripts/multi30k\.sha256" \
    fetch_kept_sums "file://$T/mirror"
# ... and edited, refused before anything is fetched
sed -i '1s/^[0-9a-e]/f/; t; 1s/^f/0/' "$T/proj/scripts/multi30k.sha256"
expect_error fetch_edited_checksums_refused 1 "multi30k\.sha256 is not the file the project keeps \(edited\?\): restore it" \
    fetch_kept_sums "file://$T/mirror"
[[ -z $(ls -A "$got" 2>/dev/null) ]] && ok fetch_edited_checksums_fetch_nothing ||
    bad fetch_edited_checksums_fetch_nothing "$(ls -A "$got")"

# ---- the real corpus, where it sits beside the project (CI) ----------------------------------
# Not a test a bare clone lacks: there the fixtures above cover every path.
if [[ -f ../shared/corpora/multi30k/train.de ]]; then
    (unset QKV_MULTI30K_SUMS && QKV_MULTI30K_URL=file://$T/nowhere "$BOUNDED" scripts/multi30k_data.sh "$T/real") \
        >"$T/out" 2>&1 && [[ $(wc -l <"$T/real/train.de") -eq 29000 ]] &&
        ok fetch_the_corpus_beside_the_project || bad fetch_the_corpus_beside_the_project "$(tail -n 3 "$T/out")"
fi

finish
