#!/usr/bin/env bash
# deps.sh - install the Debian packages blockdraft builds and tests with,
# only those that are missing. Runs apt-get as root (or through sudo).
set -euo pipefail
pkgs=(build-essential pkg-config libcmocka-dev libjansson-dev libyaml-dev
      libcurl4-openssl-dev libssl-dev libmicrohttpd-dev clang libclang-rt-14-dev
      python3 nodejs npm curl
      gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user libcmocka-dev:arm64)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# node and npm may come from outside Debian (e.g. a preinstalled toolchain).
if command -v node >/dev/null && command -v npm >/dev/null; then
    filtered=()
    for p in "${missing[@]}"; do [[ "$p" == nodejs || "$p" == npm ]] || filtered+=("$p"); done
    missing=("${filtered[@]+"${filtered[@]}"}")
fi
if command -v python3 >/dev/null; then
    filtered=()
    for p in "${missing[@]+"${missing[@]}"}"; do [[ "$p" == python3 ]] || filtered+=("$p"); done
    missing=("${filtered[@]+"${filtered[@]}"}")
fi
[ ${#missing[@]} -eq 0 ] && exit 0
echo "deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
# cmocka for the aarch64 cross build of the unit tests (tests/e2e/cross_aarch64.sh)
# comes from Debian's arm64 packages: multiarch
if [[ " ${missing[*]} " == *":arm64 "* ]] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
    $SUDO dpkg --add-architecture arm64
fi
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
