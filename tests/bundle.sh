#!/usr/bin/env bash
# make bundle: the tarball unpacked into an empty directory runs through its launcher with
# no LD_LIBRARY_PATH and a bare environment: qkv help, a short training run and a
# translation; every library the process maps is the bundle's; and the paths where qkv
# starts itself again (an address-space limit, a kernel set chosen for OpenBLAS) go through
# the bundled loader too. Ends with "N passed, N failed, N skipped".
set -u
cd "$(dirname "$0")/.."
source tests/lib.sh
scratch bundle

if ! out=$("$BOUNDED" scripts/bundle.sh "$T/out" 2>&1); then
    bad bundle_builds "$(tail -5 <<<"$out")"
    finish
    exit
fi
ok bundle_builds
mkdir "$T/empty" && tar -C "$T/empty" -xzf "$T/out/qkv-bundle.tar.gz"
B=$T/empty/qkv-bundle
cd "$T/empty" || exit 1
# bare: what a machine without qkv's libraries gives a process (PATH for the launcher's sh)
bare() { env -i PATH=/usr/bin:/bin HOME="$T" "$BOUNDED" "$@"; }

out=$(bare "$B/qkv" help 2>&1)
grep -q '^  train ' <<<"$out" && ok bundle_help || bad bundle_help "$out"
bare "$B/qkv" toy-data data --train 800 --valid 50 --test 20 >/dev/null 2>&1
printf 'name: t\ndata:\n  train: {src: data/train.src, tgt: data/train.tgt}\n  valid: {src: data/valid.src, tgt: data/valid.tgt}\nmodel: {d_model: 32, heads: 4, d_ff: 64, encoder_layers: 1, decoder_layers: 1}\ntrain: {steps: 40, batch_tokens: 1024, log_every: 20, valid_every: 40, threads: 2}\n' >t.yaml
out=$(bare "$B/qkv" train t.yaml --set run_dir=run 2>&1)
[[ -f run/ckpt/step-000040.safetensors ]] && grep -q 'done: step 40 of 40' <<<"$out" && ok bundle_trains || bad bundle_trains "$(tail -3 <<<"$out")"
head -5 data/test.src >five.src
bare "$B/qkv" translate run <five.src >five.hyp 2>five.err
[[ $? -eq 0 && $(wc -l <five.hyp) -eq 5 ]] && ok bundle_translates || bad bundle_translates "$(cat five.err)"
# the libraries a running qkv has mapped: the bundle's alone
env -i PATH=/usr/bin:/bin HOME="$T" "$BOUNDED" "$B/qkv" train t.yaml --set run_dir=run2 --set train.steps=4000 >/dev/null 2>&1 &
pid=$!
maps=""
# (env, bounded and the launcher each exec the next, and qkv's restarts exec too: one pid)
for _ in $(seq 100); do
    grep -q 'libopenblas' "/proc/$pid/maps" 2>/dev/null && maps=$(awk '$6 ~ /\.so/ {print $6}' "/proc/$pid/maps" | sort -u) && break
    sleep 0.1
done
kill -KILL $pid 2>/dev/null
wait $pid 2>/dev/null
foreign=$(grep -v "^$B/lib/" <<<"$maps")
[[ -n $maps && -z $foreign ]] && ok bundle_maps_only_its_libraries || bad bundle_maps_only_its_libraries "${foreign:-no maps read}"
# under an address-space limit qkv starts itself again with one OpenBLAS thread: through
# the bundled loader, as the launcher started it
out=$(bash -c "ulimit -v 700000; env -i PATH=/usr/bin:/bin \"$B/qkv\" help" 2>&1)
grep -q '^  train ' <<<"$out" && ok bundle_restart_under_address_limit || bad bundle_restart_under_address_limit "$out"
# where OpenBLAS picked a set weaker than the CPU runs, qkv starts itself again with a
# stronger one: through the bundled loader too (the test hook stands for a CPU OpenBLAS
# does not know; the set it would choose is whatever this CPU runs best)
out=$(env -i PATH=/usr/bin:/bin QKV_TEST_PRETEND_OPENBLAS_CHOSE=Prescott "$BOUNDED" "$B/qkv" train t.yaml --set run_dir=run3 --set train.steps=4 2>&1)
if grep -q 'OpenBLAS chose Prescott' <<<"$out"; then
    [[ -f run3/ckpt/step-000004.safetensors ]] && ok bundle_restart_with_chosen_kernels || bad bundle_restart_with_chosen_kernels "$(tail -3 <<<"$out")"
else
    [[ -f run3/ckpt/step-000004.safetensors ]] && ok "bundle_restart_with_chosen_kernels (this CPU runs no set above Prescott: nothing to choose)" ||
        bad bundle_restart_with_chosen_kernels "$(tail -3 <<<"$out")"
fi
finish
