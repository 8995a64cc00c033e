#!/usr/bin/env bash
# run_llama_flags.sh - `blockdraft run` with the flags llama-cli /
# llama-completion users bring.
#
# 1. Escapes (llama.cpp's -e, on by default: common/arg.cpp calls
#    string_process_escapes on the prompt): \n \r \t \' \" \\ and \xHH in -p
#    or -f text become bytes, any other backslash stays. The expected
#    bytes below are written by hand from llama.cpp's rules and fed to a
#    second run as the literal prompt (-f for the NUL byte); both runs must
#    see the same prompt tokens. --no-escape keeps the text as given.
#    -f drops one trailing newline of the file (llama.cpp's -f), -sysf one of
#    its system prompt; of -p and -f the last wins; -n -2 (until the context
#    is full) and --predict are taken.
# 2. Flags with nothing to act on here (-ngl, --mlock, -co on, -ub, -tb,
#    --no-warmup, -v): one note line each on stderr, exit 0, the same output
#    as without them.
# 3. Flags blockdraft cannot honour (-hf, -i, --mirostat, -r): exit 2 and a
#    message naming what to use instead; a noted flag without its value:
#    exit 2 and a message.
set -u
: "${BD_BIN:?}" "${BD_SHARED:?}"
T=$(mktemp -d /tmp/bd-e2e-runflags.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
M="$BD_SHARED/fixtures/stories260K/stories260K.gguf"

ids() { python3 -c 'import json,sys; print(json.load(sys.stdin)["prompt_ids"])'; }
run_ids() { "$BD_BIN" run -m "$M" -n 1 --temp 0 -t 1 --json "$@" 2>"$T/err" | ids; }

# --- 1. escapes ---------------------------------------------------------
check_escape() { # $1: the -p text, $2: printf format of the expected bytes
    local got want
    got=$(run_ids -p "$1") || { bad "run -p '$1'"; return; }
    printf "$2" >"$T/want.txt"
    want=$(run_ids -f "$T/want.txt" --no-escape) || { bad "run -f (expected bytes of '$1')"; return; }
    [ "$got" = "$want" ] || bad "-p '$1': prompt ids $got, expected those of the bytes '$2': $want"
}
check_escape 'Once\nupon\ta\rtime' 'Once\nupon\ta\rtime'
check_escape 'say \"hi\" and \x27bye\x27' 'say "hi" and '"'"'bye'"'"''
check_escape "it\\'s a\\\\b" "it's a\\\\b"
check_escape 'A\x41\x7a.' 'AAz.'
check_escape 'a\x00b' 'a\000b'
# not escapes: kept as written (\q, \x with fewer than two bytes after it,
# \x and two bytes strtol does not read whole, a trailing backslash)
check_escape 'a\qb' 'a\\qb'
check_escape 'end\x4' 'end\\x4'
check_escape 'g\xZZh' 'g\\xZZh'
check_escape 'tail\' 'tail\\'
# --no-escape: as given; -f text is processed too (as llama.cpp's -f)
got=$(run_ids -p 'a\nb' --no-escape)
printf 'a\\nb' >"$T/lit.txt"
want=$(run_ids -f "$T/lit.txt" --no-escape)
[ "$got" = "$want" ] || bad "--no-escape -p: $got against the literal text's $want"
printf 'a\nb' >"$T/nl.txt"
got=$(run_ids -f "$T/lit.txt")
want=$(run_ids -f "$T/nl.txt")
[ "$got" = "$want" ] || bad "-f with \\n: $got, expected the newline's $want"
[ "$(run_ids -p 'a\nb' -e)" = "$want" ] || bad "-e: the escape not processed"
# -f: one trailing newline dropped (two: one kept)
printf 'Once upon a time\n' >"$T/f1.txt"
printf 'Once upon a time\n\n' >"$T/f2.txt"
[ "$(run_ids -f "$T/f1.txt")" = "$(run_ids -p 'Once upon a time')" ] || bad "-f kept the file's trailing newline"
[ "$(run_ids -f "$T/f2.txt")" = "$(run_ids -p 'Once upon a time\n')" ] || bad "-f dropped more than one newline"
# -p and -f: the last one given wins (llama.cpp's -p and -f both set the prompt)
[ "$(run_ids -f "$T/f1.txt" -p 'Hi')" = "$(run_ids -p 'Hi')" ] || bad "-f then -p: not -p's prompt"
[ "$(run_ids -p 'Hi' -f "$T/f1.txt")" = "$(run_ids -p 'Once upon a time')" ] || bad "-p then -f: not the file's prompt"
# -sysf: the file's text less one trailing newline, as -sys
printf 'Be brief.\n' >"$T/sys.txt"
got=$(run_ids -cnv -st -sysf "$T/sys.txt" -p 'Hi')
want=$(run_ids -cnv -st -sys 'Be brief.' -p 'Hi')
[ -n "$want" ] && [ "$got" = "$want" ] || bad "-sysf: $got against -sys's $want"
# -n -2 and --predict
n2=$("$BD_BIN" run -m "$M" -p "Once" -n -2 -c 24 --temp 0 -t 1 --json 2>"$T/err" |
    python3 -c 'import json,sys; d=json.load(sys.stdin); print(len(d["prompt_ids"]) + len(d["generated_ids"]))') ||
    bad "-n -2: $(cat "$T/err")"
[ "${n2:-0}" -le 25 ] && [ "${n2:-0}" -ge 3 ] || bad "-n -2 -c 24: $n2 tokens in all (the context, and the last token sampled from it)"
"$BD_BIN" run -m "$M" -p "Once" --predict 3 --temp 0 -t 1 --json 2>"$T/err" |
    python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(len(d["generated_ids"]) != 3)' || bad "--predict 3"

# --- 2. noted flags -------------------------------------------------------
"$BD_BIN" run -m "$M" -p "Once upon a time" -n 12 --temp 0 -t 1 >"$T/plain.out" 2>/dev/null ||
    bad "run without llama.cpp's flags"
if "$BD_BIN" run -m "$M" -p "Once upon a time" -n 12 --temp 0 -t 1 -ngl 99 --mlock -co on -ub 64 -tb 2 \
    --no-warmup -v >"$T/noted.out" 2>"$T/noted.err"; then
    cmp -s "$T/plain.out" "$T/noted.out" || bad "the noted flags changed the output"
    for f in "-ngl 99" "--mlock" "-co on" "-ub 64" "-tb 2" "--no-warmup" "-v"; do
        [ "$(grep -c "^blockdraft run: note: $f ignored: " "$T/noted.err")" = 1 ] ||
            bad "no single note for $f: $(cat "$T/noted.err")"
    done
else
    bad "run with -ngl 99 --mlock ... exited $?: $(cat "$T/noted.err")"
fi

# --- 3. refused flags -----------------------------------------------------
refused() { # $1: what the message must contain; the rest: the flags
    local want=$1 rc
    shift
    "$BD_BIN" run -m "$M" -p "Once" -n 2 "$@" >/dev/null 2>"$T/ref.err"
    rc=$?
    [ "$rc" = 2 ] || bad "run $*: exit $rc, expected 2"
    grep -qF -- "$want" "$T/ref.err" || bad "run $*: message '$(cat "$T/ref.err")' lacks '$want'"
}
refused "llama.cpp's -hf is not supported: install a gallery model with \`blockdraft pull NAME\`" -hf org/repo
refused "llama.cpp's -i is not supported: use -cnv" -i
refused "llama.cpp's --mirostat is not supported: samplers: only --temp" --mirostat 2
refused "llama.cpp's -r is not supported: use -cnv" -r "User:"
refused "option -ngl needs a value" -ngl

[ "$fail" = 0 ] && echo "run_llama_flags: passed"
exit "$fail"
