#!/usr/bin/env bash
# spec_lossless.sh - speculative decoding against generated models.
#
# 1. Greedy losslessness: generated targets (qwen3 Q4_K_M tied, qwen3 "mix"
#    untied, llama Q8_0, qwen2 Q4_K_M (attention biases), qwen3moe Q4_K_M; hybrid qwen35 Q4_K_M, qwen35moe
#    Q4_K_M with fused experts and an MTP block, qwen3next Q4_K_M with its fused GDN projections) x drafters (random weights, constructed
#    weights; for the hybrids also a random drafter with sliding-window
#    layers, and draft-simple with the same-seed model in Q4_0, whose drafts
#    are right most of the time and wrong at varying places, so rollbacks
#    into the middle of a block happen at many points and the continuation
#    depends on the restored recurrent state; Q4_K for the MoEs, whose
#    routers flip under coarser rounding) x --spec-draft-n-max 1, 3, 7,
#    15: token-identical to plain greedy; a DFlash step drafts the same
#    tokens whatever the draft length asks of the block (prefixes compared
#    at common positions: the drafter's last layer computes only the
#    drafted rows). The DFlash pairs again with short blocks [anchor, MASK x n]
#    (forced at n_max 3 and 7; adaptive with the block picked by measurement,
#    and adaptive forced short): token-identical to plain greedy too.
# 2. Constructed acceptance patterns: --constant-output targets (qwen3,
#    qwen3moe and qwen35moe; greedy emits token 0 forever) with drafters right for exactly
#    the first k block positions (k = 0, 2, 5, all). Predicted exactly: accepted drafts
#    per step a = min(k, n), target forwards 1 + ceil((N-1)/(a+1)), the
#    per-position acceptance profile, tau, and the target KV length after
#    the last rollback; the same with short blocks at n_max 7 (every
#    drafting step counted short). Adaptive mode stays lossless and backs off when
#    the drafter is never right (its decision rule has a unit test,
#    tests/unit/test_spec_adapt.c).
#    The same with f16, bf16, q8_0, q4_0 and iq4_nl KV caches (-ctk / -ctv,
#    the drafters' -ctkd / -ctvd too; the block types in llama.cpp's
#    rotated basis, attention.h) on a dense, the hybrid and a MoE target: greedy at
#    n_max 3, 15 and adaptive, a draft-simple hybrid pair, and seeded
#    sampling at n_max 7.
# 3. Sampling with a seed (temperature 1, top-k 40) gives the very ids
#    plain sampling gives with that seed (spec.c accept_row): every target
#    of 1 with its random DFlash drafter (never accepted at T 1: rejected
#    rows, one draw each) at the default adaptive draft length and at a
#    fixed n_max 7, and the draft-simple pairs of 1 (accepted and rejected
#    drafts). The trained stories260K pair, whose DFlash drafts are mostly
#    accepted, has the same check in stories.sh.
set -euo pipefail
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
QV="$BD_SHARED/fixtures/qwen3-tokenizer/qwen3-vocab.gguf"
SV="$BD_SHARED/fixtures/stories260K/stories260K.gguf"
mm() { "$BD_BIN" make-model "$@" >/dev/null; }
mm --arch qwen3 --shape tiny --quant q4_k_m --seed 11 --vocab "$QV" -o "$T/q1.gguf"
mm --arch qwen3 --shape tiny --quant mix --untied --seed 12 --vocab "$QV" -o "$T/q2.gguf"
mm --arch llama --shape tiny --quant q8_0 --seed 13 --vocab "$SV" -o "$T/l1.gguf"
mm --arch qwen2 --shape tiny --quant q4_k_m --seed 17 --vocab "$SV" -o "$T/w1.gguf"
mm --arch qwen3moe --shape tiny --quant q4_k_m --seed 14 --vocab "$SV" -o "$T/m1.gguf"
mm --arch qwen35 --shape tiny --quant q4_k_m --seed 21 --vocab "$SV" -o "$T/h1.gguf"
mm --arch qwen35moe --shape tiny --quant q4_k_m --seed 15 --fused-gate-up --mtp 1 --vocab "$SV" -o "$T/h2.gguf"
mm --arch qwen3next --shape tiny --quant q4_k_m --seed 16 --vocab "$SV" -o "$T/h3.gguf"
for t in q1 q2 l1 w1 m1 h1 h2 h3; do
    mm --arch dflash --target "$T/$t.gguf" --drafter random --layers 2 --quant q8_0 --seed 5 -o "$T/$t-rand.gguf"
    mm --arch dflash --target "$T/$t.gguf" --drafter constructed --accept 3 --layers 2 --quant f32 -o "$T/$t-cons.gguf"
done
for t in h1 h2 h3; do
    mm --arch dflash --target "$T/$t.gguf" --drafter random --layers 3 --quant q8_0 --seed 6 --swa 4 \
        --swa-pattern 1,0,1 -o "$T/$t-swa.gguf"
done
mm --arch qwen35 --shape tiny --quant q4_0 --seed 21 --vocab "$SV" -o "$T/h1-simple.gguf"
mm --arch qwen35moe --shape tiny --quant q4_k --seed 15 --fused-gate-up --mtp 1 --vocab "$SV" -o "$T/h2-simple.gguf"
mm --arch qwen3next --shape tiny --quant q4_k --seed 16 --vocab "$SV" -o "$T/h3-simple.gguf"
mm --arch qwen3moe --shape tiny --quant q4_k --seed 14 --vocab "$SV" -o "$T/m1-simple.gguf"
run() { "$BD_BIN" run --temp 0 -t 2 -c 256 --json --ignore-eos "$@"; }
P="The quick brown fox"
drafters() { case $1 in h*) echo rand cons swa simple ;; m1) echo rand cons simple ;; *) echo rand cons ;; esac; }
for t in q1 q2 l1 w1 m1 h1 h2 h3; do
    run -m "$T/$t.gguf" -p "$P" -n 40 > "$T/$t-plain.json"
    for d in $(drafters $t); do
        extra=(--spec-trace)
        [ $d = simple ] && extra=(--spec-type draft-simple)
        for n in 1 3 7 15; do
            run -m "$T/$t.gguf" -md "$T/$t-$d.gguf" "${extra[@]}" --no-spec-adaptive --spec-draft-n-max $n -p "$P" -n 40 \
                > "$T/$t-$d-$n.json"
        done
        [ $d = simple ] && continue
        # short blocks [anchor, MASK x n], forced and picked by the adaptive rule
        for n in 3 7; do
            run -m "$T/$t.gguf" -md "$T/$t-$d.gguf" --no-spec-adaptive --spec-dflash-block short --spec-draft-n-max $n \
                -p "$P" -n 40 > "$T/$t-$d-s$n.json"
        done
        run -m "$T/$t.gguf" -md "$T/$t-$d.gguf" --spec-adaptive -p "$P" -n 40 > "$T/$t-$d-ad.json"
        run -m "$T/$t.gguf" -md "$T/$t-$d.gguf" --spec-adaptive --spec-dflash-block short -p "$P" -n 40 \
            > "$T/$t-$d-ads.json"
    done
done
python3 - "$T" <<'PY'
import json, sys, os
d = sys.argv[1]
partial = simple_acc = 0
for t in ["q1", "q2", "l1", "w1", "m1", "h1", "h2", "h3"]:
    plain = json.load(open(os.path.join(d, t + "-plain.json")))["generated_ids"]
    assert len(plain) == 40 and len(set(plain)) > 5, (t, "degenerate target", plain)
    for dr in {"h": ["rand", "cons", "swa", "simple"], "m": ["rand", "cons", "simple"]}.get(t[0], ["rand", "cons"]):
        for n in [1, 3, 7, 15]:
            o = json.load(open(os.path.join(d, "%s-%s-%d.json" % (t, dr, n))))
            sp = o["stats"]["spec"]
            assert sp["type"] == ("draft-simple" if dr == "simple" else "draft-dflash")
            if dr == "simple" and n > 1:
                # rollbacks into the middle of a block really happened
                partial += sum(1 for i, r in enumerate(sp["acceptance_by_position"]) if 0 < r < 1)
                simple_acc += sp["n_accepted"]
            assert o["generated_ids"] == plain, "%s/%s/n=%d differs from plain greedy" % (t, dr, n)
            assert sp["n_drafted"] >= n, (t, dr, n, sp)   # speculation really ran
            print("lossless %s %-6s n_max %2d: drafted %3d accepted %3d tau %.2f" % (
                t, dr, n, sp["n_drafted"], sp["n_accepted"], sp["tau"]))
        if dr == "simple":
            continue
        for v in ["s3", "s7", "ad", "ads"]:
            o = json.load(open(os.path.join(d, "%s-%s-%s.json" % (t, dr, v))))
            sp = o["stats"]["spec"]
            assert o["generated_ids"] == plain, "%s/%s/%s differs from plain greedy" % (t, dr, v)
            if v[0] == "s":  # every drafting step ran a short block
                assert sp["draft_steps"] > 0 and sp["short_block_steps"] == sp["draft_steps"], (t, dr, v, sp)
            print("lossless %s %-6s %-3s (short blocks): drafted %3d accepted %3d, %d of %d drafting steps short" % (
                t, dr, v, sp["n_drafted"], sp["n_accepted"], sp["short_block_steps"], sp["draft_steps"]))
assert partial > 0 and simple_acc >= 20, ("the draft-simple runs accepted too little to test rollbacks",
                                          partial, simple_acc)
# DFlash drafts do not depend on how many of the block's rows are drafted:
# every run drafts with the whole trained block, and the drafter's last
# layer computes only the rows the draft uses (dflash.c), so a step at the
# same position with the same anchor must draft, for n_max a < b, the first
# a of what the n_max b run drafts there (the drafter's context is the same
# committed tokens' features in both runs).
same = 0
for t in ["q1", "q2", "l1", "w1", "m1", "h1", "h2", "h3"]:
    for dr in (["rand", "cons", "swa"] if t.startswith("h") else ["rand", "cons"]):
        steps = {}
        for n in [1, 3, 7, 15]:
            tr = json.load(open(os.path.join(d, "%s-%s-%d.json" % (t, dr, n))))["stats"]["spec"]["trace"]
            steps[n] = {(s["pos"], s["anchor"]): s["drafts"] for s in tr}
        for a, b in [(1, 3), (1, 15), (3, 7), (3, 15), (7, 15)]:
            for key, da in steps[a].items():
                db = steps[b].get(key)
                if db is None or len(da) != a or len(db) != b:
                    continue
                assert da == db[:a], ("%s/%s: drafts at %s differ between n_max %d and %d" % (t, dr, key, a, b), da, db)
                same += 1
assert same >= 40, ("too few steps at common positions to compare draft lengths", same)
print("draft prefixes: %d steps at common positions, n_max a drafts the first a of n_max b" % same)
PY

# f16, bf16, q8_0, q4_0 and iq4_nl KV caches (-ctk / -ctv, and the
# drafters' -ctkd / -ctvd; heads of 64 here, so the block types' rows are
# rotated): speculative output is plain decoding's with those caches too
# (greedy and seeded sampling), on a dense, a hybrid and a MoE target
KV_TYPES="f16 bf16 q8_0 q4_0 iq4_nl"
for kvt in $KV_TYPES; do
    KV=(-ctk $kvt -ctv $kvt -ctkd $kvt -ctvd $kvt)
    for t in q1 h1 m1; do
        run -m "$T/$t.gguf" "${KV[@]}" -p "$P" -n 40 > "$T/$t-kv$kvt-plain.json"
        "$BD_BIN" run -m "$T/$t.gguf" "${KV[@]}" -t 2 -c 256 --json --ignore-eos --temp 1 --top-k 40 -s 3 -p "$P" \
            -n 40 > "$T/$t-kv$kvt-t1-plain.json"
        for d in rand cons; do
            for n in 3 15; do
                run -m "$T/$t.gguf" -md "$T/$t-$d.gguf" "${KV[@]}" --no-spec-adaptive --spec-draft-n-max $n -p "$P" \
                    -n 40 > "$T/$t-kv$kvt-$d-$n.json"
            done
            run -m "$T/$t.gguf" -md "$T/$t-$d.gguf" "${KV[@]}" --spec-adaptive -p "$P" -n 40 > "$T/$t-kv$kvt-$d-ad.json"
        done
        "$BD_BIN" run -m "$T/$t.gguf" -md "$T/$t-rand.gguf" "${KV[@]}" -t 2 -c 256 --json --ignore-eos --temp 1 \
            --top-k 40 -s 3 --no-spec-adaptive --spec-draft-n-max 7 -p "$P" -n 40 > "$T/$t-kv$kvt-t1-n7.json"
    done
    run -m "$T/h1.gguf" -md "$T/h1-simple.gguf" "${KV[@]}" --spec-type draft-simple --no-spec-adaptive \
        --spec-draft-n-max 7 -p "$P" -n 40 > "$T/h1-kv$kvt-simple-7.json"
done
python3 - "$T" "$KV_TYPES" <<'PY'
import json, sys, os
d = sys.argv[1]
ld = lambda f: json.load(open(os.path.join(d, f)))
for kv in sys.argv[2].split():
    for t in ["q1", "h1", "m1"]:
        plain = ld("%s-kv%s-plain.json" % (t, kv))["generated_ids"]
        assert len(plain) == 40 and len(set(plain)) > 5, (t, kv, "degenerate target", plain)
        runs = ["%s-kv%s-%s-%s.json" % (t, kv, dr, v) for dr in ["rand", "cons"] for v in ["3", "15", "ad"]]
        runs += ["h1-kv%s-simple-7.json" % kv] if t == "h1" else []
        for f in runs:
            o = ld(f)
            assert o["stats"]["spec"]["n_drafted"] > 0, (f, o["stats"]["spec"])
            assert o["generated_ids"] == plain, "%s: differs from plain greedy with that cache" % f
            print("lossless, %-4s KV cache: %-26s drafted %3d accepted %3d" % (
                kv, f[:-5], o["stats"]["spec"]["n_drafted"], o["stats"]["spec"]["n_accepted"]))
        o = ld("%s-kv%s-t1-n7.json" % (t, kv))
        assert o["stats"]["spec"]["n_drafted"] > 0
        assert o["generated_ids"] == ld("%s-kv%s-t1-plain.json" % (t, kv))["generated_ids"], (t, kv, "seeded sampling differs")
        print("seeded, %s KV cache: %s n_max 7 gives plain sampling's 40 ids" % (kv, t))
PY

# sampling with a seed: the ids of plain sampling
for t in q1 q2 l1 w1 m1 h1 h2 h3; do
    for seed in 3 4; do
        smp=(--temp 1 --top-k 40 --top-p 1 --min-p 0 -s $seed -p "$P" -n 40)
        "$BD_BIN" run -m "$T/$t.gguf" -t 2 -c 256 --json --ignore-eos "${smp[@]}" > "$T/$t-t1-$seed-plain.json"
        "$BD_BIN" run -m "$T/$t.gguf" -md "$T/$t-rand.gguf" -t 2 -c 256 --json --ignore-eos "${smp[@]}" \
            > "$T/$t-t1-$seed-ad.json"
        "$BD_BIN" run -m "$T/$t.gguf" -md "$T/$t-rand.gguf" -t 2 -c 256 --json --ignore-eos --no-spec-adaptive \
            --spec-draft-n-max 7 "${smp[@]}" > "$T/$t-t1-$seed-n7.json"
        if [ -f "$T/$t-simple.gguf" ]; then
            "$BD_BIN" run -m "$T/$t.gguf" -md "$T/$t-simple.gguf" --spec-type draft-simple --spec-draft-n-max 4 \
                -t 2 -c 256 --json --ignore-eos "${smp[@]}" > "$T/$t-t1-$seed-simple.json"
        fi
    done
done
python3 - "$T" <<'PY'
import json, sys, os
d = sys.argv[1]
n_cmp = acc_simple = 0
for t in ["q1", "q2", "l1", "w1", "m1", "h1", "h2", "h3"]:
    for seed in [3, 4]:
        plain = json.load(open(os.path.join(d, "%s-t1-%d-plain.json" % (t, seed))))["generated_ids"]
        for v in ["ad", "n7", "simple"]:
            f = os.path.join(d, "%s-t1-%d-%s.json" % (t, seed, v))
            if not os.path.exists(f):
                continue
            o = json.load(open(f))
            sp = o["stats"]["spec"]
            assert sp["n_drafted"] > 0 and sp["adaptive"] == (v == "ad"), (t, seed, v, sp)
            assert o["generated_ids"] == plain, "%s seed %d %s: sampled ids differ from plain sampling's" % (t, seed, v)
            n_cmp += 1
            acc_simple += sp["n_accepted"] if v == "simple" else 0
            print("seeded %s seed %d %-6s: plain sampling's 40 ids; drafted %3d accepted %3d" % (
                t, seed, v, sp["n_drafted"], sp["n_accepted"]))
assert n_cmp == 8 * 2 * 2 + 4 * 2, n_cmp
assert acc_simple >= 20, ("too few draft-simple drafts accepted to test the accepting rows", acc_simple)
PY

# constructed acceptance patterns
mm --arch qwen3 --shape tiny --quant q4_k_m --seed 21 --vocab "$QV" --constant-output -o "$T/c.gguf"
mm --arch qwen35moe --shape tiny --quant q4_k_m --seed 22 --vocab "$SV" --constant-output -o "$T/hc.gguf"
mm --arch qwen3moe --shape tiny --quant q4_k_m --seed 23 --vocab "$SV" --constant-output -o "$T/mc.gguf"
for c in c hc mc; do
    for k in 0 2 5 all; do
        mm --arch dflash --target "$T/$c.gguf" --drafter constructed --accept $k --layers 2 --quant q8_0 \
            -o "$T/$c-$k.gguf"
        for n in 3 7 15; do
            run -m "$T/$c.gguf" -md "$T/$c-$k.gguf" --no-spec-adaptive --spec-draft-n-max $n -p "$P" -n 49 \
                > "$T/$c-$k-$n.json"
        done
        run -m "$T/$c.gguf" -md "$T/$c-$k.gguf" --no-spec-adaptive --spec-dflash-block short --spec-draft-n-max 7 \
            -p "$P" -n 49 > "$T/$c-$k-s7.json"
        run -m "$T/$c.gguf" -md "$T/$c-$k.gguf" --spec-adaptive -p "$P" -n 49 > "$T/$c-$k-ad.json"
    done
done
python3 - "$T" <<'PY'
import json, sys, os, math
d = sys.argv[1]
N = 49
for c, k in [(c, k) for c in ["c", "hc", "mc"] for k in ["0", "2", "5", "all"]]:
    for n in [3, 7, 15, "s7"]:
        o = json.load(open(os.path.join(d, "%s-%s-%s.json" % (c, k, n))))
        short = n == "s7"
        if short:  # a short block: the same pattern, every step on 8 rows
            n = 7
            assert o["stats"]["spec"]["short_block_steps"] == o["stats"]["spec"]["draft_steps"] > 0
        sp, st = o["stats"]["spec"], o["stats"]
        assert o["generated_ids"] == [0] * N, "constant target must emit token 0"
        # predicted run: the prefill emits the first token; each step drafts
        # min(n, budget - 1) tokens, accepts min(k, drafted), emits that + 1
        R, fwd, drafted, accepted, prof_d, prof_a = N - 1, 1, 0, 0, [0] * n, [0] * n
        while R > 0:
            nd = max(0, min(n, R - 1))
            a = nd if k == "all" else min(int(k), nd)
            for i in range(min(a + 1, nd)):
                prof_d[i] += 1
                prof_a[i] += 1 if i < a else 0
            for i in range(a + 1, nd):
                prof_d[i] += 1
            R -= a + 1; fwd += 1; drafted += nd; accepted += a
        assert sp["target_forwards"] == fwd, (k, n, sp, fwd)
        assert sp["n_drafted"] == drafted, (k, n, sp, drafted)
        assert sp["n_accepted"] == accepted, (k, n, sp, accepted)
        want = [prof_a[i] / prof_d[i] for i in range(n) if prof_d[i]]
        assert sp["acceptance_by_position"] == want, (k, n, sp["acceptance_by_position"], want)
        assert abs(sp["tau"] - N / fwd) < 1e-9
        assert st["kv_len"] == st["n_prompt"] + N - 1, ("rollback left the KV at", st["kv_len"])
        print("constructed %-2s k=%-3s n_max %2d%s: drafted %d, accepted %d, forwards %d, tau %.3f, kv %d (as predicted)" % (
            c, k, n, " short" if short else "", drafted, accepted, fwd, sp["tau"], st["kv_len"]))
    o = json.load(open(os.path.join(d, "%s-%s-ad.json" % (c, k))))
    sp = o["stats"]["spec"]
    assert o["generated_ids"] == [0] * N
    print("adaptive   %-2s k=%-3s: drafted %d accepted %d tau %.2f" % (c, k, sp["n_drafted"], sp["n_accepted"], sp["tau"]))
    if k == "0":
        assert sp["n_drafted"] <= 30, "adaptive mode must back off from a drafter that is never right"
PY
echo "spec_lossless: all checks passed"
