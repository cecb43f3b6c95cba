"""Builds the small tokenizers the oracle tests train at test time with Hugging Face tokenizers.

Each kind exercises a family of components; the trained vocabularies come from the generated
corpus in tokenizer_oracle_corpus.py, so nothing third-party is stored.
"""

import json

from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers,
                        pre_tokenizers, processors, trainers)

from tokenizer_oracle_corpus import Corpus

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def _training_text(seed, n=6000):
    c = Corpus(seed)
    return [c.text() for _ in range(n)]


def _train(tok, vocab_size, special_tokens, alphabet=(), seed=11):
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=special_tokens,
                                  initial_alphabet=list(alphabet), show_progress=False,
                                  min_frequency=2)
    tok.train_from_iterator(_training_text(seed), trainer=trainer)
    return tok


def bytelevel():
    """GPT-2 style: ByteLevel pre-tokenizer with its regex, ByteLevel decoder, special tokens."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    _train(tok, 3000, SPECIALS, pre_tokenizers.ByteLevel.alphabet())
    tok.add_tokens([AddedToken("<think>", special=False, normalized=False),
                    AddedToken(" custom token", special=False, normalized=True)])
    return tok


def split_regex():
    """Llama-3 / Qwen style: NFC, Split(regex) then ByteLevel(use_regex=false), ignore_merges."""
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    _train(tok, 4000, ["<|begin_of_text|>", "<|eot_id|>"], pre_tokenizers.ByteLevel.alphabet(), seed=12)
    tok.post_processor = processors.TemplateProcessing(
        single="<|begin_of_text|> $A", special_tokens=[("<|begin_of_text|>", 0)])
    return tok


def metaspace_byte_fallback():
    """SentencePiece style: Metaspace, byte_fallback BPE with <0xXX> tokens, unk, BOS template."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first",
                                                 split=False)
    tok.decoder = decoders.Sequence([decoders.Metaspace(replacement="▁", prepend_scheme="first"),
                                     decoders.ByteFallback(), decoders.Fuse()])
    _train(tok, 3000, ["<unk>", "<s>", "</s>"], seed=13)
    # Insert the 256 byte tokens after the specials, as SentencePiece exports do, shifting ids.
    d = json.loads(tok.to_str())
    vocab = d["model"]["vocab"]
    ordered = sorted(vocab.items(), key=lambda kv: kv[1])
    new_vocab = {}
    for k, _ in ordered[:3]:
        new_vocab[k] = len(new_vocab)
    for b in range(256):
        new_vocab["<0x%02X>" % b] = len(new_vocab)
    for k, _ in ordered[3:]:
        if k not in new_vocab:
            new_vocab[k] = len(new_vocab)
    d["model"]["vocab"] = new_vocab
    for t in d["added_tokens"]:
        t["id"] = new_vocab[t["content"]]
    d["post_processor"] = None
    tok = Tokenizer.from_str(json.dumps(d))
    tok.post_processor = processors.TemplateProcessing(single="<s> $A",
                                                       special_tokens=[("<s>", 1)])
    return tok


def llama2_normalizer_style():
    """Llama-2 scheme without a pre-tokenizer: Prepend + Replace normalizers, Strip decoder."""
    tok = metaspace_byte_fallback()
    d = json.loads(tok.to_str())
    d["pre_tokenizer"] = None
    d["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "▁"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}
    d["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    return Tokenizer.from_str(json.dumps(d))


def components():
    """Many normalizers / pre-tokenizers / added-token flags at once, over a byte-level model."""
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.Sequence([
        normalizers.NFKC(), normalizers.Replace(Regex(r"\d{4,}"), "<num>"),
        normalizers.Replace("``", '"'), normalizers.Strip(left=False, right=True)])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"[\p{P}\p{S}]"), behavior="merged_with_previous"),
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.Split(" ", behavior="merged_with_next"),
        pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    _train(tok, 2500, ["[CLS]", "[SEP]"], pre_tokenizers.ByteLevel.alphabet(), seed=14)
    tok.add_tokens([AddedToken("the", single_word=True, normalized=True),
                    AddedToken("<mask>", lstrip=True, rstrip=True, special=False, normalized=False),
                    AddedToken("日本", normalized=True)])
    tok.add_special_tokens([AddedToken("<sep2>", lstrip=True, normalized=False)])
    tok.post_processor = processors.RobertaProcessing(("[SEP]", tok.token_to_id("[SEP]")),
                                                      ("[CLS]", tok.token_to_id("[CLS]")))
    return tok


def splits():
    """Split behaviors (contiguous, removed, merged_with_next, inverted), Punctuation, Whitespace."""
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents(),
                                           normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"\s+"), behavior="removed"),
        pre_tokenizers.Split(Regex(r"[a-z]+"), behavior="contiguous", invert=True),
        pre_tokenizers.Punctuation(behavior="isolated"),
        pre_tokenizers.Digits(individual_digits=False),
    ])
    tok.decoder = decoders.Sequence([decoders.Replace("##", ""), decoders.Strip(" ", 0, 1)])
    _train(tok, 3000, ["[UNK]", "[PAD]"], seed=15)
    return tok


def whitespace_words():
    """Whitespace and WhitespaceSplit pre-tokenizers, NFKD, no decoder (tokens joined by ' ')."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=False,
                               continuing_subword_prefix="##", end_of_word_suffix="</w>"))
    tok.normalizer = normalizers.NFKD()
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                 pre_tokenizers.Whitespace()])
    trainer = trainers.BpeTrainer(vocab_size=2500, special_tokens=["<unk>"], show_progress=False,
                                  continuing_subword_prefix="##", end_of_word_suffix="</w>")
    tok.train_from_iterator(_training_text(16), trainer=trainer)
    tok.post_processor = processors.BertProcessing(("<unk>", 0), ("<unk>", 0))
    return tok


def metaspace_split():
    """Metaspace with split=true and prepend_scheme always, lowercase, Metaspace decoder only."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=False))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always",
                                                 split=True)
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    _train(tok, 2500, ["<unk>", "<eos>"], seed=17)
    tok.add_special_tokens([AddedToken("<eos>", rstrip=True, normalized=False)])
    return tok


KINDS = {
    "bytelevel": bytelevel,
    "split_regex": split_regex,
    "metaspace_byte_fallback": metaspace_byte_fallback,
    "llama2_normalizer_style": llama2_normalizer_style,
    "components": components,
    "splits": splits,
    "whitespace_words": whitespace_words,
    "metaspace_split": metaspace_split,
}


def build(kind):
    return KINDS[kind]()
