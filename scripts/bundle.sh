#!/usr/bin/env bash
# make bundle: qkv that runs on an x86-64 Linux machine where nothing is installed (a
# cluster node without root, a fresh server): build/qkv-bundle.tar.gz holds
#   qkv-bundle/qkv          the launcher: qkv-bundle/qkv ARGS runs the bundled loader on the
#                           bundled libraries, whatever the machine has (LD_LIBRARY_PATH aside)
#   qkv-bundle/bin/qkv      qkv, built without MPI for BUNDLE_MARCH (default x86-64-v3: AVX2
#                           and FMA, any x86-64 CPU since 2013-2015; x86-64 for older ones)
#   qkv-bundle/lib/         every shared library it links (OpenBLAS, libyaml, jansson,
#                           SentencePiece, libmicrohttpd and theirs: libc, libstdc++, ...) and
#                           the dynamic loader, from this machine
#   qkv-bundle/configs/, qkv-bundle/scripts/   the configs, and the PyTorch peer of make
#                           bench (scripts/bench_torch.py and what it imports: PyTorch itself
#                           is the other machine's)
# Usage: scripts/bundle.sh [OUT_DIR] (default build); BUILD_DIR (default build/bundle) holds
# the bundle's own build.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build}
build=${BUILD_DIR:-build/bundle}
march=${BUNDLE_MARCH:-x86-64-v3}
make --no-print-directory -s BUILD="$build" MPI=0 CFLAGS="-O3 -march=$march -g" "$build/qkv"

stage=$(mktemp -d "${TMPDIR:-/tmp}/qkv-bundle.XXXXXX")
trap 'rm -rf "$stage"' EXIT
b=$stage/qkv-bundle
mkdir -p "$b/bin" "$b/lib" "$b/scripts"
cp "$build/qkv" "$b/bin/qkv"
# each library under the name the loader looks for (its soname), its symlinks followed
loader=
while read -r name arrow path _; do
    if [[ $arrow == "=>" && -f $path ]]; then cp -L "$path" "$b/lib/$name"
    elif [[ $name == /* && -f $name ]]; then loader=$name; cp -L "$name" "$b/lib/$(basename "$name")"
    fi
done < <(ldd "$build/qkv")
[[ -n $loader ]] || { echo "qkv: bundle: ldd named no dynamic loader for $build/qkv" >&2; exit 1; }
loader_name=$(basename "$loader")
cat >"$b/qkv" <<LAUNCH
#!/bin/sh
# qkv from this bundle: the bundled loader runs bin/qkv on the bundled libraries only
here=\$(cd "\$(dirname "\$0")" && pwd -P)
exec "\$here/lib/$loader_name" --library-path "\$here/lib" "\$here/bin/qkv" "\$@"
LAUNCH
chmod 755 "$b/qkv"
cp -r configs "$b/configs"
cp scripts/bench_torch.py scripts/qkv_torch.py scripts/parity.py "$b/scripts/"
cat >"$b/README" <<'TEXT'
qkv, with every library it needs. ./qkv help; ./qkv toy-data data/toy; ./qkv train configs/toy.yaml
The launcher runs bin/qkv through the bundled dynamic loader on lib/, never the machine's libraries.
TEXT
mkdir -p "$out"
tar -C "$stage" -czf "$out/qkv-bundle.tar.gz.tmp" qkv-bundle
mv "$out/qkv-bundle.tar.gz.tmp" "$out/qkv-bundle.tar.gz"
echo "wrote $out/qkv-bundle.tar.gz ($(du -h "$out/qkv-bundle.tar.gz" | cut -f1); $(ls "$b/lib" | wc -l) libraries, built for $march)"
