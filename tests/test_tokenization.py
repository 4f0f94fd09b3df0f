"""The word-level tokenizer: PTB-compatible pre-tokenization of raw text and what
loads a saved folder with and without ``hf_attn`` (the claims of docs/models.md)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
from tokenizers import Regex, Tokenizer, normalizers, pre_tokenizers

from hf_attn.data.tasks import load_sst
from hf_attn.data.tokenization import (NUMBER_TOKEN, UNK, _normalizer, _pre_tokenizer, build_tokenizer,
                                  word_counts)
from remote_code import BLOCK_HF_ATTN

# ------------------------------------------------------------------ the pipeline before PTB pre-tokenization
# Kept verbatim as the reference: already-tokenized SST text must give exactly these tokens.
_OLD_NUMBER_WORD = r"[\w'\-]*\d(?:[\w'\-]|[.,:/]\d)*"
_OLD_PUNCTUATION = r"[^\w\s'\-]"
OLD_NORMALIZER = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase(),
                                       normalizers.Replace(Regex(_OLD_NUMBER_WORD), "qqq")])
OLD_PRE_TOKENIZER = pre_tokenizers.Sequence([
    pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Split(Regex(_OLD_PUNCTUATION), behavior="isolated")])
NEW_NORMALIZER, NEW_PRE_TOKENIZER = _normalizer(), _pre_tokenizer()


def old_words(text: str) -> list[str]:
    return [w for w, _ in OLD_PRE_TOKENIZER.pre_tokenize_str(OLD_NORMALIZER.normalize_str(text))]


def new_words(text: str) -> list[str]:
    return [w for w, _ in NEW_PRE_TOKENIZER.pre_tokenize_str(NEW_NORMALIZER.normalize_str(text))]


# (raw English, the same sentence as SST spells it)
RAW_VS_SST = [
    ("I don't like it, it isn't good.", "I do n't like it , it is n't good ."),
    ("It's not a great monster movie, but it's a good one.",
     "it 's not a great monster movie , but it 's a good one ."),
    ('A "feel-good" movie that can\'t decide what it wants to be.',
     "A `` feel-good '' movie that ca n't decide what it wants to be ."),
    ("You won't believe how bad it is... really.", "You wo n't believe how bad it is ... really ."),
    ("The film (which runs 90 minutes) feels longer.", "The film ( which runs 90 minutes ) feels longer ."),
    ("The film (which runs 90 minutes) feels longer.", "The film -LRB- which runs 90 minutes -RRB- feels longer ."),
    ("I'm sure they've seen better, and we'll see worse.", "I 'm sure they 've seen better , and we 'll see worse ."),
    ("They're funny—sometimes.", "They 're funny -- sometimes ."),
    ("They're funny--sometimes.", "They 're funny -- sometimes ."),
    ("The characters' motives are murky.", "The characters ' motives are murky ."),
    ("It's the kind of 'art' film you'd hate.", "It 's the kind of ` art ' film you 'd hate ."),
    ("He cannot act; she ain't much better.", "He can not act ; she ai n't much better ."),
    ("The '70s setting is 1999's best thing.", "The '70s setting is 1999 's best thing ."),
    ("Don't miss it!", "Do n't miss it !"),
    ("Isn't it ironic?", "Is n't it ironic ?"),
    ("Good ol' rock 'n' roll, for cryin' out loud.", "Good ol' rock 'n' roll , for cryin ' out loud ."),
    ("He said “it’s wonderful” – and he’s right.", "He said `` it 's wonderful '' -- and he 's right ."),
    ("Wouldn't you agree that it's Spielberg's best?", "Would n't you agree that it 's Spielberg 's best ?"),
    ('"Punch-Drunk Love" is weird--and wonderful.', "`` Punch-Drunk Love '' is weird -- and wonderful ."),
    ("The movie's 2 hours long, and that's $10 wasted.", "The movie 's 2 hours long , and that 's $ 10 wasted ."),
    ("Mr. Spielberg's E.T. isn't old-fashioned.", "Mr. Spielberg 's E.T. is n't old-fashioned ."),
    ("Let's face it: we couldn't care less (and shouldn't).",
     "Let 's face it : we could n't care less ( and should n't ) ."),
    ("I'd say 'em kids won't get it … yet.", "I 'd say 'em kids wo n't get it ... yet ."),
]


@pytest.fixture(scope="module")
def sst_all():
    """Every SST sentence (the fine-grained task keeps the neutral ones): 8544 / 1101 / 2210."""
    return load_sst(binary=False)


@pytest.fixture(scope="module")
def sst_tokenizer(sst_all):
    return build_tokenizer(sst_all.splits["train"]["text"])


# ------------------------------------------------------------------------------ item 1: PTB
def test_all_of_sst_tokenizes_exactly_as_before(sst_all):
    """Already-tokenized text is untouched: the bundled SST train/dev/test (every sentence), word by
    word, through the old and the new normalizer + pre-tokenizer."""
    n = 0
    for split, data in sst_all.splits.items():
        for text in data["text"]:
            assert new_words(text) == old_words(text), (split, text)
            n += 1
    assert n == 8544 + 1101 + 2210


def test_sst_vocabulary_and_ids_unchanged(sst_all):
    """Same vocabulary (so the same embedding rows) as with the old pipeline, same ids."""
    texts = sst_all.splits["train"]["text"]
    old_counts: dict[str, int] = {}
    for text in texts:
        for word in old_words(text):
            old_counts[word] = old_counts.get(word, 0) + 1
    assert word_counts(texts) == old_counts
    tokenizer = build_tokenizer(texts)
    vocab = tokenizer.get_vocab()
    for text in sst_all.splits["test"]["text"][:300]:
        assert tokenizer(text)["input_ids"] == [vocab.get(w, vocab[UNK]) for w in old_words(text)]


@pytest.mark.parametrize("raw,sst_form", RAW_VS_SST)
def test_raw_english_tokenizes_like_its_sst_form(raw, sst_form, sst_tokenizer):
    assert new_words(raw) == new_words(sst_form) == old_words(sst_form.replace("-LRB-", "(")
                                                                     .replace("-RRB-", ")"))
    assert sst_tokenizer.tokenize(raw) == sst_tokenizer.tokenize(sst_form)


def test_raw_english_differed_before():
    """The pairs above are why the normalizers exist: most raw spellings used to give other tokens."""
    differed = [raw for raw, sst_form in RAW_VS_SST if old_words(raw) != old_words(sst_form)]
    assert len(differed) >= 20, differed


def test_raw_example_has_no_unknown_words(sst_tokenizer):
    raw = "I don't like it, it isn't good."
    assert sst_tokenizer.tokenize(raw) == ["i", "do", "n't", "like", "it", ",", "it", "is", "n't", "good", "."]
    assert UNK not in sst_tokenizer.tokenize(raw)
    old_vocab_ids = [sst_tokenizer.get_vocab().get(w, -1) for w in old_words(raw)]
    assert old_words(raw).count("don't") == 1 and old_vocab_ids.count(-1) == 2  # don't, isn't → [UNK]


@pytest.mark.parametrize("text,expected", [
    ("the '70s", ["the", NUMBER_TOKEN]),
    ("a 90-minute film", ["a", NUMBER_TOKEN, "film"]),
    ("1999's best", [NUMBER_TOKEN, "'s", "best"]),
    ("1999 's best", [NUMBER_TOKEN, "'s", "best"]),
    ("$10 or $ 10", ["$", NUMBER_TOKEN, "or", "$", NUMBER_TOKEN]),
    ("K-19 and 9/11 , 2.5 stars", [NUMBER_TOKEN, "and", NUMBER_TOKEN, ",", NUMBER_TOKEN, "stars"]),
    ('"2001" wasn\'t', ["`", "`", NUMBER_TOKEN, "''", "was", "n't"]),
])
def test_number_words_still_become_qqq(text, expected):
    assert new_words(text) == expected


@pytest.mark.parametrize("ptb,bundled", [("-LRB- a -RRB-", "( a )"), ("-LSB- a -RSB-", "[ a ]"),
                                         ("-LCB- a -RCB-", "{ a }")])
def test_ptb_bracket_escapes_read_as_the_bundled_brackets(ptb, bundled):
    """hf_attn.data.tasks unescapes SST's -LRB- etc.: text still escaped (e.g. GLUE SST-2) now matches."""
    assert new_words(ptb) == new_words(bundled) == old_words(bundled)


def test_rules_live_in_tokenizer_json(tmp_path, sst_tokenizer):
    """The PTB rules are serialized: a Tokenizer read back from tokenizer.json alone (no hf_attn
    code) gives the same tokens and ids."""
    sst_tokenizer.save_pretrained(tmp_path)
    plain = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    for raw, _ in RAW_VS_SST:
        assert plain.encode(raw).tokens == sst_tokenizer.tokenize(raw)
        assert plain.encode(raw).ids == sst_tokenizer(raw)["input_ids"]
    assert "n't" in (tmp_path / "tokenizer.json").read_text()


# Where nltk's Treebank rules and SST's (Stanford PTBTokenizer) spelling differ: nltk keeps Unicode
# dashes and quotes, leaves an opening single quote on its word and splits SST's ol' and 'n'.
NLTK_DIFFERS = {"They're funny—sometimes.", "It's the kind of 'art' film you'd hate.",
                "Good ol' rock 'n' roll, for cryin' out loud.", "He said “it’s wonderful” – and he’s right."}


def test_treebank_reference():
    """nltk's TreebankWordTokenizer (a reference only, not a dependency: skipped without nltk) then
    the old pipeline gives the new pipeline's words on the raw sentences."""
    nltk_treebank = pytest.importorskip("nltk.tokenize.treebank")
    treebank = nltk_treebank.TreebankWordTokenizer()
    checked = 0
    for raw, _ in RAW_VS_SST:
        if raw not in NLTK_DIFFERS:
            assert new_words(raw) == old_words(" ".join(treebank.tokenize(raw))), raw
            checked += 1
    assert checked >= 18


# --------------------------------------------------------------------- item 2: loading claims
@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, sst_all):
    """A folder as `hf-attn train` writes it (save_pretrained of model and tokenizer); untrained
    weights suffice for loading."""
    from hf_attn import AttnClassifierConfig, AttnClassifierForSequenceClassification

    folder = tmp_path_factory.mktemp("run") / "model"
    tokenizer = build_tokenizer(sst_all.splits["train"]["text"][:2000])
    config = AttnClassifierConfig(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                                  unk_token_id=tokenizer.unk_token_id, mask_token_id=tokenizer.mask_token_id,
                                  id2label={0: "negative", 1: "positive"},
                                  label2id={"negative": 0, "positive": 1})
    AttnClassifierForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    assert "AutoConfig" in json.loads((folder / "config.json").read_text())["auto_map"]
    return folder


PROMPT = "Do you wish to run the custom code"
MODEL_TYPE_WARNING = "You are using a model of type"


def load_in_fresh_python(folder, call: str, with_hf_attn: bool, workdir) -> dict:
    """Run ``call`` (e.g. ``AutoTokenizer.from_pretrained(folder)``) in a new interpreter, stdin
    closed, with or without ``hf_attn`` importable. Returns what it printed, its Python warnings,
    the class loaded or the exception raised, and the ids of the example sentence."""
    script = (("import hf_attn\n" if with_hf_attn else BLOCK_HF_ATTN) + textwrap.dedent(f"""
        import json, warnings
        from transformers import AutoModelForSequenceClassification, AutoTokenizer, PreTrainedTokenizerFast, pipeline
        folder = {str(folder)!r}
        result = {{}}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                loaded = {call}
                result["loaded"] = type(loaded).__name__
                tokenizer = getattr(loaded, "tokenizer", loaded)  # a pipeline's, or the tokenizer
                if hasattr(tokenizer, "tokenize"):
                    result["tokens"] = tokenizer.tokenize("I don't like it, it isn't good.")
            except Exception as err:
                result["raised"] = f"{{type(err).__name__}}: {{err}}"
        result["warnings"] = [str(w.message) for w in caught]
        print("RESULT=" + json.dumps(result))
    """))
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_MODULES_CACHE=os.path.join(workdir, "modules"),
               TRANSFORMERS_VERBOSITY="warning")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                          stdin=subprocess.DEVNULL, cwd=workdir, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    printed, _, line = proc.stdout.rpartition("RESULT=")  # input() leaves its prompt without a newline
    result = json.loads(line)
    result["output"] = printed + proc.stderr
    return result


def assert_quiet(result):
    assert PROMPT not in result["output"], result["output"]
    assert MODEL_TYPE_WARNING not in result["output"], result["output"]
    assert "warn" not in result["output"].lower(), result["output"]
    assert result["warnings"] == []


SST_TOKENS = ["i", "do", "n't", "like", "it", ",", "it", "is", "n't", "good", "."]


LOADED = ("AttnClassifierForSequenceClassification", "TokenizersBackend", "PreTrainedTokenizerFast",
          "TextClassificationPipeline")


@pytest.mark.parametrize("call", ["AutoTokenizer.from_pretrained(folder)",
                                  "AutoModelForSequenceClassification.from_pretrained(folder)",
                                  'pipeline("text-classification", model=folder)'])
def test_readme_registered_with_import_hf_attn(model_dir, tmp_path, call):
    """README: with `import hf_attn`, plain from_pretrained(dir) loads model and tokenizer, and the
    pipeline, quietly; the tokenizer gives the SST tokens of raw text."""
    result = load_in_fresh_python(model_dir, call, with_hf_attn=True, workdir=str(tmp_path))
    assert "raised" not in result, result
    assert result["loaded"] in LOADED
    assert result.get("tokens", SST_TOKENS) == SST_TOKENS
    assert_quiet(result)


@pytest.mark.parametrize("call", ["AutoTokenizer.from_pretrained(folder, trust_remote_code=True)",
                                  "AutoModelForSequenceClassification.from_pretrained(folder, trust_remote_code=True)",
                                  'pipeline("text-classification", model=folder, trust_remote_code=True)',
                                  "PreTrainedTokenizerFast.from_pretrained(folder)"])
def test_readme_without_hf_attn(model_dir, tmp_path, call):
    """README: without hf_attn, trust_remote_code=True loads model and tokenizer (no question, no
    warning); PreTrainedTokenizerFast.from_pretrained(dir) loads the tokenizer without running any
    code from the folder. The tokenizer applies the PTB rules without hf_attn."""
    result = load_in_fresh_python(model_dir, call, with_hf_attn=False, workdir=str(tmp_path))
    assert "raised" not in result, result
    assert result["loaded"] in LOADED
    assert result.get("tokens", SST_TOKENS) == SST_TOKENS
    assert_quiet(result)


def test_readme_plain_model_without_hf_attn_raises(model_dir, tmp_path):
    """README: without hf_attn and without trust_remote_code the model does not load."""
    result = load_in_fresh_python(model_dir, "AutoModelForSequenceClassification.from_pretrained(folder)",
                                  with_hf_attn=False, workdir=str(tmp_path))
    assert result.get("raised", "").startswith("ValueError"), result
    assert "trust_remote_code=True" in result["raised"]


def test_readme_plain_auto_tokenizer_without_hf_attn_asks(model_dir, tmp_path):
    """README: transformers 5 AutoTokenizer reads config.json first, and its auto_map (needed for
    trust_remote_code) makes AutoConfig ask the trust question; unanswered it still loads the
    tokenizer, with a model-type warning. Nothing in the tokenizer files can avoid this (checked:
    tokenizer_class in tokenizer_config.json and config.json does not); if transformers changes,
    this test fails and the README sentence must go."""
    result = load_in_fresh_python(model_dir, "AutoTokenizer.from_pretrained(folder)",
                                  with_hf_attn=False, workdir=str(tmp_path))
    assert result["loaded"] in ("TokenizersBackend", "PreTrainedTokenizerFast"), result
    assert result["tokens"] == SST_TOKENS
    assert PROMPT in result["output"] and MODEL_TYPE_WARNING in result["output"]


def test_space_explains_raw_text_like_sst(model_dir):
    """The Space loads the tokenizer from tokenizer.json and explain_sentence calls it on the raw
    text: the raw sentence and its SST spelling get the same tokens and the same prediction."""
    from hf_attn.app.space import explain_sentence
    from hf_attn.models.loading import load_model_folder

    model, tokenizer = load_model_folder(model_dir)
    raw, sst_form = RAW_VS_SST[0]
    explained = [explain_sentence(model, tokenizer, text, num_permutations=2, k=1, steps=1)
                 for text in (raw, sst_form)]
    assert explained[0].tokens == explained[1].tokens == SST_TOKENS
    assert explained[0].probabilities.tolist() == explained[1].probabilities.tolist()


def test_every_punctuation_character_is_its_own_token():
    """SST's "..." and "Mr." are split like raw text's punctuation (the module docstring says so)."""
    from hf_attn.data.tokenization import build_tokenizer

    tok = build_tokenizer(["Mr. Smith ... is here ."])
    assert tok.tokenize("Mr. Smith ... is here .") == ["mr", ".", "smith", ".", ".", ".", "is", "here", "."]
