#!/usr/bin/env python3
"""Oracle for rlt's tokenizer tests: what Hugging Face `tokenizers` does on a generated corpus.

    tokenizer_oracle.py --tokenizer SPEC --workdir DIR [--count N] [--seed S]

SPEC is `file:PATH` (a tokenizer.json used as is), `patched:PATH` (a tokenizer.json whose merges
naming tokens absent from the vocabulary are dropped, so HF can load it), or `train:KIND`
(a tokenizer trained now, see tokenizer_oracle_train.py). Writes DIR/tokenizer.json (what the C++
side must load) and DIR/cases.jsonl, one JSON object per line:

    {"hex": input bytes, "ids": encode(add_special_tokens=True), "ids_plain": (False),
     "dec": decode(ids, skip_special_tokens=False), "dec_skip": decode(ids, True)}
    {"decode_ids": random ids, "dec": ..., "dec_skip": ...}

Inputs that are not valid UTF-8 are encoded by HF after bytes.decode("utf-8", "replace"): the
behavior rlt documents for such input.  If HF refuses to load the file, DIR/error.txt holds its
message and no cases are written.
"""

import argparse
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tokenizers import Tokenizer  # noqa: E402

from tokenizer_oracle_corpus import Corpus  # noqa: E402


def load(spec, workdir):
    kind, _, arg = spec.partition(":")
    out_path = os.path.join(workdir, "tokenizer.json")
    if kind == "train":
        import tokenizer_oracle_train
        tok = tokenizer_oracle_train.build(arg)
        tok.save(out_path)
        return Tokenizer.from_file(out_path)
    with open(arg, "rb") as f:
        raw = f.read()
    if kind == "patched":
        d = json.loads(raw)
        m = d["model"]
        vocab = m["vocab"]
        kept = []
        for merge in m["merges"]:
            a, b = merge.split(" ") if isinstance(merge, str) else merge
            if a in vocab and b in vocab and (a + b) in vocab:
                kept.append(merge)
        m["merges"] = kept
        raw = json.dumps(d, ensure_ascii=False).encode()
    elif kind != "file":
        raise SystemExit("unknown tokenizer spec " + spec)
    with open(out_path, "wb") as f:
        f.write(raw)
    return Tokenizer.from_file(out_path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--count", type=int, default=10000)
    ap.add_argument("--decode-count", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    for stale in ("error.txt", "cases.jsonl", "tokenizer.json"):
        if os.path.exists(os.path.join(args.workdir, stale)):
            os.remove(os.path.join(args.workdir, stale))
    try:
        tok = load(args.tokenizer, args.workdir)
    except Exception as e:  # HF refused the file: record why, for the C++ side to compare.
        if args.tokenizer.startswith("train:"):
            raise
        with open(os.path.join(args.workdir, "error.txt"), "w") as f:
            f.write(str(e))
        return

    specials = [t.content for t in tok.get_added_tokens_decoder().values()]
    corpus = Corpus(args.seed, specials)
    inputs = corpus.cases(args.count)
    texts = [b.decode("utf-8", "replace") for b in inputs]
    with_special = tok.encode_batch(texts, add_special_tokens=True)
    plain = tok.encode_batch(texts, add_special_tokens=False)
    ids = [e.ids for e in with_special]
    dec = tok.decode_batch(ids, skip_special_tokens=False)
    dec_skip = tok.decode_batch(ids, skip_special_tokens=True)

    r = random.Random(args.seed + 1)
    n_ids = tok.get_vocab_size()
    rand_ids = []
    for _ in range(args.decode_count):
        k = r.choice([1, 1, 2, 3, 5, 8, 20, 60])
        rand_ids.append([r.randrange(0, n_ids + 5) for _ in range(k)])
    rdec = tok.decode_batch(rand_ids, skip_special_tokens=False)
    rdec_skip = tok.decode_batch(rand_ids, skip_special_tokens=True)

    with open(os.path.join(args.workdir, "cases.jsonl"), "w") as f:
        for i, b in enumerate(inputs):
            f.write(json.dumps({"hex": b.hex(), "ids": ids[i], "ids_plain": plain[i].ids,
                                "dec": dec[i], "dec_skip": dec_skip[i]}) + "\n")
        for i, rid in enumerate(rand_ids):
            f.write(json.dumps({"decode_ids": rid, "dec": rdec[i], "dec_skip": rdec_skip[i]}) + "\n")


if __name__ == "__main__":
    main()
