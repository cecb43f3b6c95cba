#!/usr/bin/env bash
# Installs the evaluation tools in a venv of their own (.venv-eval), idempotently: lm-eval
# 0.4.13 (its local-completions client against `rlt serve`) and, for its in-process `hf`
# backend on the same weights, torch, transformers and gguf. Large (torch with its CUDA
# libraries is several GB), so apart from the test venv; used by tools/lm_eval_check.py
# (docs/evaluation.md). Needs scripts/setup.sh first (python3-venv).
set -euo pipefail
cd "$(dirname "$0")/.."
PY_PACKAGES=("lm_eval[api,hf]==0.4.13" torch transformers gguf openai)
[ -x .venv-eval/bin/python ] || python3 -m venv .venv-eval
if ! .venv-eval/bin/python -c "import lm_eval, tenacity, accelerate, torch, transformers, gguf" 2>/dev/null ||
   [ "$(.venv-eval/bin/python -c 'import importlib.metadata as m; print(m.version("lm_eval"))')" != "0.4.13" ]; then
  .venv-eval/bin/pip install -q "${PY_PACKAGES[@]}"
fi
echo "setup_eval: .venv-eval has lm_eval $(.venv-eval/bin/python -c 'import importlib.metadata as m; print(m.version("lm_eval"))'), torch $(.venv-eval/bin/python -c 'import torch; print(torch.__version__)')"
