#!/usr/bin/env bash
# Installs what is needed, builds rlt and runs it on the embedded demo model (created on first
# use, no download): a model summary, then a generation with early exit enabled.
# Point it at a real checkpoint with: scripts/demo.sh --model /path/to/Ouro-1.4B
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release --target rlt
rlt=build/release/src/cli/rlt

"$rlt" info "$@"
echo
echo "Generating 32 tokens (greedy; a token leaves the loop once its exit probability reaches 0.7;"
echo "the demo model is untrained, so its text is noise: watch exit_depths):"
"$rlt" generate "$@" --prompt "Hello, looped world" --max-tokens 32 \
  --exit-threshold 0.7 --ignore-eos
