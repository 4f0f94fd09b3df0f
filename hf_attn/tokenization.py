"""Word-level tokenizer as in J&W appendix A: lower-case words, every word containing a digit → ``qqq``,
vocabulary from the training split (min count), specials ``[PAD]`` ``[UNK]`` ``[MASK]``.

Raw English is first rewritten into the Penn-Treebank spelling of SST (:data:`PTB_RULES`):
contractions and clitics split off (``don't`` → ``do n't``, ``it's`` → ``it 's``), double quotes →
two backquotes / two apostrophes, single quotes → one backquote / one apostrophe, dashes → ``--``,
escaped brackets ``-lrb-`` → ``(``. "I don't like it, it isn't good." and its SST form "I do n't like
it , it is n't good ." then give the same tokens; already-tokenized SST text is left unchanged.

Built with the ``tokenizers`` library (WordLevel model) and wrapped as a
``PreTrainedTokenizerFast`` so it saves and loads with the model folder. Every rule is a
``tokenizers`` normalizer or pre-tokenizer, so it is serialized into ``tokenizer.json`` and
``AutoTokenizer`` / ``PreTrainedTokenizerFast.from_pretrained`` apply it without ``hf_attn``.
"""

from __future__ import annotations

from collections.abc import Iterable

from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers
from transformers import PreTrainedTokenizerFast

PAD, UNK, MASK = "[PAD]", "[UNK]", "[MASK]"
SPECIAL_TOKENS = (PAD, UNK, MASK)  # ids 0, 1, 2
NUMBER_TOKEN = "qqq"
# A "word" containing a digit (letters, digits, hyphens, apostrophes, dots and commas inside
# numbers) becomes qqq; surrounding punctuation is left for the pre-tokenizer to split off.
_NUMBER_WORD = r"[\w'\-]*\d(?:[\w'\-]|[.,:/]\d)*"
# After whitespace splitting, punctuation (other than ' and - inside words) is isolated, so raw
# text such as "great!" becomes "great" "!"; already-tokenized SST text is left unchanged.
_PUNCTUATION = r"[^\w\s'\-]"

# Raw text → the (lower-cased) PTB spelling of SST, applied in order after NFKC + lower-casing and
# before the number rule (so "1999's" → "qqq 's" as SST's "1999 's"). Each rule is a regex Replace
# (Oniguruma, as in tokenizers; lookarounds keep the context unconsumed). None of them changes SST
# as hf_attn.data loads it (brackets unescaped): every rule needs a word character before a quote
# or a spelling SST never contains. tests/test_tokenization.py checks this on all of SST.
_KEPT_APOSTROPHE = r"(?:s|re|ve|ll|d|m|em|n|til|tis|twas|cause|bout)\b"  # 's 'em 'til ... stay words
PTB_RULES: tuple[tuple[str, str], ...] = (
    ("\u2019", "'"),                                  # ’ → ' (apostrophe or closing single quote)
    ("\u2018", "'"),                                  # ‘ → ' (opening single quote, decided below)
    ("[\u201c\u201e]", " `` "),                       # “ „ → ``
    ("\u201d", " '' "),                               # ” → ''
    (r'(?:^|(?<=[\s(\[{<]))"', " `` "),               # " opening a phrase → ``
    (r'"', " '' "),                                   # every other " closes one → ''
    (r"(?<=[^\s'])''", " ''"),                        # word'' → word ''
    ("[\u2013\u2014\u2015]|-{2,}", " -- "),           # en/em dash, word--word → --
    (r"-lrb-", "("), (r"-rrb-", ")"),                 # PTB bracket escapes → the bundled SST form
    (r"-lsb-", "["), (r"-rsb-", "]"),                 # (hf_attn.data unescapes them on loading)
    (r"-lcb-", "{"), (r"-rcb-", "}"),
    (r"\bcannot\b", "can not"),
    (r"(?<=\w)n't\b", " n't"),                        # don't → do n't, can't → ca n't, won't → wo n't
    (r"(?<=\w)'(?=(?:s|re|ve|ll|d|m)\b)", " '"),      # it's → it 's, i'm, we're, they've, we'll, i'd
    (r"(?<!\bol)(?<!'n)(?<=\w)'(?=$|[^\w'])", " '"),  # closing a word: actors' → actors ' (not ol' 'n')
    (r"(?:^|(?<=[\s(\[{<`]))'(?=[^\W\d_])(?!" + _KEPT_APOSTROPHE + ")", " ` "),  # 'great → ` great
)


def _normalizer() -> normalizers.Normalizer:
    return normalizers.Sequence([
        normalizers.NFKC(),
        normalizers.Lowercase(),
        *(normalizers.Replace(Regex(pattern), content) for pattern, content in PTB_RULES),
        normalizers.Replace(Regex(_NUMBER_WORD), NUMBER_TOKEN),
    ])


def _pre_tokenizer() -> pre_tokenizers.PreTokenizer:
    return pre_tokenizers.Sequence([
        pre_tokenizers.WhitespaceSplit(),
        pre_tokenizers.Split(Regex(_PUNCTUATION), behavior="isolated"),
    ])


def word_counts(texts: Iterable[str]) -> dict[str, int]:
    """Counts of the normalised words the tokenizer would see in ``texts``."""
    normalizer, pre_tokenizer = _normalizer(), _pre_tokenizer()
    counts: dict[str, int] = {}
    for text in texts:
        for word, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text)):
            counts[word] = counts.get(word, 0) + 1
    return counts


def build_tokenizer(texts: Iterable[str], min_count: int = 1,
                    max_length: int = 512) -> PreTrainedTokenizerFast:
    """Build the word-level tokenizer from training texts.

    Args:
        texts: the training split only (never dev/test: unseen words must map to ``[UNK]``).
        min_count: words seen fewer times become ``[UNK]``.
        max_length: ``model_max_length`` of the tokenizer (truncation limit).
    """
    if min_count < 1:
        raise ValueError(f"min_count must be >= 1, got {min_count}")
    counts = word_counts(texts)
    words = sorted((w for w, c in counts.items() if c >= min_count and w not in SPECIAL_TOKENS),
                   key=lambda w: (-counts[w], w))
    if not words:
        raise ValueError("no word reaches min_count in the training texts: cannot build a vocabulary")
    vocab = {token: i for i, token in enumerate(SPECIAL_TOKENS)}
    vocab.update({w: i + len(SPECIAL_TOKENS) for i, w in enumerate(words)})
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    tok.normalizer = _normalizer()
    tok.pre_tokenizer = _pre_tokenizer()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token=PAD, unk_token=UNK, mask_token=MASK,
        model_max_length=max_length, padding_side="right", truncation_side="right",
        model_input_names=["input_ids", "attention_mask"])
