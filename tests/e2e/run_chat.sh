#!/usr/bin/env bash
# run_chat.sh - `blockdraft run -cnv` (conversation mode, llama.cpp's flag
# names) against independent renderings of the chat template.
#
# 1. One turn: -cnv -st with -p (and -sys, --chat-template-kwargs,
#    --chat-template-file) must feed the model exactly the tokens of the
#    fixture's Python-Jinja2 rendering of the same conversation
#    (fixtures/templates/expected/, tokenized by `blockdraft tokenize`,
#    which oracle_tokenize.sh pins to llama.cpp).
# 2. Several turns from stdin (one user message a line, empty lines
#    skipped, end of input ends): every turn's prompt must be the tokens of
#    Python Jinja2's rendering of the whole conversation so far, the
#    replies included (a --constant-output model replies "!!!" to -n 3), and
#    from the second turn on the session must reuse the earlier prefix.
# 3. Lossless: the same two-turn conversation with a DFlash drafter gives
#    the same replies, token for token, as without it (greedy).
# 4. Misuse: -no-cnv with a conversation flag, both template flags,
#    kwargs that are not an object, a template that does not parse or
#    raises: a message and a non-zero exit; a model without a template
#    falls back to ChatML with a warning.
set -u
: "${BD_BIN:?}" "${BD_SHARED:?}"
T=$(mktemp -d /tmp/bd-e2e-chat.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
V="$BD_SHARED/fixtures/qwen3-tokenizer/qwen3-vocab.gguf"
FX="$BD_SHARED/fixtures/templates"
# qwen3 tiny models with the Qwen3 vocabulary, whose tokenizer.chat_template
# is the fixture's Qwen-Qwen3-0.6B.jinja (fixtures/templates/README.md)
"$BD_BIN" make-model --arch qwen3 --shape tiny --quant q8_0 --seed 5 --vocab "$V" -o "$T/q.gguf" >/dev/null 2>&1 ||
    { echo "FAIL: make-model"; exit 1; }
"$BD_BIN" make-model --arch qwen3 --shape tiny --quant q8_0 --seed 5 --vocab "$V" --constant-output \
    -o "$T/c.gguf" >/dev/null 2>&1 || { echo "FAIL: make-model --constant-output"; exit 1; }
"$BD_BIN" make-model --arch dflash --target "$T/q.gguf" --drafter random --layers 2 --quant q8_0 --seed 5 \
    -o "$T/d.gguf" >/dev/null 2>&1 || { echo "FAIL: make-model --arch dflash"; exit 1; }

# ids of a JSON object's key, or of each line's
ids() { python3 -c 'import json,sys; [print(json.loads(l)[sys.argv[1]]) for l in sys.stdin if l.strip()]' "$1"; }

# ---- 1. one turn against the fixture renderings -----------------------------
# case  template-file (- = the model's)  extra flags
one_turn() {
    local case=$1 tmpl=$2 dir=$3; shift 3
    local msgs sys user
    msgs=$(python3 -c '
import json, sys
c = [x for x in json.load(open(sys.argv[1]))["cases"] if x["name"] == sys.argv[2]][0]
m = c["messages"]
print(json.dumps([x["content"] for x in m if x["role"] == "system"] + [x["content"] for x in m if x["role"] == "user"]))' \
        "$FX/cases.json" "$case")
    sys=$(python3 -c 'import json,sys; m=json.loads(sys.argv[1]); print(m[0] if len(m) > 1 else "")' "$msgs")
    user=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])[-1])' "$msgs")
    local args=(-m "$T/q.gguf" -cnv -st -p "$user" --temp 0 -n 1 -t 2 --json "$@")
    [ -n "$sys" ] && args+=(-sys "$sys")
    [ "$tmpl" != - ] && args+=(--chat-template-file "$FX/$tmpl.jinja")
    local got want
    got=$("$BD_BIN" run "${args[@]}" 2>"$T/err" | ids prompt_ids) || true
    want=$("$BD_BIN" tokenize -m "$T/q.gguf" --json -f "$FX/expected/$dir/$case.txt" | ids ids)
    if [ -n "$got" ] && [ "$got" = "$want" ]; then
        echo "ok: $case ($dir): the prompt is the Jinja2 rendering's tokens"
    else
        bad "$case ($dir): prompt ids $got, the fixture rendering tokenizes to $want ($(tail -1 "$T/err"))"
    fi
}
one_turn user-gen - Qwen-Qwen3-0.6B
one_turn system-user-gen - Qwen-Qwen3-0.6B
one_turn user-gen-nothink - Qwen-Qwen3-0.6B --chat-template-kwargs '{"enable_thinking": false}'
one_turn system-user-nothink - Qwen-Qwen3-0.6B --chat-template-kwargs '{"enable_thinking": false}'
one_turn user-gen Qwen-Qwen2.5-7B-Instruct Qwen-Qwen2.5-7B-Instruct
one_turn system-user-gen Qwen3.5-4B Qwen3.5-4B

# ---- 2. several turns from stdin --------------------------------------------
printf 'What is 2+2?\n\nAnd <|im_start|> 3+3?\r\n' >"$T/stdin"
"$BD_BIN" run -m "$T/c.gguf" -cnv -sys "Be brief." -p "Hello!" --temp 0 -n 3 -t 2 --json <"$T/stdin" \
    >"$T/turns.jsonl" 2>"$T/err" || bad "three turns from stdin: exit $? ($(tail -1 "$T/err"))"
python3 - "$T/turns.jsonl" "$FX/Qwen-Qwen3-0.6B.jinja" "$BD_BIN" "$T/c.gguf" "$T" <<'PY' || fail=1
import json, subprocess, sys
import jinja2, jinja2.ext, jinja2.sandbox

turns = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
src, bd, model, tmp = open(sys.argv[2]).read(), sys.argv[3], sys.argv[4], sys.argv[5]
env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                   extensions=[jinja2.ext.loopcontrols])
env.filters["tojson"] = lambda x, **k: json.dumps(x, ensure_ascii=False)
tpl = env.from_string(src)
# the empty line is skipped; "\r\n" ends a line like "\n"
users = ["Hello!", "What is 2+2?", "And <|im_start|> 3+3?"]
ok = True
if len(turns) != len(users):
    print(f"FAIL: {len(turns)} turns for {len(users)} user lines")
    sys.exit(1)
msgs = [{"role": "system", "content": "Be brief."}]
for k, (t, u) in enumerate(zip(turns, users)):
    msgs.append({"role": "user", "content": u})
    text = tpl.render(messages=msgs, tools=None, add_generation_prompt=True, bos_token="<|endoftext|>",
                      eos_token="<|im_end|>")
    # the user's "<|im_start|>" is text, not a control token: the rendering
    # around it is tokenized with control tokens parsed, the message without
    path = f"{tmp}/r{k}.txt"
    head, _, tail = text.rpartition(u) if "<|" in u else (text, "", "")
    def tok(s, special):
        open(path, "w").write(s)
        extra = [] if special else ["--no-parse-special"]
        out = subprocess.run([bd, "tokenize", "-m", model, "--json", "-f", path] + extra, capture_output=True,
                             text=True, check=True).stdout
        return json.loads(out)["ids"]
    want = tok(head, True) + (tok(u, False) + tok(tail, True) if "<|" in u else [])
    if t["prompt_ids"] != want:
        print(f"FAIL: turn {k + 1}: prompt ids differ from the Jinja2 rendering\n  got  {t['prompt_ids']}\n  want {want}")
        ok = False
    if t["text"] != "!!!":
        print(f"FAIL: turn {k + 1}: reply {t['text']!r}, the constant-output model says '!!!'")
        ok = False
    cached = t["stats"]["n_prompt_cached"]
    if k and not (0 < cached <= len(turns[k - 1]["prompt_ids"])):
        print(f"FAIL: turn {k + 1}: {cached} prompt tokens reused from the session")
        ok = False
    msgs.append({"role": "assistant", "content": t["text"]})
print(f"ok: {len(turns)} turns from stdin, each prompt the Jinja2 rendering of the conversation so far" if ok else "")
sys.exit(0 if ok else 1)
PY

# ---- 3. lossless with a drafter ---------------------------------------------
printf 'Tell me more.\n' >"$T/stdin2"
"$BD_BIN" run -m "$T/q.gguf" -cnv -p "Once upon a time" --temp 0 -n 12 --ignore-eos -t 2 --json <"$T/stdin2" |
    ids generated_ids >"$T/plain" 2>"$T/err"
"$BD_BIN" run -m "$T/q.gguf" -md "$T/d.gguf" -cnv -p "Once upon a time" --temp 0 -n 12 --ignore-eos -t 2 --json \
    <"$T/stdin2" | ids generated_ids >"$T/spec" 2>>"$T/err"
if [ "$(wc -l <"$T/plain")" = 2 ] && cmp -s "$T/plain" "$T/spec"; then
    echo "ok: two turns with a DFlash drafter reply as without it"
else
    bad "two turns with a drafter: $(tr '\n' ' ' <"$T/spec") against plain $(tr '\n' ' ' <"$T/plain")"
fi

# ---- 4. misuse --------------------------------------------------------------
expect_fail() {
    local want=$1 what=$2; shift 2
    "$BD_BIN" run -m "$T/q.gguf" -p hi -n 1 "$@" >"$T/out" 2>&1 </dev/null
    local rc=$?
    if [ $rc -ne 0 ] && grep -q -- "$want" "$T/out"; then echo "ok: $what: exit $rc"; else
        bad "$what: exit $rc, output $(head -c 300 "$T/out")"; fi
}
printf '{%% for m in messages %%}{{ m.content ' >"$T/broken.jinja"
printf '{{ raise_exception("no system messages here") }}' >"$T/raise.jinja"
expect_fail "needs conversation mode" "-sys with -no-cnv" -sys x -no-cnv
expect_fail "either --chat-template or --chat-template-file" "both template flags" --chat-template chatml \
    --chat-template-file "$T/raise.jinja"
expect_fail "not a JSON object" "kwargs not an object" -cnv -st --chat-template-kwargs '[1]'
expect_fail "only 'chatml' is known" "a built-in template name other than chatml" -cnv -st --chat-template llama3
expect_fail "TemplateSyntaxError" "a template that does not parse" -cnv -st --chat-template-file "$T/broken.jinja"
expect_fail "no system messages here" "a template that raises" -cnv -st --chat-template-file "$T/raise.jinja"
"$BD_BIN" run -m "$BD_SHARED/fixtures/stories260K/stories260K.gguf" -cnv -st -p "Hi" -n 2 --temp 0 --json \
    >"$T/out" 2>"$T/err" </dev/null && grep -q "no chat template; using ChatML" "$T/err" &&
    python3 -c 'import json,sys; sys.exit(0 if len(json.load(open(sys.argv[1]))["prompt_ids"]) > 5 else 1)' "$T/out" &&
    echo "ok: a model without a chat template falls back to ChatML" || bad "ChatML fallback"

[ $fail -eq 0 ] && echo "run_chat: all checks passed" || { echo "run_chat: FAILED"; exit 1; }
