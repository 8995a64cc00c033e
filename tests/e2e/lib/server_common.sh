# server_common.sh - sourced by tests/e2e/server_*.sh.
#
# start_server NAME ARGS...  runs `blockdraft serve --port 0 ARGS` (binary
#                            $SERVE_BIN, default $BD_BIN), waits for its
#                            "listening on" line; sets PORT, BASE, SERVE_PID,
#                            SERVE_LOG.
# stop_server                SIGTERM; the server must exit 0 within 30 s.
# Everything lives in $T, removed on exit.
set -u
T=$(mktemp -d /tmp/bd-e2e-server.XXXXXX)
SERVE_PID=
cleanup() {
    [ -n "$SERVE_PID" ] && kill -9 "$SERVE_PID" 2>/dev/null
    wait 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT

SERVE_LOG=
fail() {
    echo "FAIL: $*"
    if [ -n "$SERVE_LOG" ] && [ -f "$SERVE_LOG" ]; then echo "--- server log (tail)"; tail -n 40 "$SERVE_LOG"; fi
    exit 1
}
ok() { echo "ok: $*"; }

S="$BD_SHARED/fixtures/stories260K"
[ -f "$S/stories260K.gguf" ] && [ -f "$S/stories260K-dflash.gguf" ] || fail "fixture pair missing under $S"

start_server() {
    local name=$1
    shift
    SERVE_LOG="$T/$name.log"
    "${SERVE_BIN:-$BD_BIN}" serve --port 0 "$@" >"$SERVE_LOG" 2>&1 &
    SERVE_PID=$!
    for _ in $(seq 600); do
        grep -q "listening on" "$SERVE_LOG" && break
        kill -0 "$SERVE_PID" 2>/dev/null || break
        sleep 0.1
    done
    PORT=$(grep -o 'listening on http://[0-9.]*:[0-9]*' "$SERVE_LOG" | sed 's/.*://')
    [ -n "$PORT" ] || fail "server did not start"
    BASE="http://127.0.0.1:$PORT"
}

stop_server() {
    kill -TERM "$SERVE_PID"
    for _ in $(seq 300); do
        kill -0 "$SERVE_PID" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$SERVE_PID" 2>/dev/null; then
        kill -9 "$SERVE_PID"
        fail "server still running 30 s after SIGTERM"
    fi
    local rc=0
    wait "$SERVE_PID" || rc=$?
    SERVE_PID=
    [ "$rc" -eq 0 ] || fail "server exited with status $rc after SIGTERM"
}
