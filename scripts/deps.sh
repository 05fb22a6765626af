#!/usr/bin/env bash
# Installs the Debian packages qkv needs, only those missing. Silent when all are there;
# otherwise one line says what it installs, and apt's own output goes to a log that is
# shown (its end) only if apt fails.
# Uses sudo when not root. QKV_EXTRA_PACKAGES adds more (e.g. for optional tools).
# --with-browser also tries Chromium, for the attention viewer's browser test;
# --with-mpi also tries Open MPI (openmpi-bin, libopenmpi-dev), for training over MPI
# ranks and its tests. Failing either is a warning (the test then says loudly that it was
# skipped, and make builds without MPI), not an error.
# --with-tsan installs gcc's ThreadSanitizer runtime (libtsan2), for make tsan.
# --with-fuzz installs clang and its runtime libraries (libFuzzer, the sanitizers'
# runtimes: only recommended by clang, so named here), for make fuzz; failing is an error.
# --with-format installs clang-format (Debian 12's: version 14, which .clang-format is
# written for), for tests/format.sh (make lint) and make format; failing is a warning.
# --with-onnx installs what tests/onnx.sh checks an exported model with: Debian's
# python3-onnx (the checker and shape inference; about 4 MB), npm's onnxruntime-node 1.30.0
# and @huggingface/transformers 4.3.2 (transformers.js, which brings onnxruntime-web and
# sharp) as tests/onnx/package.json names them: a 173 MB download, 488 MB unpacked (the
# runtime alone was 116 and 291 MB), into the git-ignored tests/onnx/node_modules. The CPU
# library ships in onnxruntime-node's package: no install script is run (the runtime's
# fetches GPU libraries), so nothing is fetched but the packages. Failing is a warning (the
# tests say loudly that they were skipped).
set -euo pipefail

# curl: the corpus fetch (scripts/multi30k_data.sh) and its tests (tests/fetch.sh)
packages=(build-essential pkg-config libopenblas-dev libyaml-dev libjansson-dev libsentencepiece-dev libmicrohttpd-dev curl)
# shellcheck disable=SC2206
packages+=(${QKV_EXTRA_PACKAGES:-})

# npm's onnxruntime-node and @huggingface/transformers at the versions tests/onnx/package.json
# names, unless both are there
install_onnx_node_modules() {
    local dir ort tjs
    dir="$(dirname "$0")/../tests/onnx"
    ort=$(sed -n 's/.*"onnxruntime-node": "\(.*\)".*/\1/p' "$dir/package.json")
    tjs=$(sed -n 's/.*"@huggingface\/transformers": "\(.*\)".*/\1/p' "$dir/package.json")
    grep -qs "\"version\": \"$ort\"" "$dir/node_modules/onnxruntime-node/package.json" &&
        grep -qs "\"version\": \"$tjs\"" "$dir/node_modules/@huggingface/transformers/package.json" && return 0
    command -v npm >/dev/null || QKV_EXTRA_PACKAGES=npm "$0" || return 1
    echo "qkv: installing onnxruntime-node $ort and @huggingface/transformers $tjs into tests/onnx/node_modules (npm)"
    local log
    log=$(mktemp --tmpdir qkv-npm.XXXXXX)
    if ! (cd "$dir" && ONNXRUNTIME_NODE_INSTALL=skip npm install --ignore-scripts --no-package-lock --no-audit \
        --no-fund) >"$log" 2>&1; then
        tail -n 5 "$log" >&2
        return 1
    fi
    rm -f "$log"
}

if [[ $# -gt 0 ]]; then
    "$0" || exit 1
    for opt in "$@"; do
        case $opt in
        --with-browser)
            QKV_EXTRA_PACKAGES=chromium "$0" ||
                echo "qkv: warning: could not install chromium; the browser test will be skipped" >&2 ;;
        --with-mpi)
            QKV_EXTRA_PACKAGES="openmpi-bin libopenmpi-dev" "$0" ||
                echo "qkv: warning: could not install Open MPI; qkv is built without MPI and its tests are skipped" >&2 ;;
        --with-tsan)
            QKV_EXTRA_PACKAGES="libtsan2" "$0" || exit 1 ;;
        --with-fuzz)
            QKV_EXTRA_PACKAGES="clang libclang-rt-14-dev" "$0" || exit 1 ;;
        --with-format)
            QKV_EXTRA_PACKAGES=clang-format "$0" ||
                echo "qkv: warning: could not install clang-format; the format check will be skipped" >&2 ;;
        --with-onnx)
            QKV_EXTRA_PACKAGES=python3-onnx "$0" ||
                echo "qkv: warning: could not install python3-onnx; the ONNX checker tests will be skipped" >&2
            install_onnx_node_modules ||
                echo "qkv: warning: could not install onnxruntime-node and transformers.js; the ONNX runtime tests will be skipped" >&2 ;;
        *) echo "qkv: scripts/deps.sh: unknown option '$opt' (--with-browser, --with-mpi, --with-tsan, --with-fuzz, --with-format, --with-onnx)" >&2; exit 2 ;;
        esac
    done
    exit 0
fi

missing=()
for p in "${packages[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    [[ $status == "install ok installed" ]] || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

echo "qkv: installing missing Debian packages: ${missing[*]}"
sudo=""
if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "qkv: not root and no sudo; install: ${missing[*]}" >&2; exit 1; }
    sudo="sudo"
fi
# env: sudo would drop DEBIAN_FRONTEND from the environment
apt_get() { $sudo env DEBIAN_FRONTEND=noninteractive apt-get -qq "$@" </dev/null; }
log=$(mktemp --tmpdir qkv-deps.XXXXXX)
if ! { apt_get update && apt_get install -y --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
    tail -n 5 "$log" >&2
    echo "qkv: could not install ${missing[*]} (apt's output: $log)" >&2
    exit 1
fi
rm -f "$log"
