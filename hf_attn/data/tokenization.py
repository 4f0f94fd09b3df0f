"""Word-level tokenizer as in J&W appendix A: lower-case words, every word containing a digit → ``qqq``,
vocabulary from the training split (min count), specials ``[PAD]`` ``[UNK]`` ``[MASK]``.

Raw English is first rewritten into the Penn-Treebank spelling of SST (:data:`PTB_RULES`):
contractions and clitics split off (``don't`` → ``do n't``, ``it's`` → ``it 's``), double quotes →
two backquotes / two apostrophes, single quotes → one backquote / one apostrophe, dashes → ``--``,
escaped brackets ``-lrb-`` → ``(``. "I don't like it, it isn't good." and its SST form "I do n't like
it , it is n't good ." then give the same tokens. Every other punctuation character is a token of its
own, in raw and in SST text alike: SST's ``...`` becomes ``. . .`` and ``Mr.`` becomes ``mr .`` (the
SST models here were trained so; tests/test_tokenization.py pins it).

Built with the ``tokenizers`` library (WordLevel model) and wrapped as a
``PreTrainedTokenizerFast`` so it saves and loads with the model folder. Every rule is a
``tokenizers`` normalizer or pre-tokenizer, so it is serialized into ``tokenizer.json`` and
``AutoTokenizer`` / ``PreTrainedTokenizerFast.from_pretrained`` apply it without ``hf_attn``.

``preprocessing="jw"`` builds Jain & Wallace's SST tokenizer instead (their
``preprocess/SST/SST.ipynb``, cell 0, ``tokenize``): punctuation stripped (every non-word character
→ space), lower-cased, numbers kept as they are (their SST notebook does not call the ``qqq``
cleaner), and every text wrapped in ``<SOS>`` … ``<EOS>`` (their ``preprocess/vectorizer.py``
``convert_to_sequence``), added by the tokenizer's post-processor. See :data:`JW_RULES`.
"""

from __future__ import annotations

from collections.abc import Iterable

import re

from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast

PAD, UNK, MASK = "[PAD]", "[UNK]", "[MASK]"
SPECIAL_TOKENS = (PAD, UNK, MASK)  # ids 0, 1, 2
SOS, EOS = "<SOS>", "<EOS>"  # J&W's sentence markers (preprocessing="jw"): ids 3, 4
PREPROCESSINGS = ("default", "jw")
NUMBER_TOKEN = "qqq"
# A "word" containing a digit (letters, digits, hyphens, apostrophes, dots and commas inside
# numbers) becomes qqq; surrounding punctuation is left for the pre-tokenizer to split off.
_NUMBER_WORD = r"[\w'\-]*\d(?:[\w'\-]|[.,:/]\d)*"
# After whitespace splitting, every punctuation character (other than ' and - inside words) is isolated,
# so raw text such as "great!" becomes "great" "!", and SST's "..." and "Mr." become ". . ." and "mr .".
_PUNCTUATION = r"[^\w\s'\-]"

# Raw text → the (lower-cased) PTB spelling of SST, applied in order after NFKC + lower-casing and
# before the number rule (so "1999's" → "qqq 's" as SST's "1999 's"). Each rule is a regex Replace
# (Oniguruma, as in tokenizers; lookarounds keep the context unconsumed). None of them changes SST
# as hf_attn.data.tasks loads it (brackets unescaped): every rule needs a word character before a quote
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
    (r"-lsb-", "["), (r"-rsb-", "]"),                 # (hf_attn.data.tasks unescapes them on loading)
    (r"-lcb-", "{"), (r"-rcb-", "}"),
    (r"\bcannot\b", "can not"),
    (r"(?<=\w)n't\b", " n't"),                        # don't → do n't, can't → ca n't, won't → wo n't
    (r"(?<=\w)'(?=(?:s|re|ve|ll|d|m)\b)", " '"),      # it's → it 's, i'm, we're, they've, we'll, i'd
    (r"(?<!\bol)(?<!'n)(?<=\w)'(?=$|[^\w'])", " '"),  # closing a word: actors' → actors ' (not ol' 'n')
    (r"(?:^|(?<=[\s(\[{<`]))'(?=[^\W\d_])(?!" + _KEPT_APOSTROPHE + ")", " ` "),  # 'great → ` great
)


# J&W's SST preprocessing (successar/AttentionExplanation, preprocess/SST/SST.ipynb cell 0,
# ``tokenize``): " ".join(leaves); "-LRB-" → ""; "-RRB-" → " "; re.sub(r"\W", " "); whitespace
# collapsed; spaCy ("en", parser/tagger/ner disabled) tokenization; every token lower-cased. After
# the \W substitution the text holds only word characters and spaces, so spaCy changes it only
# through its tokenizer exceptions and its number+unit suffix rule, both applied before
# lower-casing (case-sensitive). The ones that occur in binary SST are "gonna" → "gon na" and
# "28K" → "28 k"; J&W's committed output (preprocess/SST/sst_dataset.csv, 9613 sentences) is
# reproduced exactly (tests/test_jw_preprocessing.py). spaCy itself is not needed.
_SPACY_UNITS = ("mbar", "kmh", "mph", "hPa", "km", "dm", "cm", "mm", "ha", "nm", "yd", "in", "ft", "kg",
                "mg", "lb", "oz", "Pa", "mb", "MB", "kb", "KB", "gb", "GB", "tb", "TB", "m", "g", "t",
                "T", "G", "M", "K")  # spaCy's ASCII units (lang/char_classes.py), longest first
JW_RULES: tuple[tuple[str, str], ...] = (
    (r"-LRB-", ""), (r"-RRB-", " "),                  # their bracket escapes (SST has no others)
    (r"\W", " "),                                     # punctuation (every non-word character) → space
    # spaCy's tokenizer on what is left (only word characters and spaces), case-sensitive; each
    # rule inserts a space (an empty match, so Python ``re`` and ``tokenizers`` agree):
    (r"(?<=\b[Gg]on)(?=na\b)", " "),                 # exception gonna → gon na
    (r"(?<=\b[Gg]ot)(?=ta\b)", " "),                 # exception gotta → got ta
    (r"(?<=\b[Cc]an)(?=not\b)", " "),                # exception cannot → can not
    (r"(?<=\d)(?=(?:" + "|".join(_SPACY_UNITS) + r")\b)", " "),  # suffix rule: 28K → 28 K
)


def jw_clean(text: str) -> str:
    """J&W's SST preprocessing of one text (:data:`JW_RULES`, then lower-case, whitespace
    collapsed): the string their ``sst_dataset.csv`` holds, e.g. "It 's a -LRB- good -RRB- film ."
    → "it s a good film". The ``preprocessing="jw"`` tokenizer applies the same rules."""
    for pattern, content in JW_RULES:
        text = re.sub(pattern, content, text)
    return " ".join(text.lower().split())


def _normalizer(preprocessing: str = "default") -> normalizers.Normalizer:
    if preprocessing == "jw":
        return normalizers.Sequence([
            *(normalizers.Replace(Regex(pattern), content) for pattern, content in JW_RULES),
            normalizers.Lowercase(),
        ])
    return normalizers.Sequence([
        normalizers.NFKC(),
        normalizers.Lowercase(),
        *(normalizers.Replace(Regex(pattern), content) for pattern, content in PTB_RULES),
        normalizers.Replace(Regex(_NUMBER_WORD), NUMBER_TOKEN),
    ])


def _pre_tokenizer(preprocessing: str = "default") -> pre_tokenizers.PreTokenizer:
    if preprocessing == "jw":
        return pre_tokenizers.WhitespaceSplit()
    return pre_tokenizers.Sequence([
        pre_tokenizers.WhitespaceSplit(),
        pre_tokenizers.Split(Regex(_PUNCTUATION), behavior="isolated"),
    ])


def word_counts(texts: Iterable[str], preprocessing: str = "default") -> dict[str, int]:
    """Counts of the normalised words the tokenizer would see in ``texts``."""
    normalizer, pre_tokenizer = _normalizer(preprocessing), _pre_tokenizer(preprocessing)
    counts: dict[str, int] = {}
    for text in texts:
        for word, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text)):
            counts[word] = counts.get(word, 0) + 1
    return counts


def word_lengths(texts: Iterable[str], preprocessing: str = "default") -> list[int]:
    """Words per text as the tokenizer splits them (no special tokens, no truncation)."""
    normalizer, pre_tokenizer = _normalizer(preprocessing), _pre_tokenizer(preprocessing)
    return [len(pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text))) for text in texts]


def build_tokenizer(texts: Iterable[str], min_count: int = 1,
                    max_length: int = 512, preprocessing: str = "default") -> PreTrainedTokenizerFast:
    """Build the word-level tokenizer from training texts.

    Args:
        texts: the training split only (never dev/test: unseen words must map to ``[UNK]``).
        min_count: words seen fewer times become ``[UNK]``.
        max_length: ``model_max_length`` of the tokenizer (truncation limit).
        preprocessing: ``"default"`` (PTB spelling, punctuation kept, numbers → ``qqq``) or
            ``"jw"`` (:data:`JW_RULES`: punctuation stripped, numbers kept, and every encoding
            wrapped in ``<SOS>`` … ``<EOS>``, ids 3 and 4, which truncation keeps).
    """
    if min_count < 1:
        raise ValueError(f"min_count must be >= 1, got {min_count}")
    if preprocessing not in PREPROCESSINGS:
        raise ValueError(f"preprocessing must be one of {PREPROCESSINGS}, got {preprocessing!r}")
    specials = SPECIAL_TOKENS + ((SOS, EOS) if preprocessing == "jw" else ())
    counts = word_counts(texts, preprocessing)
    words = sorted((w for w, c in counts.items() if c >= min_count and w not in specials),
                   key=lambda w: (-counts[w], w))
    if not words:
        raise ValueError("no word reaches min_count in the training texts: cannot build a vocabulary")
    vocab = {token: i for i, token in enumerate(specials)}
    vocab.update({w: i + len(specials) for i, w in enumerate(words)})
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    tok.normalizer = _normalizer(preprocessing)
    tok.pre_tokenizer = _pre_tokenizer(preprocessing)
    markers = {}
    if preprocessing == "jw":
        tok.post_processor = processors.TemplateProcessing(
            single=f"{SOS} $A {EOS}", special_tokens=[(SOS, vocab[SOS]), (EOS, vocab[EOS])])
        markers = {"bos_token": SOS, "eos_token": EOS}
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token=PAD, unk_token=UNK, mask_token=MASK, **markers,
        model_max_length=max_length, padding_side="right", truncation_side="right",
        model_input_names=["input_ids", "attention_mask"])
