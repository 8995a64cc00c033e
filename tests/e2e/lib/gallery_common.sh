# gallery_common.sh - sourced by tests/e2e/gallery_*.sh.
#
# Starts tests/e2e/lib/gallery_server.py on 127.0.0.1 (free port) serving
# the stories260K target/drafter pair and the bad GGUFs written by
# `test_gallery --make-fixtures`, sets up an empty models folder, and
# provides helpers. Everything lives in $T, removed on exit.
set -u
T=$(mktemp -d /tmp/bd-e2e-gallery.XXXXXX)
SRV_PID=
cleanup() {
    [ -n "$SRV_PID" ] && kill "$SRV_PID" 2>/dev/null
    wait 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT

fail() { echo "FAIL: $*"; exit 1; }
ok() { echo "ok: $*"; }

FIX="$BD_SHARED/fixtures/stories260K"
# Published in the fixture README (independent of our hashing code).
TARGET_SHA=047bf46455a544931cff6fef14d7910154c56afbc23ab1c5e56a72e69912c04b
DRAFTER_SHA=8b9928ced709a29bdec5720ceb72a14b25e003a92c2005c5ab9afe056ace2025

mkdir -p "$T/www/stories" "$T/www/bad" "$T/models"
cp "$FIX/stories260K.gguf" "$T/www/stories/target.gguf"
cp "$FIX/stories260K-dflash.gguf" "$T/www/stories/drafter.gguf"
"$BD_BUILD/tests/test_gallery" --make-fixtures "$T/www/bad" || fail "cannot build bad fixtures"

python3 "$BD_ROOT/tests/e2e/lib/gallery_server.py" "$T/www" "$T/port" "$T/requests.log" &
SRV_PID=$!
for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.05; done
[ -s "$T/port" ] || fail "test server did not start"
PORT=$(cat "$T/port")
BASE="http://127.0.0.1:$PORT"

export BLOCKDRAFT_MODELS="$T/models"
export BLOCKDRAFT_STALL_TIMEOUT=1
export BLOCKDRAFT_RETRY_DELAY_MS=50
export BLOCKDRAFT_RETRIES=3
unset BLOCKDRAFT_GALLERY HF_TOKEN BLOCKDRAFT_HF_ENDPOINT HF_ENDPOINT

sha() { sha256sum "$1" | cut -d' ' -f1; }
sha_of() { sha256sum "$T/www/$1" | cut -d' ' -f1; }

# entry NAME TARGET_FILENAME TARGET_URI TARGET_SHA DRAFTER_FILENAME DRAFTER_URI DRAFTER_SHA [OPTIONS_YAML]
# appends one LocalAI-schema entry to $T/index.yaml.
entry() {
    local opts=${8:-"      - use_jinja:true
      - spec_type:draft-dflash
      - spec_n_max:7"}
    cat >>"$T/index.yaml" <<EOT
- name: $1
  url: github:mudler/LocalAI/gallery/virtual.yaml@master
  description: test bundle
  license: mit
  tags: [llm, gguf, dflash, speculative]
  overrides:
    backend: llama-cpp
    parameters:
      model: $2
    draft_model: $5
    flash_attention: "on"
    options:
$opts
    template:
      use_tokenizer_template: true
  files:
    - filename: $2
      sha256: $4
      uri: $3
    - filename: $5
      sha256: $7
      uri: $6
EOT
}

# The good bundle (served plainly).
good_entry() {
    entry "${1:-stories-dflash}" stories/stories260K.gguf "$BASE/files/stories/target.gguf" "$TARGET_SHA" \
        stories/stories260K-dflash.gguf "$BASE/files/stories/drafter.gguf" "$DRAFTER_SHA"
}

BD() { "$BD_BIN" "$@"; }

# pull NAME... with the test index; output in $T/out, status in $RC.
pull() {
    "$BD_BIN" pull --index "$T/index.yaml" "$@" >"$T/out" 2>&1
    RC=$?
    cat "$T/out"
}

expect_out() { grep -qF -- "$1" "$T/out" || fail "expected output to contain: $1"; }
requests_for() { grep -c -F "\"$1" "$T/requests.log" 2>/dev/null || true; }
no_partials() { [ -z "$(find "$T/models" -name '*.partial' ! -path '*/stall/*' ! -path '*/lie/*' 2>/dev/null)" ] || fail "leftover partial files: $(find "$T/models" -name '*.partial')"; }

# The installed good model still has its exact bytes.
good_intact() {
    [ "$(sha "$T/models/stories/stories260K.gguf")" = "$TARGET_SHA" ] || fail "installed target damaged"
    [ "$(sha "$T/models/stories/stories260K-dflash.gguf")" = "$DRAFTER_SHA" ] || fail "installed drafter damaged"
    [ -f "$T/models/stories-dflash.yaml" ] || fail "installed config missing"
}
