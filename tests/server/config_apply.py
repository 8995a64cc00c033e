# config_apply.py - a model config means the same to `run NAME` and to
# `serve` (one mapping, gallery_config_apply), and repeat_penalty is used:
#  * n_draft: 2 sets the draft length in both (`run NAME` ignored it once);
#  * repeat_penalty: 1.5 in a config gives the ids of `run -m ...
#    --repeat-penalty 1.5`, which differ from the ids without a penalty
#    (the key was parsed and ignored once), in `run NAME` and in `serve`;
#  * greedy speculative decoding with a penalty stays token-identical to
#    plain decoding (DFlash and ngram), and the request field
#    repeat_penalty of /v1/completions gives the same ids as the flag;
#  * the adaptive draft length: on by default with a DFlash drafter, off
#    with the config option spec_adaptive:false, a --spec-adaptive flag
#    over the config (run NAME), the same in `serve`;
#  * cache_type_k: f16 (LocalAI's key) gives an f16 K cache: 3/4 of the
#    f32 cache's bytes, 1/2 with -ctv f16 over it, the ids of
#    `run -m ... -ctk f16`, the same cache in `serve` (its load line);
#    llama.cpp's other cache types are refused naming the three held here,
#    and q8_0 on heads that are not whole blocks of 32, naming the size;
#  * the drafter's caches: -ctkd / -ctvd and the option
#    draft_cache_type_k / _v reach the DFlash drafter;
#  * rope_scaling and parameters.rope_freq_scale mean the CLI's RoPE flags,
#    in `run NAME` and `serve`;
#  * a config's context_size above the trained context and threads above
#    the CPUs are capped by `run NAME` as by `serve`, with a message; the
#    same values as flags are the operator's own and are kept.
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from srvtest import BIN, TARGET, DRAFTER, Server, check, finish, jbody, request, tmpdir  # noqa: E402

T = tmpdir()
models = os.path.join(T, "models")
os.makedirs(os.path.join(models, "st"))
shutil.copy(TARGET, os.path.join(models, "st", "t.gguf"))
shutil.copy(DRAFTER, os.path.join(models, "st", "d.gguf"))
with open(os.path.join(models, "cfg-draft.yaml"), "w") as f:
    f.write("name: cfg-draft\nbackend: blockdraft\ndraft_model: st/d.gguf\nn_draft: 2\ncontext_size: 512\n"
            "parameters:\n  model: st/t.gguf\n  temperature: 0\n")
with open(os.path.join(models, "cfg-fixed.yaml"), "w") as f:
    f.write("name: cfg-fixed\nbackend: blockdraft\ndraft_model: st/d.gguf\ncontext_size: 512\n"
            "options:\n  - spec_adaptive:false\n  - spec_n_max:4\n"
            "parameters:\n  model: st/t.gguf\n  temperature: 0\n")
with open(os.path.join(models, "cfg-pen.yaml"), "w") as f:
    f.write("name: cfg-pen\nbackend: blockdraft\ncontext_size: 512\n"
            "parameters:\n  model: st/t.gguf\n  temperature: 0\n  repeat_penalty: 1.5\n")
with open(os.path.join(models, "cfg-dq8.yaml"), "w") as f:
    f.write("name: cfg-dq8\nbackend: blockdraft\ndraft_model: st/d.gguf\ncontext_size: 512\n"
            "options:\n  - draft_cache_type_v:q8_0\nparameters:\n  model: st/t.gguf\n  temperature: 0\n")
with open(os.path.join(models, "cfg-rope.yaml"), "w") as f:
    f.write("name: cfg-rope\nbackend: blockdraft\ncontext_size: 512\nrope_scaling: linear\n"
            "parameters:\n  model: st/t.gguf\n  temperature: 0\n  rope_freq_scale: 0.5\n")
with open(os.path.join(models, "cfg-kv16.yaml"), "w") as f:
    f.write("name: cfg-kv16\nbackend: blockdraft\ncontext_size: 512\ncache_type_k: f16\n"
            "parameters:\n  model: st/t.gguf\n  temperature: 0\n")
with open(os.path.join(models, "cfg-huge.yaml"), "w") as f:
    f.write("name: cfg-huge\nbackend: blockdraft\ncontext_size: 1000000\nthreads: 4096\n"
            "parameters:\n  model: st/t.gguf\n  temperature: 0\n")
env = dict(os.environ, BLOCKDRAFT_MODELS=models)
PROMPT = "Once upon a time"


def run(*args):
    r = subprocess.run([BIN, "run"] + list(args) + ["-p", PROMPT, "-n", "48", "-t", "1", "--json"],
                       capture_output=True, text=True, env=env, timeout=120)
    if r.returncode != 0:
        print(r.stderr)
        return None
    return json.loads(r.stdout)


# n_draft
o = run("cfg-draft")
check(o is not None and o["stats"]["spec"]["type"] == "draft-dflash", "run NAME: the config's drafter is used")
check(o is not None and o["stats"]["spec"]["n_max"] == 2,
      "run NAME: n_draft 2 sets the draft length (got %s)" % (o and o["stats"]["spec"]["n_max"]))
draft_ids = o["generated_ids"] if o else None
check(o is not None and o["stats"]["spec"]["adaptive"] is True, "run NAME: a DFlash drafter drafts adaptively by default")

# spec_adaptive
fx = run("cfg-fixed")
check(fx is not None and fx["stats"]["spec"]["adaptive"] is False and fx["stats"]["spec"]["n_max"] == 4,
      "run NAME: options spec_adaptive:false turns the adaptive draft length off")
fa = run("cfg-fixed", "--spec-adaptive")
check(fa is not None and fa["stats"]["spec"]["adaptive"] is True, "run NAME: --spec-adaptive wins over the config")
check(fx and fa and o and fx["generated_ids"] == fa["generated_ids"] == o["generated_ids"],
      "fixed and adaptive drafting give the same ids")

# repeat_penalty
plain = run("-m", TARGET, "-c", "512", "--temp", "0")
flag = run("-m", TARGET, "-c", "512", "--temp", "0", "--repeat-penalty", "1.5")
named = run("cfg-pen")
check(plain and flag and plain["generated_ids"] != flag["generated_ids"],
      "--repeat-penalty 1.5 changes the greedy ids")
check(named and flag and named["generated_ids"] == flag["generated_ids"],
      "run NAME: repeat_penalty 1.5 in the config gives the ids of --repeat-penalty 1.5")
# a window of one token: only immediate repeats are penalized
last1 = run("-m", TARGET, "-c", "512", "--temp", "0", "--repeat-penalty", "1.5", "--repeat-last-n", "1")
check(last1 and flag and last1["generated_ids"] != flag["generated_ids"], "--repeat-last-n changes the window")
off = run("-m", TARGET, "-c", "512", "--temp", "0", "--repeat-penalty", "1.5", "--repeat-last-n", "0")
check(off and plain and off["generated_ids"] == plain["generated_ids"], "--repeat-last-n 0 turns the penalty off")
r = subprocess.run([BIN, "run", "-m", TARGET, "-p", "x", "--repeat-penalty", "0"], capture_output=True, text=True,
                   timeout=30)
check(r.returncode == 2 and "greater than 0" in r.stderr, "--repeat-penalty 0 is refused")

# a config's context_size and threads are bounded (an index is untrusted)
r = subprocess.run([BIN, "run", "cfg-huge", "-p", PROMPT, "-n", "8", "--json"], capture_output=True, text=True,
                   env=env, timeout=120)
hj = json.loads(r.stdout) if r.returncode == 0 else None
trained = run("-m", TARGET, "-c", "0", "--temp", "0")
check(hj and trained and hj["stats"]["kv_bytes"] == trained["stats"]["kv_bytes"] and
      re.search(r"context_size 1000000 capped at the model's trained context \d+", r.stderr) and
      re.search(r"threads 4096 capped at the \d+ CPUs", r.stderr),
      "run NAME: context_size and threads of a config capped (%s %s)" % (r.returncode, r.stderr.strip()[-200:]))
r = subprocess.run([BIN, "run", "cfg-huge", "-c", "2048", "-p", PROMPT, "-n", "1", "-t", "1", "--json"],
                   capture_output=True, text=True, env=env, timeout=120)
hj = json.loads(r.stdout) if r.returncode == 0 else None
check(hj and trained and hj["stats"]["kv_bytes"] > trained["stats"]["kv_bytes"] and "capped" not in r.stderr,
      "run NAME: -c over the config is the operator's own, not capped (%s)" % r.stderr.strip()[-200:])

# cache_type_k / -ctk / -ctv
k16 = run("cfg-kv16")
kv16 = run("cfg-kv16", "-ctv", "f16")
flag16 = run("-m", TARGET, "-c", "512", "--temp", "0", "-ctk", "f16")
# (the configs' context_size 512 is capped at stories260K's trained 128, so
# the f32 cache to compare with is that of -c 0)
b32 = trained and trained["stats"]["kv_bytes"]
check(k16 and b32 and k16["stats"]["kv_bytes"] * 4 == b32 * 3,
      "run NAME: cache_type_k f16 holds K in f16 (%s of %s bytes)" % (k16 and k16["stats"]["kv_bytes"], b32))
check(kv16 and b32 and kv16["stats"]["kv_bytes"] * 2 == b32, "run NAME: -ctv f16 over the config halves the cache")
check(k16 and flag16 and k16["generated_ids"] == flag16["generated_ids"], "run NAME: cache_type_k f16 means -ctk f16")
for bad in (["-ctk", "q4_K"], ["--cache-type-v", "fp16"]):
    r = subprocess.run([BIN, "run", "-m", TARGET, "-p", "x"] + bad, capture_output=True, text=True, timeout=30)
    check(r.returncode == 2 and "f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1" in r.stderr,
          "%s %s is refused naming the types held" % tuple(bad))
# -fa / --flash-attn: llama.cpp's values taken (nothing changes: one attention
# kernel for every cache type), another value refused
fa = run("-m", TARGET, "-c", "0", "--temp", "0", "-fa", "on")
check(fa and trained and fa["generated_ids"] == trained["generated_ids"], "run -fa on: taken, the same output")
r = subprocess.run([BIN, "run", "-m", TARGET, "-p", "x", "--flash-attn", "maybe"], capture_output=True, text=True,
                   timeout=30)
check(r.returncode == 2 and "on, off or auto" in r.stderr, "--flash-attn maybe is refused naming the values")
# llama.cpp's other cache types are held: bf16 halves the cache as f16 does
# (stories260K's heads of 8 hold no blocks of 32: those are oracle_logits.sh's)
bf = run("-m", TARGET, "-c", "0", "--temp", "0", "-ctk", "bf16", "-ctv", "bf16")
check(bf and b32 and bf["stats"]["kv_bytes"] * 2 == b32, "run -ctk bf16 -ctv bf16 halves the cache")
# the drafter's caches: -ctkd / -ctvd and the option draft_cache_type_k / _v reach the
# DFlash drafter (whose heads of 8 cannot hold q8_0 either); f16 keeps the output
r = subprocess.run([BIN, "run", "cfg-dq8", "-p", "x", "-n", "1"], capture_output=True, text=True, env=env, timeout=60)
check(r.returncode != 0 and "drafter KV cache type q8_0 needs a head size that is a multiple of 32 (the drafter's is 8)"
      in r.stderr, "run NAME: the option draft_cache_type_v:q8_0 reaches the drafter (%s)" % r.stderr.strip()[-120:])
r = subprocess.run([BIN, "run", "-m", TARGET, "-md", DRAFTER, "-p", "x", "-n", "1", "-ctkd", "q8_0"],
                   capture_output=True, text=True, timeout=60)
check(r.returncode != 0 and "drafter KV cache type q8_0" in r.stderr, "-ctkd q8_0 reaches the DFlash drafter")
d16 = run("-m", TARGET, "-c", "512", "--temp", "0", "-md", DRAFTER, "-ctkd", "f16", "-ctvd", "f16")
check(d16 and plain and d16["generated_ids"] == plain["generated_ids"] and d16["stats"]["spec"]["n_accepted"] > 0,
      "-ctkd / -ctvd f16: DFlash output identical to plain greedy")
# q8_0 rows are blocks of 32: stories260K's heads of 8 cannot hold them (llama.cpp aborts)
r = subprocess.run([BIN, "run", "-m", TARGET, "-p", "x", "-n", "1", "-ctv", "q8_0"], capture_output=True, text=True,
                   timeout=30)
check(r.returncode != 0 and "q8_0 needs a head size that is a multiple of 32 (the model's is 8)" in r.stderr,
      "-ctv q8_0 on heads of 8 is refused naming the head size (%s)" % r.stderr.strip()[-120:])

# rope_scaling / parameters.rope_freq_scale (LocalAI's keys) mean --rope-scaling / --rope-freq-scale
rope = run("cfg-rope")
rflag = run("-m", TARGET, "-c", "512", "--temp", "0", "--rope-scaling", "linear", "--rope-freq-scale", "0.5")
check(rope and rflag and plain and rope["generated_ids"] == rflag["generated_ids"] != plain["generated_ids"],
      "run NAME: rope_scaling linear + rope_freq_scale 0.5 give the flags' ids (not the file's RoPE)")

# lossless with a penalty (greedy)
for extra in (["-md", DRAFTER], ["-md", DRAFTER, "--spec-draft-n-max", "3"], ["--spec-type", "ngram-simple", "--spec-ngram-size-n", "1"]):
    sp = run("-m", TARGET, "-c", "512", "--temp", "0", "--repeat-penalty", "1.5", *extra)
    check(sp and flag and sp["generated_ids"] == flag["generated_ids"] and sp["stats"]["spec"]["n_drafted"] > 0,
          "speculative %s with a penalty: ids identical to plain" % " ".join(os.path.basename(x) for x in extra))

# serve: the same configs mean the same
s = Server(T, "cfg", ["--models-dir", models, "-t", "1"], env={"BLOCKDRAFT_MODELS": models})
p = s.port


def complete(model, **kw):
    body = {"model": model, "prompt": PROMPT, "max_tokens": 48}
    body.update(kw)
    st, _, b = request(p, "POST", "/v1/completions", body, timeout=120)
    j = jbody(b)
    if st != 200:
        print(st, b[:300])
        return None
    return j


j = complete("cfg-draft")
check(j and j["speculative"]["n_max"] == 2, "serve: n_draft 2 sets the draft length")
check(j and o and j["choices"][0]["text"] == o["text"], "serve and run NAME give the same text (cfg-draft)")
check(j and j["speculative"]["adaptive"] is True, "serve: a DFlash drafter drafts adaptively by default")
j = complete("cfg-fixed")
check(j and j["speculative"]["adaptive"] is False and j["speculative"]["n_max"] == 4 and fx and
      j["choices"][0]["text"] == fx["text"], "serve: options spec_adaptive:false is used")
j = complete("cfg-pen")
check(j and named and j["choices"][0]["text"] == named["text"], "serve: repeat_penalty from the config is used")
j = complete("cfg-pen", repeat_penalty=1.0)
check(j and plain and j["choices"][0]["text"] == plain["text"], "serve: the request's repeat_penalty 1.0 wins")
st, _, b = request(p, "POST", "/v1/completions", {"model": "cfg-pen", "prompt": "x", "repeat_penalty": 0})
check(st == 400, "serve: repeat_penalty 0 -> 400")
j = complete("cfg-rope")
check(j and rope and j["choices"][0]["text"] == rope["text"], "serve: the config's RoPE settings are used")
j = complete("cfg-kv16")
check(j and k16 and j["choices"][0]["text"] == k16["text"], "serve: cache_type_k f16 gives run NAME's text")
with open(s.log_path, "rb") as f:
    log = f.read().decode("utf-8", "replace")
check(re.search(r"loaded cfg-kv16 \(.*, KV cache K f16 V f32 ", log) is not None,
      "serve: cfg-kv16 is loaded with an f16 K cache")
check(s.stop() == 0, "server exits cleanly")
shutil.rmtree(T, ignore_errors=True)
finish()
