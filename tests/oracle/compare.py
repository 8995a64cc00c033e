#!/usr/bin/env python3
"""compare.py - compare blockdraft output with bd-oracle (llama.cpp) output.

  compare.py logits ORACLE.json BD.json --tol T [--label NAME]
      Both files hold {"positions":[{"pos":i,"top":[[id,logit],...]},...]}
      (bd-oracle logits / blockdraft eval --json) with the same top-K.
      Per position, with R = oracle top-1 minus oracle top-K logit (the
      spread of the top-K, at least 1.0):
        * every id in both top-K lists: |bd - oracle| <= T * R;
        * ids in the oracle's top half (K/2) that are missing from blockdraft's
          top-K fail, unless the oracle logit is within T*R of blockdraft's
          K-th logit (a boundary case);
        * the top-1 ids agree, unless the oracle's top-2 gap is below 2*T*R
          (a near-tie, where either order is within tolerance).
      Prints the worst relative difference; exits 1 on any violation, or
      with --outliers N on violations at more than N positions (mixture-of-
      experts files: where a router's k-th and (k+1)-th experts nearly tie,
      any last-bit difference upstream may swap an expert, which moves that
      one position's logits a lot and the following ones little).

  compare.py greedy ORACLE.json BD.json [--tie G] [--label NAME]
      ORACLE.json from `bd-oracle greedy` ({"ids":[...],"gaps":[...]}),
      BD.json from `blockdraft run --json` ("generated_ids", or "ids").
      The sequences must be identical up to the first step whose oracle
      top-2 gap is below G (default 0.02 logits): from a near-tie on, either
      continuation is correct. Exits 1 on a difference before that.

  compare.py tokens EXPECTED_TSV ORACLE.jsonl [BD.jsonl]
      The qwen3 tokenizer case table against bd-oracle tokenize --batch
      output (one {"ids":[...]} per case, in order), and optionally against
      blockdraft's ids for the same cases.
"""
import argparse
import json
import sys


def load(path):
    with open(path) as f:
        text = f.read()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        # A tool may print a stats line before/after the object: take the
        # last line that parses.
        for line in reversed(text.splitlines()):
            line = line.strip()
            if line.startswith("{"):
                try:
                    return json.loads(line)
                except json.JSONDecodeError:
                    pass
        raise SystemExit(f"{path}: no JSON object found")


def cmd_logits(a):
    o, b = load(a.oracle), load(a.bd)
    po, pb = o.get("positions"), b.get("positions")
    if not isinstance(po, list) or not isinstance(pb, list):
        print(f"{a.label}: missing 'positions'", file=sys.stderr)
        return 1
    if len(po) != len(pb):
        print(f"{a.label}: {len(po)} oracle positions, {len(pb)} blockdraft positions")
        return 1
    worst, worst_pos, fails, near_ties = 0.0, -1, 0, 0
    bad_pos = []
    for x, y in zip(po, pb):
        fails_before = fails
        pos = x["pos"]
        if y.get("pos") != pos:
            print(f"{a.label}: position mismatch {pos} vs {y.get('pos')}")
            return 1
        to = [(int(i), float(v)) for i, v in x["top"]]
        tb = [(int(i), float(v)) for i, v in y["top"]]
        k = min(len(to), len(tb))
        if k < 2:
            print(f"{a.label}: pos {pos}: top list too short")
            return 1
        to, tb = to[:k], tb[:k]
        R = max(to[0][1] - to[-1][1], 1.0)
        tol = a.tol * R
        mb = dict(tb)
        for i, v in to:
            if i in mb:
                d = abs(mb[i] - v)
                if d / R > worst:
                    worst, worst_pos = d / R, pos
                if d > tol:
                    fails += 1
                    print(f"{a.label}: pos {pos} id {i}: oracle {v:.6f} blockdraft {mb[i]:.6f} "
                          f"(diff {d:.3g} > {tol:.3g})")
        for i, v in to[: max(1, k // 2)]:
            if i not in mb and v - tb[-1][1] > tol:
                fails += 1
                print(f"{a.label}: pos {pos}: oracle top id {i} ({v:.6f}) missing from blockdraft's "
                      f"top-{k} (whose last logit is {tb[-1][1]:.6f})")
        gap = to[0][1] - to[1][1]
        if to[0][0] != tb[0][0]:
            if gap < 2 * tol:
                near_ties += 1
            else:
                fails += 1
                print(f"{a.label}: pos {pos}: top-1 oracle {to[0][0]} blockdraft {tb[0][0]} "
                      f"(oracle gap {gap:.4g})")
        if fails > fails_before:
            bad_pos.append(pos)
    extra = f", outlier positions {bad_pos} (at most {a.outliers} allowed)" if a.outliers else ""
    print(f"{a.label}: {len(po)} positions, worst |diff|/range {worst:.3g} at pos {worst_pos} "
          f"(tol {a.tol:g}), top-1 near-tie swaps {near_ties}, violations {fails}{extra}")
    return 1 if len(bad_pos) > a.outliers else 0


def cmd_greedy(a):
    o, b = load(a.oracle), load(a.bd)
    io, gaps = o["ids"], o.get("gaps", [])
    ib = b.get("generated_ids", b.get("ids"))
    if not isinstance(ib, list):
        print(f"{a.label}: blockdraft JSON has no 'generated_ids'/'ids'")
        return 1
    n = 0
    for k, t in enumerate(io):
        if k < len(gaps) and gaps[k] < a.tie:
            print(f"{a.label}: near-tie at step {k} (oracle gap {gaps[k]:.3g}); compared {n} tokens")
            break
        if k >= len(ib):
            print(f"{a.label}: blockdraft stopped after {len(ib)} tokens, oracle has {len(io)}")
            return 1
        if ib[k] != t:
            print(f"{a.label}: step {k}: oracle {t} blockdraft {ib[k]} (oracle gap "
                  f"{gaps[k] if k < len(gaps) else float('nan'):.4g})")
            print(f"  oracle     {io[:k + 1]}\n  blockdraft {ib[:k + 1]}")
            return 1
        n += 1
    else:
        print(f"{a.label}: {n} greedy tokens identical")
    return 0


def read_cases(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        header = None
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("#") or not line:
                continue
            cols = line.split("\t")
            if header is None:
                header = cols
                continue
            rows.append(dict(zip(header, cols)))
    return rows


def cmd_tokens(a):
    cases = read_cases(a.cases)
    got = [json.loads(l) for l in open(a.oracle) if l.strip()]
    bd = [json.loads(l) for l in open(a.bd) if l.strip()] if a.bd else None
    if len(got) != len(cases) or (bd is not None and len(bd) != len(cases)):
        print(f"case count mismatch: {len(cases)} cases, {len(got)} oracle lines"
              + (f", {len(bd)} blockdraft lines" if bd is not None else ""))
        return 1
    bad_o = bad_b = 0
    for i, c in enumerate(cases):
        exp = [int(t) for t in c["expected_ids"].split()] if c["expected_ids"] else []
        if got[i].get("ids") != exp:
            bad_o += 1
            print(f"{c['name']}: oracle {got[i].get('ids')} != table {exp}")
        if bd is not None and bd[i].get("ids") != got[i].get("ids"):
            bad_b += 1
            print(f"{c['name']}: blockdraft {bd[i].get('ids')} != oracle {got[i].get('ids')}")
    print(f"{len(cases)} cases: oracle vs table {bad_o} differ"
          + (f", blockdraft vs oracle {bad_b} differ" if bd is not None else ""))
    return 1 if bad_o or bad_b else 0


def main():
    p = argparse.ArgumentParser()
    sp = p.add_subparsers(dest="cmd", required=True)
    l = sp.add_parser("logits")
    l.add_argument("oracle")
    l.add_argument("bd")
    l.add_argument("--tol", type=float, required=True)
    l.add_argument("--outliers", type=int, default=0)
    l.add_argument("--label", default="logits")
    g = sp.add_parser("greedy")
    g.add_argument("oracle")
    g.add_argument("bd")
    g.add_argument("--tie", type=float, default=0.02)
    g.add_argument("--label", default="greedy")
    t = sp.add_parser("tokens")
    t.add_argument("cases")
    t.add_argument("oracle")
    t.add_argument("bd", nargs="?")
    a = p.parse_args()
    return {"logits": cmd_logits, "greedy": cmd_greedy, "tokens": cmd_tokens}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
