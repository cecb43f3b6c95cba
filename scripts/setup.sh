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
  python3 python3-venv python3-pip
)
PY_PACKAGES=(numpy tokenizers jinja2 openai)
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
echo "setup: ok"
