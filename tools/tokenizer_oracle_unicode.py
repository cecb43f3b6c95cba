#!/usr/bin/env python3
"""Derives the Unicode tables where Hugging Face `tokenizers` lags behind Unicode 14.

HF normalizes with `unicode-normalization-alignments` and strips accents with its mark table,
both frozen at an older Unicode version. Characters assigned later are, for HF, unassigned:
no decomposition, canonical combining class 0, not a mark. This script finds them by asking
the installed HF library about every assigned code point (Python's Unicode database) and prints
the ranges as C++ initializers for src/tokenizer/unicode.cpp. Run it after upgrading either side.
"""

import unicodedata as ud

from tokenizers import normalizers as N
from tokenizers import pre_tokenizers as P

SEP = "\x01"


def ranges(cps):
    out = []
    for c in sorted(cps):
        if out and out[-1][1] == c - 1:
            out[-1][1] = c
        else:
            out.append([c, c])
    return out


def batch(norm, strings):
    return norm.normalize_str(SEP.join(strings)).split(SEP)


def main():
    cps = [cp for cp in range(0x80, 0x110000) if ud.category(chr(cp)) not in ("Cn", "Cs", "Co")]
    stale = set()
    for name in ("NFD", "NFKD", "NFC", "NFKC"):
        norm = getattr(N, name)()
        for i in range(0, len(cps), 4000):
            chunk = [chr(c) for c in cps[i:i + 4000]]
            for c, got in zip(chunk, batch(norm, chunk)):
                if got != ud.normalize(name, c):
                    stale.add(ord(c))
    # Combining classes: U+0345 has class 240; any smaller nonzero class reorders before it.
    marks = [cp for cp in cps if 0 < ud.combining(chr(cp)) < 240]
    tests = ["a\u0345" + chr(cp) for cp in marks]
    for cp, t, got in zip(marks, tests, batch(N.NFD(), tests)):
        if got != ud.normalize("NFD", t):
            stale.add(cp)
    # Canonical compositions.
    pairs = []
    for cp in cps:
        d = ud.decomposition(chr(cp))
        if d and not d.startswith("<"):
            pairs.append((cp, [int(x, 16) for x in d.split()]))
    tests = ["".join(chr(p) for p in parts) for _, parts in pairs]
    for (cp, parts), t, got in zip(pairs, tests, batch(N.NFC(), tests)):
        if got != ud.normalize("NFC", t):
            stale.update([cp] + parts)
    # Marks HF's StripAccents does not know.
    marks = [cp for cp in cps if ud.category(chr(cp)).startswith("M")]
    tests = ["a" + chr(cp) for cp in marks]
    unknown_marks = {cp for cp, got in zip(marks, batch(N.StripAccents(), tests)) if got != "a"}
    # ...and characters it still treats as marks although Unicode 14 no longer does.
    others = [cp for cp in cps if not ud.category(chr(cp)).startswith("M")]
    tests = ["a" + chr(cp) for cp in others]
    extra_marks = {cp for cp, got in zip(others, batch(N.StripAccents(), tests)) if got == "a"}

    # Punctuation HF's Punctuation pre-tokenizer does not know (it would split each one off).
    punct = [cp for cp in cps if ud.category(chr(cp)).startswith("P")]
    pre = P.Punctuation()
    unknown_punct = {cp for cp in punct if len(pre.pre_tokenize_str("a" + chr(cp) + "b")) != 3}
    others = [cp for cp in cps if not ud.category(chr(cp)).startswith("P")]
    extra_punct = {cp for cp in others if len(pre.pre_tokenize_str("a" + chr(cp) + "b")) == 3}

    def show(name, cps):
        body = ", ".join("{0x%X, 0x%X}" % (a, b) for a, b in ranges(cps))
        print("// %d code points\nconstexpr Range %s[] = {%s};" % (len(cps), name, body))

    show("kNormalizationUnknown", stale)
    show("kMarkUnknown", unknown_marks)
    show("kMarkExtra", extra_marks)
    show("kPunctuationUnknown", unknown_punct)
    show("kPunctuationExtra", extra_punct)


if __name__ == "__main__":
    main()
