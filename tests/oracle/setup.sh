#!/usr/bin/env bash
# setup.sh - build bd-oracle, the llama.cpp reference harness, into
# $BD_BUILD/oracle/ (default: build/oracle/). Idempotent and cached.
#
#   1. npm installs node-llama-cpp@3.22.1 and its prebuilt CPU libraries
#      @node-llama-cpp/linux-x64@3.22.1 (llama.cpp release v0.5.0) with
#      --ignore-scripts: nothing is built from source, nothing is committed.
#   2. Checks out the headers (include/, ggml/include/, common/) from the
#      llama.cpp source bundle that node-llama-cpp ships
#      (llama/gitRelease.bundle) into $BD_BUILD/oracle/src/.
#   3. Compiles tests/oracle/oracle.c against the prebuilt shared libraries
#      with an rpath to them: $BD_BUILD/oracle/bd-oracle; and
#      tests/oracle/oracle_dflash.cpp (g++, libllama-common) into
#      $BD_BUILD/oracle/bd-oracle-dflash, llama.cpp's DFlash loop.
#
# Prints the path of bd-oracle on stdout last (bd-oracle-dflash is beside it). Any failure (npm cannot
# reach its registry, a missing file) exits non-zero with a message: for
# the tests that use the oracle this is a failure, not a skip.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BD_BUILD=${BD_BUILD:-$ROOT/build}
O="$BD_BUILD/oracle"
NLC_VERSION=3.22.1
LIBDIR="$O/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"
NLC="$O/node_modules/node-llama-cpp"
SRC="$O/src/llama.cpp"

die() { echo "oracle/setup.sh: $*" >&2; exit 1; }

mkdir -p "$O"
exec 9>"$O/.lock"
flock 9

# ---- 1. npm packages ----------------------------------------------------
have_pkgs() {
    [ -f "$NLC/package.json" ] && [ -f "$LIBDIR/libllama.v0.5.0.so" ] &&
        grep -q "\"version\": \"$NLC_VERSION\"" "$NLC/package.json"
}
if ! have_pkgs; then
    command -v npm >/dev/null || die "npm is not installed (apt-get install npm)"
    tmp="$O/npm.tmp"
    rm -rf "$tmp"
    mkdir -p "$tmp"
    echo '{"name":"bd-oracle-deps","private":true}' >"$tmp/package.json"
    echo "oracle/setup.sh: npm install node-llama-cpp@$NLC_VERSION (prebuilt CPU libraries)" >&2
    # --omit=optional skips the CUDA/Vulkan/other-platform binaries (~600 MB);
    # the linux-x64 CPU package is requested explicitly instead.
    if ! (cd "$tmp" && npm install --ignore-scripts --omit=optional --no-audit --no-fund \
            --no-package-lock --loglevel=error \
            "node-llama-cpp@$NLC_VERSION" "@node-llama-cpp/linux-x64@$NLC_VERSION" >&2); then
        die "npm install of node-llama-cpp@$NLC_VERSION failed (is the npm registry reachable?)"
    fi
    rm -rf "$O/node_modules"
    mv "$tmp/node_modules" "$O/node_modules"
    rm -rf "$tmp"
    have_pkgs || die "npm finished but $LIBDIR/libllama.v0.5.0.so is missing"
fi

# ---- 2. headers from the source bundle ------------------------------------
if [ ! -f "$SRC/include/llama.h" ] || [ ! -f "$SRC/common/speculative.h" ]; then
    bundle="$NLC/llama/gitRelease.bundle"
    [ -f "$bundle" ] || die "$bundle not found in node-llama-cpp"
    command -v git >/dev/null || die "git is not installed"
    rm -rf "$SRC"
    mkdir -p "$O/src"
    git clone -q --no-checkout "$bundle" "$SRC" >&2 || die "cannot clone $bundle"
    git -C "$SRC" -c advice.detachedHead=false checkout -q HEAD -- include ggml/include common vendor >&2 ||
        die "cannot check out headers from $bundle"
fi

# ---- 3. compile -------------------------------------------------------------
BIN="$O/bd-oracle"
if [ ! -x "$BIN" ] || [ "$ROOT/tests/oracle/oracle.c" -nt "$BIN" ] || [ "$0" -nt "$BIN" ]; then
    gcc -std=c11 -O2 -g -Wall -Wextra -D_GNU_SOURCE \
        -I"$SRC/include" -I"$SRC/ggml/include" \
        -DBD_ORACLE_LIBDIR="\"$LIBDIR\"" \
        -o "$BIN.tmp" "$ROOT/tests/oracle/oracle.c" \
        -L"$LIBDIR" -l:libllama.v0.5.0.so -l:libggml.v0.5.0.so -l:libggml-base.so \
        -Wl,-rpath,"$LIBDIR" -lm || die "compiling oracle.c failed"
    mv "$BIN.tmp" "$BIN"
fi
# bd-oracle-dflash: llama.cpp's DFlash loop (C++, libllama-common).
DBIN="$O/bd-oracle-dflash"
if [ ! -x "$DBIN" ] || [ "$ROOT/tests/oracle/oracle_dflash.cpp" -nt "$DBIN" ] || [ "$0" -nt "$DBIN" ]; then
    g++ -std=c++17 -O1 -g -Wall -Wextra \
        -I"$SRC/common" -I"$SRC/include" -I"$SRC/ggml/include" -I"$SRC/vendor" \
        -DBD_ORACLE_LIBDIR="\"$LIBDIR\"" \
        -o "$DBIN.tmp" "$ROOT/tests/oracle/oracle_dflash.cpp" \
        -L"$LIBDIR" -l:libllama-common.so -l:libllama.v0.5.0.so -l:libggml.v0.5.0.so -l:libggml-base.so \
        -Wl,-rpath,"$LIBDIR" || die "compiling oracle_dflash.cpp failed"
    mv "$DBIN.tmp" "$DBIN"
fi
echo "$BIN"
