#!/usr/bin/env python3
"""Hugging Face side of rlt's tokenizer benchmark (bench/tokenizer).

    tokenizer_oracle_bench.py --tokenizer PATH --corpus OUT [--mb N] [--seed S] [--repeats R]

Writes a generated corpus (documents separated by NUL bytes) to OUT, then times HF `tokenizers`
on it single-threaded (RAYON_NUM_THREADS=1, one encode()/decode() call per document) and prints
one JSON line: {"encode_s": best seconds, "decode_s": ..., "bytes": corpus bytes,
"decoded_bytes": ..., "tokens": ..., "version": ...}.
"""

import argparse
import json
import os
import random
import sys
import time

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tokenizers  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

from tokenizer_oracle_corpus import CODE, Corpus  # noqa: E402

SYLLABLES = ("ka to ri mu sa ne lo pi an er in on th he re ou st ch qu ly ing ed tion al "
             "com pre dis un ment ness able").split()


def documents(seed, total_bytes):
    """Prose from a Zipf-distributed 50k-word lexicon, plus code and multilingual text."""
    r = random.Random(seed)
    lexicon = ["".join(r.choice(SYLLABLES) for _ in range(r.randrange(1, 4))) for _ in range(50000)]
    weights = [1.0 / (k + 1) for k in range(len(lexicon))]
    corpus = Corpus(seed)
    docs, size = [], 0
    while size < total_bytes:
        parts = []
        for _ in range(r.randrange(3, 12)):
            roll = r.random()
            if roll < 0.75:
                words = r.choices(lexicon, weights, k=r.randrange(5, 30))
                s = " ".join(words).capitalize() + r.choice([".", ",", "?", "!", ":"])
                if r.random() < 0.2:
                    s += " %d%%" % r.randrange(0, 10000)
                parts.append(s)
            elif roll < 0.88:
                parts.append(r.choice(CODE))
            else:
                parts.append(corpus.text())
        doc = "\n".join(parts).replace("\0", " ")  # NUL separates documents in the file
        docs.append(doc)
        size += len(doc.encode())
    return docs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--mb", type=float, default=4)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    docs = documents(args.seed, int(args.mb * 1e6))
    with open(args.corpus, "wb") as f:
        f.write(b"\0".join(d.encode() for d in docs))
    try:
        tok = Tokenizer.from_file(args.tokenizer)
    except Exception as e:  # reported by the C++ side as "skipped"
        print(json.dumps({"error": str(e).splitlines()[0]}))
        return
    best_enc = best_dec = float("inf")
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        ids = [tok.encode(d, add_special_tokens=False).ids for d in docs]
        best_enc = min(best_enc, time.perf_counter() - t0)
        t0 = time.perf_counter()
        texts = [tok.decode(i) for i in ids]
        best_dec = min(best_dec, time.perf_counter() - t0)
    print(json.dumps({"encode_s": best_enc, "decode_s": best_dec,
                      "bytes": sum(len(d.encode()) for d in docs),
                      "decoded_bytes": sum(len(t.encode()) for t in texts),
                      "tokens": sum(len(i) for i in ids), "version": tokenizers.__version__}))


if __name__ == "__main__":
    main()
