"""Deterministic test corpus for the tokenizer oracles and benchmark.

Everything is generated from a seed: no third-party text is stored. The mix covers what breaks
tokenizers: many scripts, emoji (ZWJ sequences, flags, skin tones), CJK, code, whitespace runs,
control characters, combining marks, digits of several kinds, contractions, special-token
look-alikes, very long inputs and invalid UTF-8 (as raw bytes).

Characters are drawn only from code points assigned in Python's Unicode database (14.0 here),
the version PCRE2 10.42 uses, so "letter" and "number" mean the same thing on both sides.
"""

import random
import unicodedata

WORDS = {
    "en": "the of and to in is was for that with as on by at from his her they this which "
    "people time world year day week state house school number part place case point "
    "government company system program question work night water family story don't it's "
    "we're they've I'll she'd you'RE HE'S THEY'LL tokenizer streaming decode encode".split(),
    "fr": "le la les des une été être déjà où très français garçon naïve café crème "
    "cœur Noël forêt hôpital".split(),
    "de": "der die das und ist nicht Straße Größe über schön Mädchen Ärger Öl".split(),
    "ru": "и в не на я быть он с что а по это она этот к но они мы как из у который "
    "Москва привет мир".split(),
    "el": "και το να είναι ο η σε με για Ελλάδα λόγος ΑΣΣΟΣ σοφία".split(),
    "ar": "في من على إلى أن هذا التي الذي مع كان العربية مرحبا".split(),
    "he": "של את על זה לא הוא עם היא שלום עולם".split(),
    "hi": "के में की है और को से एक यह हिंदी नमस्ते दुनिया".split(),
    "th": "และ ที่ ของ ใน เป็น การ ภาษาไทย สวัสดี".split(),
    "zh": "的 一 是 不 了 人 我 在 有 他 这 中 大 来 上 国 个 到 说 们 为 子 和 你 地 出 道 也 时 年 "
    "中文 汉字 语言模型 分词器".split(),
    "ja": "の に は を た が で て と し れ さ ある いる する 日本語 ひらがな カタカナ 東京".split(),
    "ko": "이 그 저 것 수 등 한국어 안녕하세요 세계 사람".split(),
}

EMOJI = [
    "😀", "😂", "🥲", "👍", "👍🏽", "🙏🏿", "❤️", "🔥", "🚀", "🎉", "🇫🇷", "🇯🇵", "🏳️‍🌈",
    "👨‍👩‍👧‍👦", "👩🏻‍💻", "🧑‍🔬", "☕", "✅", "⭐", "©", "™", "🀄", "🈚", "🤖",
]

CODE = [
    "def f(x):\n    return x * 2\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}\n",
    '{"key": [1, 2.5, -3e10, true, null], "nested": {"a": "b\\n"}}',
    "#include <vector>\nint main() { std::vector<int> v{1,2,3}; return v.size(); }\n",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC;",
    "    if x == y:\n        print(f\"{x!r} == {y!r}\")\n",
    "fn main() -> Result<(), Box<dyn Error>> { let s = \"héllo\"; Ok(()) }",
    "const re = /\\s+(?!\\S)/gu; // regex\n",
    "<div class=\"a\">&nbsp;&lt;tag&gt;</div>",
    "x<<=2; y>>=3; z**=4; a!==b; c&&d||e",
]

WHITESPACE = [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ", "\u00a0", "\u3000",
              "\u2028", "\u0085", "\u2009", "\u200b", "\u180e", "\t \t", "\u1680", "\u202f"]

CONTROL = [chr(c) for c in list(range(0, 32)) + [127] + list(range(0x80, 0xA0))]

NUMBERS = ["0", "7", "42", "123", "1234", "12345678901234", "3.14159", "1,000,000", "٣٤٥",
           "१२३", "²", "³", "½", "Ⅻ", "①", "𝟙𝟚", "0x1F", "1e-9", "-273.15"]

COMBINING = ["e\u0301", "a\u0308", "A\u030a", "o\u0302\u0323", "\u1100\u1161\u11a8",
             "ﬁ", "ﬀ", "Å", "Ω", "ǅ", "ſ", "ẞ", "İ", "K", "Å", "\u0345", "ΐ", "ﾃﾞ", "㍿", "e\u0301\u0301"]

CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ve", "'LL", "'D",
                "’s", "''", "'"]

def _assigned(cp):
    try:
        c = chr(cp)
    except ValueError:
        return False
    return unicodedata.category(c) not in ("Cn", "Cs")


class Corpus:
    """Random strings; `specials` are added-token strings to embed (and near-misses of them)."""

    def __init__(self, seed, specials=()):
        self.r = random.Random(seed)
        self.specials = list(specials)
        self._pool_cps = [cp for cp in range(0x20, 0x30000, 7) if _assigned(cp)]

    def word(self):
        r = self.r
        lang = r.choice(list(WORDS))
        return r.choice(WORDS[lang])

    def random_chars(self, n):
        r = self.r
        out = []
        for _ in range(n):
            if r.random() < 0.5:
                out.append(chr(r.choice(self._pool_cps)))
            else:
                cp = r.randrange(0x20, 0x30000)
                while not _assigned(cp):
                    cp = r.randrange(0x20, 0x30000)
                out.append(chr(cp))
        return "".join(out)

    def special(self):
        r = self.r
        if not self.specials:
            return "<|x|>"
        s = r.choice(self.specials)
        roll = r.random()
        if roll < 0.6:
            return s
        if roll < 0.75:
            return s[: max(1, len(s) - r.randrange(1, 3))]  # truncated look-alike
        if roll < 0.85:
            return s.upper()
        return " " + s + " "

    def fragment(self):
        r = self.r
        kind = r.random()
        if kind < 0.35:
            return " ".join(self.word() for _ in range(r.randrange(1, 8)))
        if kind < 0.45:
            return r.choice(EMOJI) * r.randrange(1, 3)
        if kind < 0.53:
            return r.choice(CODE)
        if kind < 0.61:
            return r.choice(WHITESPACE) * r.randrange(1, 4)
        if kind < 0.66:
            return "".join(r.choice(CONTROL) for _ in range(r.randrange(1, 4)))
        if kind < 0.72:
            return r.choice(NUMBERS)
        if kind < 0.77:
            return r.choice(COMBINING)
        if kind < 0.82:
            return self.word() + r.choice(CONTRACTIONS)
        if kind < 0.90:
            return self.special()
        return self.random_chars(r.randrange(1, 12))

    def text(self):
        r = self.r
        n = r.choice([1, 1, 2, 3, 4, 6, 10, 20])
        sep = ["", " ", "", "\n", " "]
        return "".join(self.fragment() + r.choice(sep) for _ in range(n))

    def long_text(self, approx_chars):
        parts = []
        total = 0
        while total < approx_chars:
            t = self.text()
            parts.append(t)
            total += len(t)
        return "".join(parts)

    def invalid_bytes(self):
        """Valid text with ill-formed UTF-8 spliced in (as bytes)."""
        r = self.r
        bad = [b"\xff", b"\xc0\xaf", b"\xe0\x80\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80",
               b"\xe6\x97", b"\xf0\x9f\x98", b"\x80", b"\xbf\xbf", b"\xc3", b"\xf8\x88\x80\x80\x80",
               b"\xe2\x82", b"\xfe\xfe"]
        out = b""
        for _ in range(r.randrange(1, 5)):
            out += self.text().encode("utf-8") + r.choice(bad)
        if r.random() < 0.3:
            out += r.choice(bad)  # truncated at the very end
        return out

    def cases(self, count):
        """`count` inputs as bytes: mostly valid text, a few very long ones, some ill-formed."""
        r = self.r
        out = [b"", b" ", b"\n", "  leading".encode(), b"trailing  "]
        for s in self.specials[:20]:
            out.append(s.encode())
            out.append(("a" + s + "b").encode())
            out.append((" " + s + "  " + s + "\n").encode())
        # Very long inputs: whole documents and long runs of one character (one huge "word").
        out.append(self.long_text(40000).encode())
        out.append(self.long_text(15000).encode())
        for ch, n in ((" ", 5000), ("a", 4000), ("\n", 3000), ("1", 3000), ("日", 2000),
                      ("😀", 1000), ("-", 4000)):
            out.append((ch * n).encode())
        while len(out) < count:
            if r.random() < 0.05:
                out.append(self.invalid_bytes())
            else:
                out.append(self.text().encode("utf-8"))
        return out[:count]
