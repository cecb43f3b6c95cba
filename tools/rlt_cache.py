"""Where rlt keeps what it creates or fetches: the same rule as the C++ side (model/demo_checkpoint)
and scripts/setup.sh. Read before a test points RLT_CACHE_DIR at a temporary folder."""
import os

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def cache_dir():
    """$RLT_CACHE_DIR, else $XDG_CACHE_HOME/rlt, else ~/.cache/rlt."""
    if os.environ.get("RLT_CACHE_DIR"):
        return os.environ["RLT_CACHE_DIR"]
    if os.environ.get("XDG_CACHE_HOME"):
        return os.path.join(os.environ["XDG_CACHE_HOME"], "rlt")
    return os.path.join(os.path.expanduser("~"), ".cache", "rlt")


def smollm2_path():
    """The SmolLM2-135M-Instruct GGUF scripts/setup.sh fetches from PyPI (may be absent)."""
    return os.path.join(cache_dir(), SMOLLM2_FILE)
