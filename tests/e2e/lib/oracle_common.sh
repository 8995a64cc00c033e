# oracle_common.sh - helpers of the scripts that compare blockdraft's
# forward with llama.cpp v0.5.0 on make-model files (oracle_hybrid.sh,
# oracle_moe.sh). Source it after setting W (work folder) and ST (the
# vocabulary GGUF); it sets ORACLE, EDIT, CMP, IDS (100 ids from 3..511: full
# logit rows of a 512-token vocabulary are cheap), TH and fail.
#
#   mm NAME ARGS...       make-model ARGS into $W/NAME.gguf
#   logits NAME TOL [rel [OUTLIERS]]
#                         teacher-forced logits over IDS, compare.py rules;
#                         passes if within TOL of one of llama.cpp's two
#                         paths (whole prompt, or token by token). With
#                         "rel" the bound is max(TOL, 1.5 x how far
#                         llama.cpp's own results lie apart: its two paths,
#                         and the kernels it picks for this CPU against its
#                         haswell (AVX2) ones); OUTLIERS positions may
#                         exceed it (compare.py --outliers: expert swaps).
#   greedy NAME           `run --temp 0` against `bd-oracle greedy`, 64
#                         tokens, identical up to the first near-tie.
#   router_ties SRC NAME ARCH  $W/NAME.gguf := $W/SRC.gguf (a 4-layer MoE)
#                         with every expert's router row copied from its
#                         lower neighbour's in groups of three (0=1=2,
#                         3=4=5, ...): the chosen set always has tied
#                         members and ties decide the k-th place wherever a
#                         group straddles it; llama.cpp (insertion sort for
#                         <= 16 experts) and blockdraft both take the lower
#                         ids first (bd-gguf-edit, tests/tools/gguf_edit.c).
: "${BD_BIN:?}" "${BD_BUILD:?}" "${W:?}" "${ST:?}"
ROOT=${BD_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)}
CMP="python3 $ROOT/tests/oracle/compare.py"
ORACLE=$("$ROOT/tests/oracle/setup.sh") || { echo "FAIL: cannot build the llama.cpp oracle (tests/oracle/setup.sh)"; exit 1; }
EDIT="$BD_BUILD/tests/bd-gguf-edit"
[ -x "$EDIT" ] || { echo "FAIL: $EDIT not built (make tests)"; exit 1; }
mkdir -p "$W"
TH=1
fail=0
bad() { echo "FAIL: $*"; fail=1; }
IDS=$(python3 -c "import random; random.seed(5); print(','.join(str(random.randrange(3, 512)) for _ in range(100)))")

# llama.cpp's AVX2 kernels alone in a folder (BD_ORACLE_BACKENDS, oracle.c)
ORACLE_LIBDIR="$(cd "$(dirname "$ORACLE")" && pwd)/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"
HASWELL="$W/backend-haswell"
rm -rf "$HASWELL"
mkdir -p "$HASWELL"
for lib in libggml-base.so libggml.v0.5.0.so libllama.v0.5.0.so libllama-common.so libggml-cpu-haswell.so; do
    [ -e "$ORACLE_LIBDIR/$lib" ] && ln -s "$ORACLE_LIBDIR/$lib" "$HASWELL/$lib"
done

mm() {
    local name=$1; shift
    "$BD_BIN" make-model "$@" --vocab "$ST" -t 2 -o "$W/$name.gguf" >/dev/null 2>"$W/$name.err" ||
        { bad "make-model $name: $(tail -1 "$W/$name.err")"; return 1; }
}
worst() { sed -n 's/.*worst |diff|\/range \([^ ]*\) .*/\1/p' | tail -1; }

logits() {
    local label=$1 tol=$2 rel=${3:-} outl=${4:-0} m="$W/$1.gguf" mode out ok=0
    "$BD_BIN" eval -m "$m" --ids "$IDS" --top 20 --json -t "$TH" >"$W/$label.bd.json" 2>"$W/$label.bd.err" ||
        { bad "$label: blockdraft eval failed: $(tail -2 "$W/$label.bd.err")"; return; }
    for mode in batch ubatch1; do
        local extra=""
        [ $mode = ubatch1 ] && extra="--ubatch 1"
        "$ORACLE" logits -m "$m" --ids "$IDS" --top 20 -t "$TH" $extra >"$W/$label.oracle-$mode.json" \
            2>"$W/$label.oracle.err" || { bad "$label: bd-oracle logits failed: $(tail -2 "$W/$label.oracle.err")"; return; }
    done
    local bound=$tol
    if [ -n "$rel" ]; then
        local self cross=0
        self=$($CMP logits "$W/$label.oracle-batch.json" "$W/$label.oracle-ubatch1.json" --tol 10 --label self | worst)
        if BD_ORACLE_BACKENDS="$HASWELL" "$ORACLE" logits -m "$m" --ids "$IDS" --top 20 -t "$TH" \
            >"$W/$label.oracle-haswell.json" 2>"$W/$label.oracle-haswell.err"; then
            cross=$($CMP logits "$W/$label.oracle-batch.json" "$W/$label.oracle-haswell.json" --tol 10 --label cross | worst)
        else
            echo "   $label: llama.cpp's haswell kernels do not run here; its own two paths only"
        fi
        bound=$(python3 -c "print(max($tol, 1.5 * max($self, ${cross:-0})))")
        echo "   $label: llama.cpp differs from itself by $self (batch vs token) and ${cross:-0} (its kernels vs haswell's) -> bound $bound"
    fi
    for mode in batch ubatch1; do
        out=$($CMP logits "$W/$label.oracle-$mode.json" "$W/$label.bd.json" --tol "$bound" --outliers "$outl" \
            --label "$label/$mode")
        if [ $? -eq 0 ]; then echo "$out" | tail -1; ok=1; break; fi
        echo "$out" | tail -2
    done
    [ $ok -eq 1 ] || bad "$label: logits differ beyond $bound from both llama.cpp paths"
}

greedy() {
    local label=$1 prompt="Once upon a time" m="$W/$1.gguf"
    "$ORACLE" greedy -m "$m" -p "$prompt" -n 64 -t "$TH" >"$W/$label.greedy-oracle.json" 2>"$W/$label.oracle.err" ||
        { bad "$label: bd-oracle greedy failed: $(tail -2 "$W/$label.oracle.err")"; return; }
    "$BD_BIN" run -m "$m" -p "$prompt" -n 64 --temp 0 --ignore-eos --json -t "$TH" >"$W/$label.greedy-bd.json" \
        2>"$W/$label.bd.err" || { bad "$label: blockdraft run failed: $(tail -2 "$W/$label.bd.err")"; return; }
    $CMP greedy "$W/$label.greedy-oracle.json" "$W/$label.greedy-bd.json" --label "$label/greedy" ||
        bad "$label: greedy sequences differ before the first near-tie"
}

router_ties() {
    local src=$1 name=$2 arch=$3 ne l e
    [ -f "$W/$src.gguf" ] || return 1
    ne=$("$BD_BIN" inspect "$W/$src.gguf" | sed -n "s/.*$arch.expert_count (uint32) = \([0-9]*\).*/\1/p")
    [ -n "$ne" ] || { bad "cannot read expert_count of $src"; return 1; }
    local edits=()
    for l in 0 1 2 3; do
        for ((e = 0; e + 2 < ne; e += 3)); do
            edits+=(--copy-row "blk.$l.ffn_gate_inp.weight" $e $((e + 1)) --copy-row "blk.$l.ffn_gate_inp.weight" $e $((e + 2)))
        done
    done
    "$EDIT" "$W/$src.gguf" "$W/$name.gguf" "${edits[@]}" || { bad "bd-gguf-edit $name"; return 1; }
}
