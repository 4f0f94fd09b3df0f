"""The notebook-first API: ``Explainer(model, tokenizer)`` = an adapter + the batteries, in memory.

>>> from hf_attn import Explainer                                   # doctest: +SKIP
>>> ex = Explainer.from_pretrained("runs/sst-lstm")                 # doctest: +SKIP
>>> ex.explain("a gripping, beautifully acted film")                # doctest: +SKIP
>>> jw = ex.jw(texts, labels); jw.summary(); jw.to_pandas(); jw.plot(); jw.save("out/jw")  # doctest: +SKIP

Works for the papers' BiLSTM/CNN/Average models and for any ``transformers`` sequence classifier the
adapter engine can intervene on (:mod:`hf_attn.adapters`); a model it cannot is refused when the
explainer is built, with the reason.

**Words from tokens** (:meth:`Explanation.words`): a word's value is the **sum** of its tokens'
values (the tokens with the same ``word_ids`` entry of the fast tokenizer; special tokens are
dropped). Summing keeps a distribution a distribution (attention over tokens → attention over words,
same total) and an additive attribution additive (integrated gradients' completeness survives).
"""

from __future__ import annotations

import html
import json
import math
import os
import time
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from hf_attn.adapters import AttentionSpec, adapter_for
from hf_attn.adapters.base import checked_texts
from hf_attn.core.io import json_safe, read_json, write_json_atomic, write_jsonl_atomic
from hf_attn.core.measure_names import JW_MEASURES, LOO_TVD
from hf_attn.explanation import EXPLANATION_ROWS, Explanation, SentenceExplanation
from hf_attn.explanation.settings import DEFAULT_SETTINGS, ExplainSettings


# ----------------------------------------------------------------------------------------------
# battery results


@dataclass
class BatteryResult:
    """A battery's results in memory: ``name`` (``"jw"``, ``"wp"``, ``"eraser"``), ``summary`` (every
    number, JSON-able), ``instances`` (one dict per text: JSON-able per-instance values), ``model``
    (what was explained) and ``settings``. ``summary()`` gives the headline numbers;
    ``to_pandas()`` one row per instance; ``plot()`` a figure; ``save(dir)`` / ``load(dir)``
    round-trip through ``results.json`` + ``instances.jsonl`` (written atomically)."""

    name: str
    data: dict
    instances: list[dict]
    model: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)

    HEADLINES = {
        "jw": (("num_instances", ("num_instances",)), ("accuracy", ("accuracy",)),
               ("tau_gradient", ("tau_gradient", "overall", "mean")), ("tau_loo", ("tau_loo", "overall", "mean")),
               ("permutation_median_tvd", ("permutation", "overall", "median")),
               ("adversary_eps_max_jsd", ("adversary", "overall", "mean")),
               ("adversary_fraction_feasible", ("adversary", "overall", "fraction_feasible")),
               ("seconds", ("seconds", "total"))),
    }
    # the printed name of a headline whose key alone could be read as another measure (J&W's
    # leave-one-out is the LOO-TVD, not the faithfulness table's LOO-drop)
    LABELS = {"jw": {"tau_loo": f"tau_loo (τ with {LOO_TVD})"}}

    def __repr__(self) -> str:
        """One line: the battery, the model, the instances and the headline numbers (no per-instance values)."""
        numbers = ", ".join([f"{k}={_fmt(v)}" for k, v in self.summary().items()
                             if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "num_instances"][:8])
        model = self.model.get("name") or self.model.get("text") or "?"
        return (f"BatteryResult({self.name!r}, model={str(model)!r}, {len(self.instances)} instances"
                + (f"; {numbers}" if numbers else "") + ")")

    def summary(self) -> dict:
        """The headline numbers (the full summary is ``.data``)."""
        if self.name not in self.HEADLINES:
            return dict(self.data)
        out = {}
        for key, path in self.HEADLINES[self.name]:
            value = self.data
            for part in path:
                value = value.get(part) if isinstance(value, dict) else None
            out[key] = value
        return out

    def to_pandas(self, level: str = "instance"):
        """Tidy frames, no list-valued cells: ``level="instance"`` one row per instance (its scalar
        values); ``level="token"`` one row per (instance, token) with the per-token values (J&W:
        ``attention``, ``gradient``, ``loo``: the LOO-TVD)."""
        import pandas as pd

        if level not in ("instance", "token"):
            raise ValueError(f"level must be 'instance' or 'token', got {level!r}")
        if level == "instance":
            return pd.DataFrame([{"instance": i, **{k: v for k, v in row.items() if not isinstance(v, (list, dict))}}
                                 for i, row in enumerate(self.instances)])
        rows = []
        for i, row in enumerate(self.instances):
            lists = {k: v for k, v in row.items() if isinstance(v, list) and k != "tokens"}
            for t, token in enumerate(row.get("tokens", [])):
                rows.append({"instance": i, "position": t, "token": token,
                             **{k: v[t] for k, v in lists.items() if t < len(v)}})
        return pd.DataFrame(rows)

    def tidy(self):
        """Long format: one row per (instance, measure) of the instances' scalar values."""
        frame = self.to_pandas()
        keep = [c for c in frame.columns if c != "instance" and frame[c].map(lambda v: isinstance(v, (int, float))
                                                                               or v is None).all()]
        return frame.melt(id_vars=["instance"], value_vars=keep, var_name="measure", value_name="value")

    def _repr_html_(self) -> str:
        labels = self.LABELS.get(self.name, {})
        rows = "".join(f"<tr><td>{html.escape(str(labels.get(k, k)))}</td><td>{html.escape(_fmt(v))}</td></tr>"
                       for k, v in self.summary().items())
        return (f"<p><b>{html.escape(self.name)} battery</b> — {html.escape(self.model.get('text', ''))}</p>"
                f"<table>{rows}</table>")

    def plot(self, path: str | None = None):
        """A figure of the per-instance results (J&W: τ histograms and the adversary's JSD against the
        largest attention; others: the summary's numbers as bars); saved to ``path`` when given."""
        import matplotlib

        if path is not None:
            matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        frame = self.to_pandas()
        if self.name == "jw" and len(frame):
            fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
            for column, color, label in (("tau_attention_gradient", "#2980b9", "attention vs gradient"),
                                         ("tau_attention_loo", "#c0392b", f"attention vs {LOO_TVD}")):
                values = frame[column].dropna() if column in frame else []
                axes[0].hist(values, bins=20, range=(-1, 1), alpha=0.6, color=color, label=label)
            axes[0].set_xlabel("Kendall τ per instance")
            axes[0].legend(fontsize=7)
            axes[1].scatter(frame["max_attention"], frame["eps_max_jsd"], s=8, color="#34495e")
            axes[1].set_xlabel("largest attention weight")
            axes[1].set_ylabel("ε-max JSD of the adversary")
        else:
            numbers = {k: v for k, v in self.summary().items() if isinstance(v, (int, float))}
            fig, ax = plt.subplots(figsize=(6, 3))
            ax.bar(list(numbers), list(numbers.values()), color="#2980b9")
            ax.tick_params(axis="x", rotation=30)
        fig.suptitle(f"{self.name}: {self.model.get('text', '')}", fontsize=9)
        fig.tight_layout()
        if path is not None:
            fig.savefig(path, dpi=120)
            plt.close(fig)
        return fig

    def save(self, folder: str) -> str:
        record = {"battery": self.name, "summary": self.data, "model": self.model, "settings": self.settings,
                  "instances_file": "instances.jsonl",
                  **({"measure_definitions": JW_MEASURES} if self.name == "jw" else {})}
        write_jsonl_atomic(os.path.join(folder, "instances.jsonl"), self.instances)
        write_json_atomic(os.path.join(folder, "results.json"), record)
        return folder

    @classmethod
    def load(cls, folder: str) -> "BatteryResult":
        path = os.path.join(folder, "results.json")
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path}: no saved battery results here")
        record = read_json(path)
        rows_path = os.path.join(folder, record.get("instances_file", "instances.jsonl"))
        with open(rows_path, encoding="utf-8") as f:
            instances = [json.loads(line) for line in f if line.strip()]
        return cls(record["battery"], record["summary"], instances, record.get("model", {}), record.get("settings", {}))


@dataclass
class MethodAttributions:
    """Every attribution method's scores of the same texts, side by side
    (:meth:`Explainer.attributions`). Per text ``i``: ``tokens[i]`` (its content tokens, special
    tokens and pads left out), ``values[method][i]`` (one score per token), ``probabilities[i]``
    and ``predicted[i]``; ``methods``: the methods that ran, in the requested order; ``skipped``:
    method → why it did not run; ``seconds``: method → wall seconds over all texts; ``padding``:
    padded / real tokens of the length-sorted method batches (1.0 = no padding); ``cost``: method →
    what it cost (seconds, forwards; integrated gradients' nodes per sentence and completeness:
    the share of texts whose gap |Σ_t IG_t − (f(x) − f(x'))| is within 1 % of |f(x) − f(x')|);
    ``undefined``: method → {text index: why its values there are NaN} (a one-token text's
    leave-one-out on a model without an empty input: :mod:`hf_attn.methods.one_token`, the rule
    :meth:`Explainer.explain` and the tables follow)."""

    texts: list[str]
    tokens: list[list[str]]
    methods: list[str]
    values: dict[str, list[list[float]]]
    skipped: dict[str, str]
    seconds: dict[str, float]
    probabilities: list[list[float]]
    predicted: list[int]
    label_names: list[str]
    padding: float = 1.0
    cost: dict = field(default_factory=dict)
    undefined: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.texts)

    def __repr__(self) -> str:
        """One line: how many texts, the methods that ran and those skipped (no scores)."""
        skipped = f"; skipped: {', '.join(self.skipped)}" if self.skipped else ""
        count = len(self.texts)
        return (f"MethodAttributions({count} text{'' if count == 1 else 's'}, methods: {', '.join(self.methods)}"
                f"{skipped})")

    def to_pandas(self):
        """One row per (text, token), one column per method."""
        import pandas as pd

        rows = []
        for i, tokens in enumerate(self.tokens):
            for t, token in enumerate(tokens):
                rows.append({"text": i, "position": t, "token": token,
                             **{m: self.values[m][i][t] for m in self.methods}})
        return pd.DataFrame(rows)


def _fmt(value) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


# ----------------------------------------------------------------------------------------------
# the explainer


class Explainer:
    """An adapter + the batteries, in memory (module docstring).

    ``model``, ``tokenizer``: any transformers sequence classifier with a fast tokenizer, or an
    hf_attn model; ``layer`` / ``heads`` / ``query``: which attention is explained
    (:class:`hf_attn.adapters.AttentionSpec`); ``device``: ``auto | cpu | cuda | cuda:N | mps``;
    ``precision``: ``float32 | bfloat16 | float16``; ``token_budget``: padded tokens per forward."""

    def __init__(self, model, tokenizer, *, layer: int = -1, heads="mean", query="auto", device="auto",
                 precision="float32", token_budget: int = 8192, max_length: int | None = 512):
        self.adapter = adapter_for(model, tokenizer, layer=layer, heads=heads, query=query, device=device,
                                   precision=precision, token_budget=token_budget, max_length=max_length)
        self.model, self.tokenizer = self.adapter.model, self.adapter.tokenizer

    @classmethod
    def from_adapter(cls, adapter) -> "Explainer":
        """An explainer over an adapter already built (:func:`hf_attn.adapters.adapter_for`), e.g.
        one kept per loaded model by an app."""
        for name in ("encode", "model", "tokenizer"):
            if not hasattr(adapter, name):
                raise ValueError(f"adapter must be an hf_attn adapter (adapter_for(model, tokenizer)); it has no "
                                 f"{name!r}")
        explainer = cls.__new__(cls)
        explainer.adapter = adapter
        explainer.model, explainer.tokenizer = adapter.model, adapter.tokenizer
        return explainer

    @classmethod
    def from_pretrained(cls, name_or_path: str, **kwargs) -> "Explainer":
        """From a local folder (an ``hf-attn train`` run, any ``save_pretrained`` folder), a Hub id
        (``owner/name``; ``HF_HUB_OFFLINE=1`` uses only the cache) or a packaged alias such as
        ``"minilm-l6"``. Never runs code from the folder or repo (no ``trust_remote_code``). The weights
        are loaded in ``precision`` (float32 by default, whatever dtype the checkpoint was saved in), so
        :meth:`describe`'s ``precision`` and ``weights_dtype`` are what runs (``dtype`` / ``torch_dtype``
        are refused: pass ``precision``). ``device_map`` (``"auto"`` or ``{module: device}``, with
        ``max_memory`` and ``offload_folder``): a model larger than one device, dispatched by accelerate
        across GPUs, the CPU and the disk (:mod:`hf_attn.adapters.placement`); transformers classifiers only."""
        from hf_attn.adapters.transformer_attention import load_for_explainer

        model, tokenizer = load_for_explainer(name_or_path, kwargs)  # device_map & co. taken out of kwargs
        return cls(model, tokenizer, **kwargs)

    def describe(self) -> dict:
        return self.adapter.describe() | {"name": os.path.basename(os.path.normpath(str(self.adapter.name)))}

    def __repr__(self) -> str:
        """One line, no memory address: ``Explainer(model='sst-bert', kind='transformers
        BertForSequenceClassification', device='cpu', attention='layer -1, mean of heads')``."""
        described = self.describe()
        own = self.adapter.model_type == "hf_attn"
        config = self.model.config
        kind = (f"hf_attn {getattr(config, 'encoder', '?')} encoder, {getattr(config, 'attention', '?')} attention"
                if own else f"transformers {type(self.model).__name__}")
        spec = getattr(self.adapter, "spec", None)
        heads = "" if spec is None else (", mean of heads" if spec.heads == "mean" else f", head {spec.heads}")
        attention = "the model's attention" if spec is None else f"layer {spec.layer}{heads}"
        return (f"Explainer(model={described.get('name', '?')!r}, kind={kind!r}, "
                f"device={str(described.get('device', '?'))!r}, attention={attention!r})")

    def explain(self, texts, settings: ExplainSettings | None = None, **changes) -> Explanation:
        """The one explanation object (:class:`hf_attn.explanation.SentenceExplanation` per text), which
        a notebook, the Space and ``hf-attn explain`` render. ``settings``: an
        :class:`~hf_attn.explanation.settings.ExplainSettings` (default: its defaults, the ones the Space
        and ``hf-attn explain`` use); ``changes``: any of its fields by name, e.g.
        ``explain(text, adversary_steps=100, ig=False)``. Per token and per word: attention, J&W's
        gradient (attention held fixed), leave-one-out (the LOO-TVD, J&W §4.1), integrated gradients
        (``ig_steps`` trapezoid intervals; ``ig=False`` skips them; ``ig_baseline`` ``"zero"``, ``"pad"`` or ``"mean"``: on Llama,
        Qwen2, Mistral and ModernBERT the zero embedding is the singular point of the first
        normalisation, where no step count meets completeness — the gap reported per sentence shows
        it, and ``"mean"``, the mean input embedding, avoids it: :mod:`hf_attn.methods.ig_baselines`), rollout, the per-token read-out p̂_t of
        hf_attn's models (T&Š Fig. 2); ``num_permutations`` random permutations of the attention (J&W
        Alg. 2; 0 to skip); the adversary (J&W Alg. 3: ``k`` adversaries, ``adversary_steps`` Adam
        steps, ``lam``, ``lr``; skip it with ``adversary=False``); the sentence's Kendall τ. Seeded: the
        same call gives the same permutations and adversaries. ``texts``: a string, a list or a
        ``datasets`` column. A text longer than the model's limit is cut, with a
        :class:`~hf_attn.adapters.contract.TruncationWarning` (decoders keep its end). Every setting
        out of its range (``k``, ``batch_size`` < 1, ``eps`` < 0 or not finite, …) is a ``ValueError``
        naming it, and so is a name that is not a setting."""
        if settings is None:
            settings = DEFAULT_SETTINGS
        elif not isinstance(settings, ExplainSettings):
            raise ValueError(f"settings must be an ExplainSettings, got {type(settings).__name__}")
        typed = settings.updated(**changes)
        batch_size, eps = typed.batch_size, typed.eps
        items = checked_texts(texts)
        settings = dict(ig_steps=typed.ig_steps if typed.ig else 0, ig_baseline=typed.ig_baseline,
                        adversary=typed.adversary, k=typed.k, steps=typed.adversary_steps, eps=eps, lam=typed.lam,
                        lr=typed.lr, num_permutations=typed.num_permutations, seed=typed.seed)
        sentences: list[SentenceExplanation] = []
        for start in range(0, len(items), batch_size):
            chunk = items[start:start + batch_size]
            batch = self.adapter.encode(chunk, first_index=start)
            empty = [start + i for i in range(len(chunk)) if not bool(batch.content[i].any())]
            if empty:  # e.g. a lone combining accent or a private-use character: the tokenizer drops it
                raise ValueError(f"texts[{empty[0]}]: the text has no tokens of its own after tokenisation "
                                 f"({chunk[empty[0] - start]!r} gives only special tokens): nothing to explain")
            measured = self._measure(batch, start, settings)
            sentences += [self._sentence(text, batch, i, measured, eps) for i, text in enumerate(chunk)]
        return Explanation(sentences, self.describe(), typed.to_dict())

    def _measure(self, batch, start: int, settings: dict) -> dict:
        """Every measure of :meth:`explain` on one encoded batch: ``(B, T)`` rows (zero off the
        content tokens) and the adversaries and permutations, with the seconds each took."""
        from hf_attn.methods.adapter_integrated_gradients import integrated_gradients_attribution
        from hf_attn.methods.adversary import adversarial_rows, restrict_to_content
        from hf_attn.methods.gradient import attention_fixed_gradient
        from hf_attn.methods.leave_one_out import deletion_importance, deletion_reference
        adapter, content, seconds = self.adapter, batch.content, {}
        clock = time.perf_counter()

        def timed(name):
            nonlocal clock
            now = time.perf_counter()
            seconds[name], clock = now - clock, now

        forward = adapter.forward(batch)
        out = {"forward": forward, "attention": restrict_to_content(forward.attention, content), "seconds": seconds}
        if adapter.num_layers > 1 and forward.rollout is not None:
            out["rollout"] = restrict_to_content(forward.rollout, content)
        if adapter.model_type == "hf_attn":  # T&Š Fig. 2: all attention on token t, exactly, from the cached states
            one_hot = torch.eye(content.shape[1], dtype=forward.attention.dtype).expand(len(batch), -1, -1)
            out["token_probability"] = adapter.logits_under(batch, one_hot, False, forward).float().softmax(-1)
        timed("prediction")
        out["gradient"] = attention_fixed_gradient(adapter, batch)
        timed("gradient")
        loo = deletion_importance(adapter, batch, deletion_reference(adapter, forward.probabilities))
        out["loo"], out["undefined_loo"] = _one_token_loo(adapter, batch, forward.probabilities, loo)
        timed("leave_one_out")
        if settings["ig_steps"]:
            out["ig"] = integrated_gradients_attribution(adapter, batch, steps=settings["ig_steps"], rule="trapezoid",
                                                         baseline=settings["ig_baseline"])
            timed("integrated_gradients")
        if settings["num_permutations"]:
            out["permutation"] = _permutations(adapter, batch, forward, settings["num_permutations"],
                                               torch.Generator().manual_seed(settings["seed"] + start))
            timed("permutation")
        if settings["adversary"]:
            generator = torch.Generator().manual_seed(settings["seed"] + start)
            out["adversary"] = adversarial_rows(adapter, batch, forward, k=settings["k"], lam=settings["lam"],
                                                eps=settings["eps"], steps=settings["steps"], lr=settings["lr"],
                                                generator=generator)
            timed("adversary")
        return out

    def _sentence(self, text: str, batch, i: int, measured: dict, eps: float) -> SentenceExplanation:
        """Text ``i`` of a measured batch as one :class:`SentenceExplanation` (its content tokens)."""
        from hf_attn.explanation import sentence_kendall

        keep = batch.content[i]
        ids = batch.input_ids[i][keep].tolist()
        word_ids = [w for w, c in zip(batch.word_ids[i], keep.tolist()) if c]
        tokens = self.tokenizer.convert_ids_to_tokens(ids)

        def row(values):
            return None if values is None else values[i][keep].detach().double().cpu().numpy()

        probabilities = measured["forward"].probabilities[i].double().cpu().numpy()
        predicted = int(np.argmax(probabilities))
        rows = {n: row(measured.get(n)) for n in ("attention", "gradient", "loo", "rollout")}
        undefined = {}  # one-token texts: hf_attn.methods.one_token's rule, the same as attributions and the tables
        if measured["undefined_loo"][i] is not None:
            rows["loo"] = np.full(len(tokens), np.nan)
            undefined["loo"] = measured["undefined_loo"][i]
        if len(tokens) == 1:
            from hf_attn.methods.one_token import rule

            undefined["kendall"] = rule("kendall")[1]
        ig = measured.get("ig")
        read_out = measured.get("token_probability")
        typed, spans, unknown = _typed_tokens(self.tokenizer, text, batch, i, tokens,
                                              widen=self.adapter.model_type == "hf_attn")
        sentence = SentenceExplanation(
            text=text, tokens=tokens, label_names=self._label_names(), probabilities=probabilities,
            predicted=predicted, **rows, ig=row(None if ig is None else ig.attributions),
            ig_completeness_gap=None if ig is None else float(ig.completeness_gap[i]),
            token_probability=(np.full(len(tokens), np.nan) if read_out is None else
                               read_out[i][keep][:, predicted].detach().double().cpu().numpy()),
            word_ids=word_ids, words=_words(self.tokenizer, ids, word_ids), typed=typed, spans=spans,
            unknown=unknown, special=[False] * len(tokens),
            kendall=sentence_kendall(rows["attention"], rows["gradient"], rows["loo"]),
            variant=(str(getattr(self.model.config, "variant", "base")) if self.adapter.model_type == "hf_attn"
                     else f"{self.adapter.model_type} (transformers)"),
            explained=None if self.adapter.model_type == "hf_attn" else explained_attention(self.adapter),
            seconds=dict(measured["seconds"]), undefined=undefined)
        if "permutation" in measured:
            sentence.permutation_tvd = measured["permutation"][i].double().cpu().numpy()
        if "adversary" in measured:
            _add_adversary(sentence, measured["adversary"], i, keep, eps)
        return sentence

    def _label_names(self) -> list[str]:
        from hf_attn.batteries.data import model_class_names

        return model_class_names(self.model.config)

    def _checked_labels(self, labels, count: int) -> list[int]:
        """Labels checked against the model's classes: class ids in ``[0, num_labels)`` (``1.0`` is 1;
        ``0.7``, ``-1``, ``5`` of 2 are refused) or the model's own class names (``id2label``)."""
        from hf_attn.core.validation import check_labels

        names = self._label_names()
        return check_labels(labels, count, len(names), names)

    def jw(self, texts, labels=None, **settings) -> BatteryResult:
        """Jain & Wallace's battery (§4: τ of attention vs gradient and leave-one-out as the LOO-TVD,
        permutation, adversary) on ``texts`` in memory, through this explainer's adapter
        (:func:`hf_attn.batteries.jw.battery.run_jw_battery`). ``settings``: the fields of
        :class:`hf_attn.batteries.jw.common.JWSettings`, e.g. ``num_permutations``, ``k``, ``steps``,
        ``seed`` (the explained layer and heads are the explainer's)."""
        from hf_attn.batteries.jw.battery import run_jw_battery
        from hf_attn.batteries.jw.common import JWSettings
        from hf_attn.batteries.jw.summary import strip_arrays

        items = checked_texts(texts)
        if labels is not None:
            labels = self._checked_labels(labels, len(items))
        own = {"layer", "heads", "device", "precision"}  # the explainer's, from its adapter
        unknown = sorted((set(settings) - set(JWSettings.__dataclass_fields__)) | (own & set(settings)))
        if unknown:
            raise ValueError(f"unknown jw setting(s) {unknown}; see JWSettings (the layer, heads, device and "
                             "precision are the Explainer's own)")
        described = self.adapter.describe()
        typed = JWSettings(layer=self.adapter.spec.layer, heads=self.adapter.spec.heads, device=described["device"],
                           precision=described["precision"], **settings)
        instances, summary = run_jw_battery(self.adapter, items, labels, typed, progress=False)
        rows = []
        for i in range(len(items)):
            tau = {f"tau_{n}": t[i] for n, (t, _) in instances.kendall.items()}
            ids = [int(t) for t in instances.input_ids[i]]
            rows.append(_jw_row(items[i], self.tokenizer.convert_ids_to_tokens(ids), instances.attention[i],
                                instances.gradient[i], instances.loo[i], instances.probabilities[i],
                                instances.permutation_tvd[i], instances.eps_max_jsd[i], tau,
                                None if labels is None else labels[i]))
        return BatteryResult("jw", json_safe(strip_arrays(summary)), rows, self.describe(), asdict(typed))

    def eraser(self, texts, *, fractions=(0.01, 0.05, 0.1, 0.2, 0.5), ig_steps: int = 50, seed: int = 0
               ) -> BatteryResult:
        """ERASER comprehensiveness / sufficiency / AOPC (DeYoung et al. 2020 §4) of attention,
        rollout (models with several attention layers), gradient, leave-one-out (the LOO-TVD),
        integrated gradients and random scores, in memory (:func:`hf_attn.batteries.eraser.battery.eraser_table`)."""
        from hf_attn.batteries.eraser.battery import encode_for, eraser_table
        from hf_attn.core.validation import check_seed, check_whole

        ig_steps = check_whole("ig_steps", ig_steps, limit="ig_nodes")  # the int kept: NumPy integers accepted
        seed = check_seed(seed)
        items = checked_texts(texts)
        ids, mask, units = encode_for(self.adapter, items)
        if not bool(units.any(1).all()):
            raise ValueError("a text has no tokens of its own (only special tokens): remove it first")
        table = eraser_table(self.adapter, ids, mask, units, fractions=fractions, ig_steps=ig_steps, seed=seed)
        rows = [{"measure": name, **{k: v for k, v in row.items() if not isinstance(v, (list, dict))}}
                for name, row in table["measures"].items()]
        return BatteryResult("eraser", json_safe(table), rows, self.describe(),
                             {"fractions": list(fractions), "ig_steps": ig_steps, "seed": seed})

    def faithfulness(self, texts, rationales=None, attributions=None, attributions_level: str = "token",
                     shard_sentences: int = 256, **settings):
        """The faithfulness table (rows = attribution methods, columns = faithfulness metrics, with
        95 % intervals, time and memory per sentence) of this model on ``texts``, in memory:
        :func:`hf_attn.batteries.faithfulness.run_faithfulness`. ``rationales``: a human rationale per
        text (one 0/1 mark per whitespace word, e.g. ``hf_attn.datasets.load("sst_rationales")
        .rationales("test")``) adds the plausibility columns (AUPRC, token F1, IOU F1 against them,
        :mod:`hf_attn.batteries.faithfulness.plausibility`). ``attributions``: ``{name: one array of
        scores per text}`` computed elsewhere (captum, inseq, ferret, LXT, …), at ``attributions_level``
        ``"token"`` (the model's tokens, with or without its special tokens) or ``"word"`` (whitespace
        words), become rows scored like the table's own methods
        (:mod:`hf_attn.batteries.faithfulness.given`). Computed in shards of ``shard_sentences`` texts
        (:mod:`~hf_attn.batteries.faithfulness.shards`). ``settings``: the fields of
        :class:`hf_attn.batteries.faithfulness.FaithfulnessSettings` (``methods``, ``fractions``,
        ``ig_steps``, …). Returns a ``FaithfulnessResult`` (``summary()``, ``to_pandas()``, ``plot()``,
        ``plot_axes()``, ``two_axes()``, ``save(dir)``)."""
        from hf_attn.batteries.faithfulness import FaithfulnessSettings

        unknown = sorted(set(settings) - set(FaithfulnessSettings.__dataclass_fields__))
        if unknown:
            raise ValueError(f"unknown faithfulness setting(s) {unknown}; see FaithfulnessSettings")
        from hf_attn.batteries.faithfulness.shards import run_faithfulness_sharded

        result, _ = run_faithfulness_sharded(self.adapter, checked_texts(texts), FaithfulnessSettings(**settings),
                                             rationales=rationales, attributions=attributions,
                                             attributions_level=attributions_level, shard_sentences=shard_sentences)
        return result

    def attributions(self, texts, methods=None, time_budget: float | None = None, target=None, foil=None,
                     **settings) -> MethodAttributions:
        """Every attribution method of the faithfulness table on ``texts``, side by side, per content
        token (:func:`hf_attn.batteries.faithfulness.attribution_scores`; each method's paper and
        equation are in :mod:`hf_attn.batteries.faithfulness` and its module). ``methods``: names of
        ``hf_attn.batteries.faithfulness.METHODS`` (default: all but the random floor and the opt-in alti_logit); a method that
        does not apply to this model (or needs captum when it is missing) is left out, with the
        reason in ``skipped``. ``settings``: the method knobs of
        :class:`hf_attn.batteries.faithfulness.FaithfulnessSettings` (``ig_steps``, ``ig_rule``,
        ``ig_target``, ``ig_max_steps``, ``shap_samples``, ``seed``, ``gradient_target``,
        ``ig_baseline``, ``flow_normalise``). ``time_budget``: seconds for all the methods, held
        inside the running methods too (:mod:`hf_attn.core.deadline`): a method that runs out, or
        could not finish in the time left, and the methods after the budget is spent are in
        ``skipped`` as "not run: budget" with the reason, never with partial scores (None: no limit).
        ``target`` / ``foil``: a class (index or name) explained instead of the predicted one, and one
        to contrast it with (Yin & Neubig 2022 §2.2; docs/faithfulness.md); methods explaining no class
        are skipped with the reason. Under ``accelerate launch`` / ``torchrun`` the length groups are
        split between the processes (:func:`hf_attn.batteries.faithfulness.shards.run_methods_sharded`)."""
        from hf_attn.batteries.faithfulness import DEFAULT_METHODS, FaithfulnessSettings, length_groups, run_methods
        from hf_attn.methods.kept_logits import keep_logits
        from hf_attn.core.numpy_measures import check_number

        if isinstance(methods, str):
            raise ValueError(f"methods must be a list of method names, got the string {methods!r}")
        methods = tuple(m for m in DEFAULT_METHODS if m != "random") if methods is None else tuple(methods)
        allowed = {"ig_steps", "ig_rule", "ig_target", "ig_max_steps", "shap_samples", "seed", "gradient_target",
                   "ig_baseline", "flow_normalise"}
        unknown = sorted(set(settings) - allowed)
        if unknown:
            raise ValueError(f"unknown attribution setting(s) {unknown}; allowed: {sorted(allowed)}")
        typed = FaithfulnessSettings(methods=methods, **settings)
        from hf_attn.batteries.data import class_index

        names = self._label_names()
        target, foil = class_index(names, target, "target"), class_index(names, foil, "foil")
        if foil is not None and foil == target:
            raise ValueError(f"the foil is the target class ({names[foil]}): nothing to contrast")
        contrast = None if target is None and foil is None else (target, foil)
        items = checked_texts(texts)
        adapter = self.adapter
        batch = adapter.encode(items)
        keep = batch.content
        if not bool(keep.any(1).all()):
            empty = [i for i, k in enumerate(keep.any(1).tolist()) if not k]
            raise ValueError(f"texts {empty[:5]} have no tokens of their own (only special tokens)")
        # length-sorted groups within the token budget, whatever order and lengths the caller gave
        groups = length_groups(batch, typed.batch_tokens)
        if time_budget is not None:
            check_number("time_budget", time_budget, 0, low_open=True)
        with keep_logits() as kept:  # the methods' own forwards of the texts give the probabilities
            from hf_attn.core.sharding import current_accelerator

            if current_accelerator() is not None:  # accelerate launch / torchrun: the groups split between processes
                from hf_attn.batteries.faithfulness.shards import run_methods_sharded
                if time_budget is not None:  # each process would stop at another point
                    raise ValueError("time_budget bounds one process's request: leave it out under accelerate launch")
                run = run_methods_sharded(adapter, batch, typed, groups, time_budget, contrast=contrast)
            else:
                run = run_methods(adapter, batch, typed, groups=groups, time_budget=time_budget, contrast=contrast)
        probabilities = self._probabilities(batch, groups, kept)
        content = [keep[i][batch.attention_mask[i].bool()].cpu().numpy() for i in range(len(items))]
        values = {name: [np.asarray(rows[i])[content[i]].tolist() for i in range(len(items))]
                  for name, rows in run.scores.items()}
        seconds = {name: c["seconds"] for name, c in run.cost.items()}
        from hf_attn.methods.one_token import undefined_rows

        undefined = {}
        for name, rows in run.scores.items():
            reasons = undefined_rows(adapter, name, rows, content)
            for i, reason in run.undefined.get(name, {}).items():  # a text the method failed on alone
                reasons[i] = reason
            explained = probabilities.argmax(-1).tolist() if target is None else [target] * len(items)
            for i in [i for i, c in enumerate(explained) if foil is not None and name != "random" and c == foil]:
                reasons[i] = f"the explained class is the foil ({names[foil]}): no contrast"  # nothing to contrast
                values[name][i] = [math.nan] * len(values[name][i])
            if any(reasons):
                undefined[name] = {i: r for i, r in enumerate(reasons) if r is not None}
        tokens = [self.tokenizer.convert_ids_to_tokens(batch.input_ids[i][keep[i]].tolist()) for i in range(len(items))]
        return MethodAttributions(texts=items, tokens=tokens, methods=list(values), values=values, skipped=run.skipped,
                                  seconds=seconds, probabilities=probabilities.tolist(),
                                  predicted=probabilities.argmax(-1).tolist(), label_names=self._label_names(),
                                  padding=run.padding, cost=json_safe(run.cost), undefined=undefined)

    def _probabilities(self, batch, groups, kept: dict) -> torch.Tensor:
        """``(B, C)`` softmax of each text's logits: those a method computed (``kept``), a forward
        for the groups with a text no method ran unperturbed."""
        from hf_attn.methods.kept_logits import text_key

        mask = batch.attention_mask.bool().cpu()
        ids = batch.input_ids.cpu()
        keys = [text_key(ids[i][mask[i]].tolist()) for i in range(len(ids))]
        probabilities = torch.zeros(len(keys), self.model.config.num_labels)
        with torch.no_grad():
            for group in groups:
                if all(keys[i] in kept for i in group):
                    logits = torch.stack([kept[keys[i]] for i in group])
                else:
                    logits = self.adapter.logits(batch.select(group.tolist())).float().cpu()
                probabilities[torch.as_tensor(group)] = logits.float().softmax(-1)
        return probabilities

    def wp(self, texts, labels) -> BatteryResult:
        """Wiegreffe & Pinter §3.2 in memory: the model against its own attention replaced by the
        uniform distribution (at the explained layer, and at every layer for transformers): F1 of
        each and the output TVD per instance. The seed-variance (§3.3) and diagnostic-MLP (§3.4)
        sections need other trained models: ``hf-attn analyze DIR --battery wp``."""
        from hf_attn.batteries.wp.transformer import forward_batch, uniform_section

        items = checked_texts(texts)
        labels = np.asarray(self._checked_labels(labels, len(items)), dtype=np.int64)
        outputs: dict[str, list] = {}
        for start in range(0, len(items), 32):
            batch = self.adapter.encode(items[start:start + 32])
            every = self.adapter.model_type != "hf_attn"
            if every:
                values = forward_batch(self.adapter, batch, uniform=True, every_layer=True)
            else:
                forward = self.adapter.forward(batch)
                uniform = batch.attention_mask / batch.attention_mask.sum(-1, keepdim=True)
                values = {"probabilities": forward.probabilities,
                          "uniform": self.adapter.logits_under(batch, uniform.unsqueeze(1), False, forward)[:, 0]
                          .softmax(-1)}
            for name in ("probabilities", "uniform", "uniform_content", "uniform_every_layer"):
                if name in values:
                    outputs.setdefault(name, []).extend(values[name].double().cpu().numpy())
        arrays = {n: np.stack(v) for n, v in outputs.items()}
        section = uniform_section(arrays, labels)
        from hf_attn.core.measures import tvd

        distance = tvd(torch.from_numpy(arrays["uniform"]), torch.from_numpy(arrays["probabilities"])).numpy()
        rows = [{"text": t, "label": int(y), "predicted": int(p.argmax()), "uniform_predicted": int(u.argmax()),
                 "tvd_uniform": float(d)} for t, y, p, u, d in zip(items, labels, arrays["probabilities"],
                                                                    arrays["uniform"], distance)]
        return BatteryResult("wp", json_safe(section), rows, self.describe(), {"section": "uniform (W&P §3.2)"})


def _one_token_loo(adapter, batch, probabilities: torch.Tensor, loo: torch.Tensor
                   ) -> tuple[torch.Tensor, list[str | None]]:
    """Leave-one-out ``loo`` ``(B, T)`` with each one-token text's value by the rule of
    :mod:`hf_attn.methods.one_token`: TVD(ŷ(the model's empty input), ŷ(x)), NaN where the model has
    none; returns it and each row's reason (None: defined). hf_attn's own models' exact leave-one-out
    never deletes a text's only word, so their one-token rows are run here on the empty input (the
    markers alone, or one [PAD])."""
    from hf_attn.core.measures import tvd
    from hf_attn.methods.one_token import batch_refusals

    refusals = batch_refusals(adapter, batch, "loo")
    counts = batch.content.sum(1).tolist()
    loo = loo.clone()
    if getattr(adapter, "exact_model_methods", False):
        defined = [i for i, (n, r) in enumerate(zip(counts, refusals)) if n == 1 and r is None]
        if defined:
            real = batch.attention_mask.bool()
            empty = [batch.input_ids[i][real[i] & ~batch.content[i]].tolist() or [int(getattr(adapter, "pad_id", 0))]
                     for i in defined]
            with torch.no_grad():
                p = adapter.logits(adapter.from_token_lists(empty)).softmax(-1)
            rows = torch.as_tensor(defined, device=loo.device)
            values = tvd(p.to(probabilities.device), probabilities[rows]).to(loo.dtype).to(loo.device)
            loo[rows] = torch.where(batch.content[rows].to(loo.device), values[:, None], torch.zeros_like(loo[rows]))
    for i, reason in enumerate(refusals):
        if reason is not None:
            loo[i] = torch.where(batch.content[i].to(loo.device), torch.full_like(loo[i], float("nan")), loo[i])
    return loo, refusals


def _jw_row(text, tokens, attention, gradient, loo, probabilities, permutation, eps_max, tau, label) -> dict:
    attention = np.asarray(attention, dtype=np.float64)
    return {"text": text, "tokens": list(tokens), "label": label, "prediction": int(np.argmax(probabilities)),
            "max_attention": float(attention.max()) if attention.size else None,
            "attention": attention.tolist(), "gradient": np.asarray(gradient, dtype=np.float64).tolist(),
            "loo": np.asarray(loo, dtype=np.float64).tolist(),
            "permutation_median_tvd": float(np.median(permutation)), "eps_max_jsd": float(eps_max),
            **{k: (None if v is None or not np.isfinite(v) else float(v)) for k, v in tau.items()}}


EXPLAINED_ROWS = {"first": "the first token's row (the position its classification head reads)",
                  "last": "the last token's row (the position its decoder head reads)",
                  "mean": "every token's row, averaged (its head pools every position)"}


def explained_attention(adapter) -> str:
    """Which attention is explained for a transformers classifier, in words, from its adapter's facts
    (the layer, the query row(s) its head reads, the heads), never a fixed description."""
    rows = EXPLAINED_ROWS.get(adapter.query_rule, f"the {adapter.query_rule} row(s)")
    heads = "mean over" if adapter.spec.heads == "mean" else f"head {adapter.spec.heads} of"
    layer = "the last layer" if adapter.layer == adapter.num_layers - 1 else f"layer {adapter.layer}"
    return f"{layer}'s attention (of {adapter.num_layers}), {rows}, {heads} {adapter.num_heads} heads"


@torch.no_grad()
def _permutations(adapter, batch, forward, count: int, generator) -> torch.Tensor:
    """J&W Alg. 2's TVD ``(B, P)`` of ``count`` random permutations of the explained rows
    (:func:`hf_attn.methods.permutation.permuted_attention_tvd`). A transformers classifier without a pad
    token runs one row at a time (its pooling refuses several), over the same draws."""
    from hf_attn.methods.permutation import content_permutations, permuted_attention_tvd

    draws = content_permutations(batch.content, count, generator)
    if adapter.model_type == "hf_attn" or getattr(adapter.model.config, "pad_token_id", None) is not None:
        return permuted_attention_tvd(adapter, batch, forward, permutations=draws)
    rows = []
    for i in range(len(batch)):
        one = batch.select([i])
        single = adapter.forward(one)
        rows.append(torch.cat([permuted_attention_tvd(adapter, one, single, permutations=draws[i:i + 1, p:p + 1])
                               for p in range(count)], dim=1))
    return torch.cat(rows)


def _add_adversary(sentence: SentenceExplanation, adversaries, i: int, keep, eps: float) -> None:
    """The k adversaries of text ``i`` and the one shown: the largest-JSD one within ε TVD, else the
    closest (:func:`hf_attn.methods.adversary.best_feasible_adversary`)."""
    from hf_attn.methods.adversary import best_feasible_adversary

    tvds, jsds = adversaries.tvd[i:i + 1], adversaries.jsd[i:i + 1]
    chosen = int(best_feasible_adversary(tvds, jsds, eps).index[0])
    sentence.adversary_attention = adversaries.attention[i, chosen][keep].detach().double().cpu().numpy()
    sentence.adversaries_tvd = tvds[0].double().cpu().numpy()
    sentence.adversaries_jsd = jsds[0].double().cpu().numpy()
    sentence.adversary_tvd = float(tvds[0, chosen])
    sentence.adversary_jsd = float(jsds[0, chosen])
    sentence.adversary_probabilities = adversaries.probabilities[i, chosen].double().cpu().numpy()
    sentence.adversary_feasible = bool(tvds[0, chosen] <= eps)
    sentence.eps, sentence.eps_max_jsd = float(eps), float(adversaries.eps_max_jsd[i])


def _typed_tokens(tokenizer, text: str, batch, i: int, tokens: list[str], widen: bool):
    """Per content token of text ``i``: its text as typed, its ``[start, end)`` in ``text`` and whether
    the model reads it as the unknown token, from the tokenizer's offsets (hf_attn's tokenizers:
    widened where a normaliser rewrote the text, :func:`hf_attn.explanation.typed_spans`). Where the
    offsets cannot be matched to the encoded tokens (a cut text, a tokenizer without offsets), the
    tokens themselves, without spans."""
    from hf_attn.explanation import typed_spans

    keep = batch.content[i]
    mask = batch.attention_mask[i].bool()
    ids = batch.input_ids[i][mask].tolist()
    content = batch.content[i][mask].tolist()
    unk_id = getattr(tokenizer, "unk_token_id", None)
    unknown = [unk_id is not None and t == unk_id for t, c in zip(ids, content) if c]
    fallback = (list(tokens), [None] * len(tokens), unknown)
    try:
        from hf_attn.adapters.contract import encode_as_text

        encoded = encode_as_text(tokenizer, text, add_special_tokens=True, truncation=False,
                                 return_offsets_mapping=True)
    except (NotImplementedError, ValueError, TypeError, KeyError):
        return fallback
    if list(encoded["input_ids"]) != ids or int(keep.sum()) != len(tokens):
        return fallback
    offsets = [o for o, c in zip(encoded["offset_mapping"], content) if c]
    if widen:
        spans = typed_spans(text, tokens, offsets, [False] * len(tokens), unknown)
    else:
        spans = [[int(a), int(b)] if b > a else None for a, b in offsets]
    typed = [token if span is None else text[span[0]:span[1]] for token, span in zip(tokens, spans)]
    return typed, spans, unknown


def _words(tokenizer, ids: list[int], word_ids: list[int | None]) -> list[str]:
    """The words of one text indexed by word id (:func:`hf_attn.adapters.transformer_attention.words_of`
    decodes each word's tokens together)."""
    from hf_attn.adapters.transformer_attention import words_of

    present = sorted({w for w in word_ids if w is not None})
    words = [""] * (present[-1] + 1 if present else 0)
    for w, word in zip(present, words_of(ids, word_ids, tokenizer)):
        words[w] = word
    return words


__all__ = ["AttentionSpec", "BatteryResult", "Explainer", "Explanation", "SentenceExplanation", "explained_attention"]
