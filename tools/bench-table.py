#!/usr/bin/env python3
"""bench-table.py OUT - the markdown tables of tools/bench-compare.sh.

Reads what bench-compare.sh wrote under OUT (machine.txt, skipped.txt,
groups.tsv: one line per level x thread count, models.tsv, pairs.tsv, and
runs/<level>-t<threads>/*.json|*.log) and prints, in this order: the machine,
what was skipped and why, a summary (one row per level, threads and model), the
thread scaling, then per level and thread count: the CPU and both engines'
instruction sets, one table per model with its verify curve, the speculative
runs and the oversubscription test. Prints only what the runs measured; a
missing or failed run shows as such.
"""
import json
import os
import re
import sys


def load(p):
    try:
        with open(p) as f:
            return json.load(f)
    except Exception:
        return None


def read_tsv(p):
    try:
        with open(p) as f:
            return [l.rstrip("\n").split("\t") for l in f if l.strip()]
    except FileNotFoundError:
        return []


def fmt(x, nd=2):
    return "—" if x is None else f"{x:.{nd}f}"


def ratio(a, b):
    return f"{a / b:.2f}x" if a is not None and b else "—"


def first_line(p, pat=None):
    try:
        for l in open(p, errors="replace"):
            if pat is None or re.search(pat, l):
                return l.strip()
    except FileNotFoundError:
        pass
    return ""


def recurrent(j):
    """Recurrent-state bytes if the engine reports them (blockdraft's key is
    not fixed yet: any of these names)."""
    if not j:
        return None
    for k in ("recurrent_bytes", "recurrent_state_bytes", "state_bytes"):
        if j.get(k):
            return j[k]
    return None


out = sys.argv[1]
machine = open(os.path.join(out, "machine.txt")).read().rstrip()
cpu_line = next((l for l in machine.splitlines() if l.startswith("cpu:")), "cpu: ?")
groups = [dict(zip(("level", "threads", "variant", "dir", "loaded", "features", "bw", "bdisa", "bwpages"), g))
          for g in read_tsv(os.path.join(out, "groups.tsv"))]
models = read_tsv(os.path.join(out, "models.tsv"))  # stem, spec, path
pairs = read_tsv(os.path.join(out, "pairs.tsv"))  # name, target, drafter
skipped = [l.strip() for l in open(os.path.join(out, "skipped.txt")) if l.strip()] \
    if os.path.exists(os.path.join(out, "skipped.txt")) else []


def llama_variant_ok(ll, variant):
    """'' when the run loaded exactly the level's variant, else a warning."""
    if not ll:
        return ""
    f = os.path.basename(ll.get("cpu_backend_file") or ll.get("cpu_backend") or "")
    mapped = ll.get("cpu_backends_mapped")
    want = f"libggml-cpu-{variant}.so"
    if f != want or (mapped is not None and mapped != want):
        return f" **llama.cpp loaded {f or 'no CPU backend'} (mapped: {mapped}), not {want}**"
    return ""


print("```")
print(machine)
print("```\n")
if skipped:
    print("Skipped:\n")
    for s in skipped:
        print(f"- {s}")
    print()

# ---- summary ----
rows = []
for g in groups:
    for stem, spec, _ in models:
        bd = load(f"{g['dir']}/bd-{stem}.json")
        ll = load(f"{g['dir']}/ll-{stem}.json")
        if not bd and not ll:
            continue
        rows.append((g, stem, bd, ll))
if rows:
    print("### Summary (ratio = blockdraft / llama.cpp; verify: time, lower is better)\n")
    print("| level (llama.cpp variant) | threads | model | pp tok/s | tg tok/s | verify t(n) ms | tg share of probe bd / llama |")
    print("|---|---|---|---|---|---|---|")
    for g, stem, bd, ll in rows:
        bd, ll = bd or {}, ll or {}

        def pair(k):
            a, c = bd.get(k), ll.get(k)
            return f"{fmt(a)} / {fmt(c)} = {ratio(a, c)}"
        vb, vl = bd.get("verify_ms") or [], ll.get("verify_ms") or []
        ver = f"t({len(vb)}) {vb[-1]:.1f} / {vl[-1]:.1f} = {vb[-1] / vl[-1]:.2f}x" if vb and vl else "—"
        share = "—"
        bw = float(g["bw"] or 0)
        if bd.get("tg_gbps") and ll.get("tg_tps") and bw > 0:
            llg = bd["tg_gbps"] * ll["tg_tps"] / bd["tg_tps"]
            share = f"{100 * bd['tg_gbps'] / bw:.0f} % / {100 * llg / bw:.0f} %"
        print(f"| {g['level']} ({g['variant']}) | {g['threads']} | {stem} | {pair('pp_tps')} | {pair('tg_tps')} | "
              f"{ver} | {share} |")
    print()

# ---- thread scaling ----
levels = []
for g in groups:
    if g["level"] not in levels:
        levels.append(g["level"])
tcounts = sorted({int(g["threads"]) for g in groups})
if len(tcounts) > 1 and rows:
    print("### Thread scaling (tok/s at each thread count; x = last / first)\n")
    hdr = " | ".join(f"t{t}" for t in tcounts)
    print(f"| level | model | test | engine | {hdr} | x |")
    print("|---|---|---|---|" + "---|" * len(tcounts) + "---|")
    for l in levels:
        for stem, spec, _ in models:
            for key, test in (("pp_tps", "pp"), ("tg_tps", "tg")):
                for eng, pre in (("blockdraft", "bd"), ("llama.cpp", "ll")):
                    vals = []
                    for t in tcounts:
                        g = next((g for g in groups if g["level"] == l and int(g["threads"]) == t), None)
                        j = load(f"{g['dir']}/{pre}-{stem}.json") if g else None
                        vals.append(j.get(key) if j else None)
                    if all(v is None for v in vals):
                        continue
                    x = ratio(vals[-1], vals[0]) if vals[0] and vals[-1] else "—"
                    print(f"| {l} | {stem} | {test} | {eng} | " + " | ".join(fmt(v) for v in vals) + f" | {x} |")
    print()

# ---- per level and thread count ----
for g in groups:
    l, T, d, variant = g["level"], g["threads"], g["dir"], g["variant"]
    bw = float(g["bw"] or 0)
    print(f"## Level {l}, {T} thread{'s' if T != '1' else ''}\n")
    print("```")
    print(cpu_line)
    print(f"blockdraft: BLOCKDRAFT_ISA={l}; kernel table: {g['bdisa']}")
    print(f"llama.cpp:  libggml-cpu-{variant}.so alone in its backend folder; its log: loaded CPU backend from {g['loaded']}")
    print(f"llama.cpp CPU backend features: {g['features']}")
    pages = f", {g['bwpages']} pages" if g.get("bwpages") else ""
    print(f"read bandwidth ({T} threads, blockdraft bench --bw-probe{pages}): {bw:.1f} GB/s")
    print("```\n")
    for stem, spec, _ in models:
        bd, ll = load(f"{d}/bd-{stem}.json"), load(f"{d}/ll-{stem}.json")
        if not bd and not ll:
            if os.path.exists(f"{d}/bd-{stem}.log") or os.path.exists(f"{d}/ll-{stem}.log"):
                why_b = first_line(f"{d}/bd-{stem}.log", "blockdraft") or "no result"
                why_l = first_line(f"{d}/ll-{stem}.log") or "no result"
                print(f"#### {stem}: no results (blockdraft: {why_b}; llama.cpp: {why_l})\n")
            continue
        flag = llama_variant_ok(ll, variant)
        if bd and bd.get("isa") and bd["isa"] != l:
            flag += f" **blockdraft ran {bd['isa']}, not {l}**"
        size = (bd or {}).get("file_bytes") or (ll or {}).get("model_bytes") or 0
        load_note = ""
        if bd and bd.get("load_before") is not None:
            load_note = f"; load average during the blockdraft run {bd['load_before']:.2f} -> {bd['load_after']:.2f}"
        print(f"#### {stem} ({size / 1e9:.2f} GB, {T} threads{load_note}){flag}\n")
        if not bd:
            print(f"blockdraft: no result ({first_line(f'{d}/bd-{stem}.log', 'blockdraft') or 'see the log'})\n")
        if not ll:
            print(f"llama.cpp: no result ({first_line(f'{d}/ll-{stem}.log') or 'see the log'})\n")
        bd, ll = bd or {}, ll or {}
        print("| test | blockdraft | llama.cpp | ratio |")
        print("|---|---|---|---|")
        for key, name in (("pp_tps", f"pp{bd.get('n_prompt', ll.get('n_prompt'))} t/s"),
                          ("tg_tps", f"tg{bd.get('n_gen', ll.get('n_gen'))} t/s")):
            a, c = bd.get(key), ll.get(key)
            if a is None and c is None:
                continue
            sa = f"{a:.2f} ± {bd[key + '_sd']:.2f}" if a is not None else "—"
            sc = f"{c:.2f} ± {ll[key + '_sd']:.2f}" if c is not None else "—"
            print(f"| {name} | {sa} | {sc} | {ratio(a, c)} |")
        if bd.get("tg_gbps") is not None and bw > 0:
            # both engines' GB/s from blockdraft's bytes per token (same file)
            llg = bd["tg_gbps"] * ll["tg_tps"] / bd["tg_tps"] if ll.get("tg_tps") else None
            print(f"| tg read GB/s (share of the {bw:.1f} GB/s probe) | {bd['tg_gbps']:.1f} ({100 * bd['tg_gbps'] / bw:.0f} %) | "
                  + (f"{llg:.1f} ({100 * llg / bw:.0f} %)" if llg else "—") + " | |")
        vb, vl = bd.get("verify_ms") or [], ll.get("verify_ms") or []
        if vb or vl:
            n = max(len(vb), len(vl))
            depth = bd.get("verify_depth", ll.get("verify_depth"))
            a, c = (vb[-1] if vb else None), (vl[-1] if vl else None)
            print(f"| verify t({n}) ms @ depth {depth} | {fmt(a, 1)} | {fmt(c, 1)} | {ratio(a, c)} |")
        if bd.get("rss_bytes") or ll.get("rss_bytes"):
            sb = f"{bd['rss_bytes'] / 1e9:.2f} (budget {bd['rss_budget_bytes'] / 1e9:.2f})" if bd.get("rss_bytes") else "—"
            sl = f"{ll['rss_bytes'] / 1e9:.2f}" if ll.get("rss_bytes") else "—"
            print(f"| peak RSS GB | {sb} | {sl} | |")
        rb, rl = recurrent(bd), recurrent(ll)
        if rb or rl:
            print(f"| recurrent state MB | {fmt(rb / 1e6 if rb else None, 1)} | {fmt(rl / 1e6 if rl else None, 1)} | |")
            if ll.get("recurrent_verify_bytes"):
                print(f"| recurrent state MB with rollback for a {len(vl)}-row verify | "
                      f"{fmt(bd['recurrent_verify_bytes'] / 1e6 if bd.get('recurrent_verify_bytes') else None, 1)} | "
                      f"{ll['recurrent_verify_bytes'] / 1e6:.1f} (n_rs_seq {len(vl)} snapshots) | |")
            print(f"| KV cache MB | {fmt(bd['kv_bytes'] / 1e6 if bd.get('kv_bytes') else None, 1)} | "
                  f"{fmt(ll['kv_bytes'] / 1e6 if ll.get('kv_bytes') else None, 1)} | |")
        if vb or vl:
            pg = bd.get("peak_gops", 925)
            moe = "moe" in (bd.get("arch") or ll.get("arch") or "")
            print(f"\nverify curve at depth {depth} (median ms of one forward of n tokens, logits on all rows; "
                  f"t/t1 = the cost of n tokens in one-token forwards; GOPS against the {pg:.0f} GOPS int8 peak"
                  + ("; MoE: the GOPS count every expert's weights, so they are no utilisation figure" if moe else "")
                  + "):\n")
            print("| n | blockdraft ms | t/t1 | GOPS | llama.cpp ms | t/t1 | GOPS | bd/llama |")
            print("|---|---|---|---|---|---|---|---|")
            for i in range(n):
                b_ = vb[i] if i < len(vb) else None
                l_ = vl[i] if i < len(vl) else None
                bg = bd["verify_gops"][i] if b_ is not None else None
                lg = ll["verify_gops"][i] if l_ is not None else None
                print(f"| {i + 1} | {fmt(b_)} | {fmt(b_ / vb[0] if b_ else None)} | {fmt(bg, 0)} | {fmt(l_)} | "
                      f"{fmt(l_ / vl[0] if l_ else None)} | {fmt(lg, 0)} | {ratio(b_, l_)} |")
        print()

    # speculative
    spec_rows = []
    for name, tgt, dft in pairs:
        bs = load(f"{d}/bdspec-{name}.json")
        logs = sorted((x for x in os.listdir(d) if x.startswith(f"llspec-{name}-n") and x.endswith(".log")),
                      key=lambda x: int(re.sub(r"\D", "", x[len(f"llspec-{name}-n"):]) or 0))
        if bs is None and not logs and not os.path.exists(f"{d}/bdspec-{name}.log"):
            continue
        if bs and bs.get("spec"):
            s = bs["spec"]
            spec_rows.append(f"| {name} | blockdraft ({'adaptive' if s['adaptive'] else 'fixed'}) | {s['n_max']} | "
                             f"{s['tps']:.2f} ± {s['tps_sd']:.2f} | {s['plain_tps']:.2f} | {s['speedup']:.2f}x | "
                             f"{s['tau']:.2f} | {s['n_accepted']}/{s['n_drafted']} | {'yes' if s['identical'] else 'NO'} |")
            if s.get("first_tps"):
                # the same pair's run on a fresh adaptive state (a one-shot run); the row above is the runs after it
                spec_rows.append(f"| {name} | blockdraft (adaptive, first generation) | {s['n_max']} | "
                                 f"{s['first_tps']:.2f} | {s['plain_tps']:.2f} | {ratio(s['first_tps'], s['plain_tps'])} | — | — | "
                                 f"{'yes' if s['identical'] else 'NO'} |")
        else:
            why = first_line(f"{d}/bdspec-{name}.log", "blockdraft") or "no result"
            spec_rows.append(f"| {name} | blockdraft | | failed: {why[:120]} | | | | | |")
        lp = load(f"{d}/llplain-{name}.json")
        plain = lp.get("plain_tps") if lp else None
        for lg in logs:
            txt = open(os.path.join(d, lg), errors="replace").read()
            nm = lg[len(f"llspec-{name}-n"):-4]
            var = ""
            vf = os.path.join(d, lg[:-4] + ".variant")
            if os.path.exists(vf):
                v = open(vf).read().strip()
                var = f" ({v})" if not v.startswith("MISMATCH") else f" (**loaded {v[9:]}, not libggml-cpu-{variant}.so**)"
            mdec = re.search(r"decoded\s+(\d+) tokens in\s+([\d.]+) seconds, speed:\s+([\d.]+) t/s", txt)
            macc = re.search(r"n_accept\s+=\s+(\d+)", txt)
            mdr = re.search(r"n_drafted\s+=\s+(\d+)", txt)
            if not mdec:
                why = next((x.strip() for x in txt.splitlines() if " E " in x or "error" in x.lower()), "no result")
                spec_rows.append(f"| {name} | llama.cpp draft-dflash{var} | {nm} | failed: {why[:120]} | | | | | |")
                continue
            npred, tps = int(mdec.group(1)), float(mdec.group(3))
            acc = int(macc.group(1)) if macc else 0
            drafted = int(mdr.group(1)) if mdr else 0
            tau = npred / max(1, npred - acc)
            spec_rows.append(f"| {name} | llama.cpp draft-dflash{var} | {nm} | {tps:.2f} | {fmt(plain)} | "
                             f"{ratio(tps, plain)} | {tau:.2f} | {acc}/{drafted} | — |")
    if spec_rows:
        print(f"#### speculative decoding, temperature 0, {T} threads\n")
        print("| pair | engine | n_max | tok/s | plain tok/s | speed-up | tau | accepted/drafted | identical to plain |")
        print("|---|---|---|---|---|---|---|---|---|")
        print("\n".join(spec_rows))
        if any("first generation" in r for r in spec_rows):
            print("\nblockdraft's adaptive runs share one bd_spec, as a server slot's requests do: each starts from "
                  "what the runs before it learned. Its \"first generation\" row is one run from a fresh state (the "
                  "warm-up draft, then a plain step), as a one-shot `blockdraft run` does.")
        print()

    # oversubscription
    busy_rows = []
    for stem, spec, _ in models:
        for eng, pre in (("blockdraft", "bd"), ("llama.cpp", "ll")):
            q = load(f"{d}/busy-{pre}-quiet-{stem}.json")
            b = load(f"{d}/busy-{pre}-busy-{stem}.json")
            if not q and not b:
                continue
            qt, bt = (q or {}).get("tg_tps"), (b or {}).get("tg_tps")
            busy_rows.append(f"| {stem} | {eng} | {fmt(qt)} ± {fmt((q or {}).get('tg_tps_sd'))} | "
                             f"{fmt(bt)} ± {fmt((b or {}).get('tg_tps_sd'))} | {ratio(bt, qt)} |")
    if busy_rows:
        m = re.search(r"busy-loop processes: (\d+)", machine)
        k = m.group(1) if m else "?"
        print(f"#### oversubscription, {T} threads: tg alone, then with {k} busy-loop process(es) running "
              f"(each engine's {T} threads share the {cpu_line.split('|')[1].strip()} with them)\n")
        print("| model | engine | tg t/s alone | tg t/s with the busy loop | busy / alone |")
        print("|---|---|---|---|---|")
        print("\n".join(busy_rows))
        print()
