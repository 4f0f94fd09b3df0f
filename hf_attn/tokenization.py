"""Word-level tokenizer as in J&W appendix A: lower-case words, every word containing a digit → ``qqq``,
vocabulary from the training split (min count), specials ``[PAD]`` ``[UNK]`` ``[MASK]``.

Built with the ``tokenizers`` library (WordLevel model) and wrapped as a
``PreTrainedTokenizerFast`` so it saves and loads with the model folder.
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


def _normalizer() -> normalizers.Normalizer:
    return normalizers.Sequence([
        normalizers.NFKC(),
        normalizers.Lowercase(),
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
