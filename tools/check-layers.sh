#!/usr/bin/env bash
# check-layers.sh [--src DIR] [--lib LIBBDCORE.a] - the layering rules the
# compiler does not see (make check-layers, part of make test):
#
#  1. Layers, lowest first: base tensor gguf tokenizer model decode chat
#     gallery server cli (one folder each under src/). A file may include
#     headers of its own layer and of lower ones, never of a higher one.
#     include/blockdraft.h, the public contract, may be included anywhere.
#  2. One include style: a header of the same folder by its name
#     ("sampler.h"), of another folder as "../folder/name.h", the public
#     header as "blockdraft.h".
#  3. The engine core (libbdcore.a: base..decode) exports only bd_*
#     symbols (so it links next to llama.cpp/ggml) and uses only libc,
#     libm and pthreads: no jansson, libcurl, libyaml, OpenSSL or
#     libmicrohttpd symbol is referenced.
#
# Exit status 1 with one line per violation, 0 when clean.
set -u
SRC=src
LIB=build/libbdcore.a
while [ $# -gt 0 ]; do
    case "$1" in
    --src) SRC=$2; shift 2 ;;
    --lib) LIB=$2; shift 2 ;;
    *) echo "usage: $0 [--src DIR] [--lib LIBBDCORE.a]" >&2; exit 2 ;;
    esac
done
LAYERS="base tensor gguf tokenizer model decode chat gallery server cli"
# Every exported symbol of the core carries the bd_ prefix (no exemptions).
EXEMPT_SYMBOLS='^$'
# The type table (tensor/) sits below the GGUF reader/writer, which checks
# tensor sizes with it; tensor includes nothing of gguf. No exemptions.
EXEMPT_INCLUDES=' '

declare -A RANK
i=0
for l in $LAYERS; do RANK[$l]=$i; i=$((i + 1)); done

bad=0
for dir in "$SRC"/*/; do
    layer=$(basename "$dir")
    r=${RANK[$layer]:--1}
    if [ "$r" -lt 0 ]; then
        echo "$dir: a folder that is not a layer ($LAYERS)"
        bad=1
        continue
    fi
    for f in "$dir"*.c "$dir"*.h; do
        [ -f "$f" ] || continue
        while IFS=: read -r line inc; do
            inc=${inc#*\"}
            inc=${inc%%\"*}
            case "$inc" in
            blockdraft.h) continue ;;
            ../*/*.h)
                target=${inc#../}
                target=${target%%/*}
                if [ "$target" = "$layer" ]; then
                    echo "$f:$line: \"$inc\": a header of the same folder is included by its name"
                    bad=1
                    continue
                fi
                ;;
            */*)
                echo "$f:$line: \"$inc\": include another folder's header as \"../folder/name.h\""
                bad=1
                continue
                ;;
            *) target=$layer ;;
            esac
            tr=${RANK[$target]:--1}
            case "$EXEMPT_INCLUDES" in *" $layer:$inc "*) continue ;; esac
            if [ "$tr" -lt 0 ]; then
                echo "$f:$line: \"$inc\": no such layer '$target'"
                bad=1
            elif [ "$tr" -gt "$r" ]; then
                echo "$f:$line: \"$inc\": layer $layer includes $target, a higher layer"
                bad=1
            fi
        done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f")
    done
done

if [ -n "$LIB" ]; then
    if [ ! -f "$LIB" ]; then
        echo "$LIB: not built"
        bad=1
    else
        while read -r sym; do
            echo "$LIB: exports '$sym' (engine core symbols are bd_*)"
            bad=1
        done < <(nm -g --defined-only "$LIB" 2>/dev/null | awk 'NF == 3 {print $3}' | grep -v '^bd_' |
                 grep -Ev "$EXEMPT_SYMBOLS" | sort -u)
        while read -r sym; do
            echo "$LIB: references '$sym' (the engine core uses libc, libm and pthreads only)"
            bad=1
        done < <(nm -u "$LIB" 2>/dev/null | awk '{print $NF}' |
                 grep -E '^(json_|curl_|yaml_|MHD_|EVP_|SHA256|OPENSSL_|CRYPTO_)' | sort -u)
    fi
fi
[ $bad -eq 0 ] && echo "check-layers: clean ($LAYERS; $(basename "$LIB"): bd_* exports only)"
exit $bad
