#!/usr/bin/env bash
# check_layers.sh - make check-layers in make test: the tree is clean, and
# the checker fails on each kind of violation planted in a scratch copy
# (an upward include, another include style, a non-bd_ export, a core
# library that references jansson).
set -u
cd "${BD_ROOT:?}"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
CHK=tools/check-layers.sh
LIB="$BD_BUILD/libbdcore.a"
fail() { echo "FAIL: $*"; exit 1; }

"$CHK" --lib "$LIB" || fail "the tree is not clean"

expect_fail() { # WHAT PATTERN ARGS...
    local what=$1 pat=$2
    shift 2
    if "$CHK" "$@" >"$T/out" 2>&1; then cat "$T/out"; fail "$what: not detected"; fi
    grep -q -- "$pat" "$T/out" || { cat "$T/out"; fail "$what: wrong message"; }
    echo "ok: $what detected: $(head -n 1 "$T/out")"
}

cp -r src "$T/src"
echo '#include "../cli/cli.h"' >> "$T/src/base/base.h"
expect_fail "base including cli" "a higher layer" --src "$T/src" --lib "$LIB"
rm -rf "$T/src" && cp -r src "$T/src"
echo '#include "decode/sampler.h"' >> "$T/src/server/api.c"
expect_fail "a rooted include" 'as "../folder/name.h"' --src "$T/src" --lib "$LIB"
rm -rf "$T/src" && cp -r src "$T/src"
echo '#include "../decode/sampler.h"' >> "$T/src/decode/spec.c"
expect_fail "a same-folder include by path" "by its name" --src "$T/src" --lib "$LIB"

printf 'int helper_without_prefix(void) { return 1; }\n' > "$T/x.c"
cc -c -o "$T/x.o" "$T/x.c" && cp "$LIB" "$T/lib.a" && ar rcs "$T/lib.a" "$T/x.o"
expect_fail "an export without bd_" "helper_without_prefix" --src src --lib "$T/lib.a"
printf 'void *json_object(void);\nvoid *bd_x(void) { return json_object(); }\n' > "$T/y.c"
cc -c -o "$T/y.o" "$T/y.c" && cp "$LIB" "$T/lib2.a" && ar rcs "$T/lib2.a" "$T/y.o"
expect_fail "a core library using jansson" "json_object" --src src --lib "$T/lib2.a"
echo "ok: check-layers"
