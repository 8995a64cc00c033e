#!/usr/bin/env bash
# server_logprobs.sh - logprobs / top_logprobs of chat and completions
# equal the log-softmax of the target's logits (from `blockdraft eval`,
# computed in double here) within 1e-4, with the DFlash drafter (accepted
# drafts) and without, greedy and sampled, streamed and not. Checks are in
# tests/server/server_logprobs.py.
set -u
export PYTHONDONTWRITEBYTECODE=1
exec timeout 200 python3 "$BD_ROOT/tests/server/server_logprobs.py"
