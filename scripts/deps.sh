#!/usr/bin/env bash
# Installs the Debian packages qkv needs, only those missing. A no-op when all are there.
# Uses sudo when not root. QKV_EXTRA_PACKAGES adds more (e.g. for optional tools).
# --with-browser also tries Chromium, for the attention viewer's browser test; failing
# that is a warning (the test then says loudly that it was skipped), not an error.
set -euo pipefail

packages=(build-essential pkg-config libopenblas-dev libyaml-dev libjansson-dev libsentencepiece-dev)
# shellcheck disable=SC2206
packages+=(${QKV_EXTRA_PACKAGES:-})

if [[ ${1:-} == --with-browser ]]; then
    "$0" || exit 1
    QKV_EXTRA_PACKAGES=chromium "$0" ||
        echo "qkv: warning: could not install chromium; the browser test will be skipped" >&2
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
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
