"""Configuration of the attentive text classifiers (Jain & Wallace 2019 §2 / appendix A,
Tutek & Šnajder 2020 §3).

This file is copied verbatim next to ``config.json`` by ``save_pretrained`` so that a saved
folder loads with ``trust_remote_code=True`` where ``hf_attn`` is not installed: it must only
import ``transformers``.
"""

from __future__ import annotations

import sys

from transformers import PretrainedConfig

ENCODERS = ("lstm", "cnn", "average")
ATTENTIONS = ("additive", "dot", "uniform")
VARIANTS = ("base", "concat", "residual", "tying", "mlm")
# Variants that add e_t to h_t or compare them, so the encoder output must have the embedding's size.
VARIANTS_NEEDING_2H_EQ_D = ("residual", "tying", "mlm")


def _register_the_models() -> None:
    """hf_attn's own copy of this file registers hf_attn's models with the Auto classes when the first
    config is made (``import hf_attn`` registers only the configs, so that it need not import
    transformers' modelling code); the copy next to a saved ``config.json`` does nothing (and names no
    hf_attn import, which transformers would require to be installed)."""
    package = sys.modules.get("hf_attn") if __name__ == "hf_attn.models.configuration_hf_attn" else None
    if package is not None:
        package.register_auto_classes()


class AttnClassifierConfig(PretrainedConfig):
    r"""One config drives the whole model.

    Args:
        vocab_size: number of rows of the embedding matrix (tokenizer vocabulary incl. specials).
        embedding_dim: d, the word-vector size (50 for GloVe-6B-50d, the offline default).
        encoder: ``"lstm"`` (bidirectional), ``"cnn"`` or ``"average"``.
        hidden_size: H. LSTM: units per direction (output 2H). Average: projection size (output H).
            ``None`` picks the papers' default (128 for the LSTM, 256 for Average), except for the
            ``residual``/``tying``/``mlm`` variants where it picks ``embedding_dim // 2`` (LSTM) or
            ``embedding_dim`` (Average) so that the encoder output equals d (T&Š: 2H = d).
        num_layers: LSTM layers.
        cnn_kernel_sizes, cnn_filters: CNN kernels (1, 3, 5, 7) × 64 filters, "same" padding, ReLU.
        average_activation: ``"relu"`` (J&W paper, appendix A.3) or ``"tanh"`` (the J&W code).
        attention: ``"additive"`` (vᵀ tanh(W h + b)), ``"dot"`` (q·h/√D, q ~ N(0,1)) or ``"uniform"``
            (frozen 1/T over real tokens, W&P §3.2).
        attention_hidden_size: size of W in additive attention; ``None`` → D // 2 (J&W: 2H → H).
        variant: ``"base"``, ``"concat"`` ([h; e]), ``"residual"`` (e + h), ``"tying"``
            (+ δ·mean‖h − e‖²), ``"mlm"`` (+ η·masked-LM loss with the frozen, tied embedding decoder).
        tying_delta: δ of the tying regulariser.
        mlm_probability, mlm_weight: p and η of the MLM regulariser.
        num_labels: 2 → one logit with a sigmoid (exposed as logits ``[0, z]`` so softmax == sigmoid);
            C > 2 → C logits with a softmax.
        class_weights: per-class loss weights (class-balanced loss); ``None`` = unweighted.
        max_tokens: longest input the model accepts (tokens); longer inputs are truncated by the
            tokenizer with a warning.
        pad_token_id, mask_token_id, unk_token_id: special ids (the tokenizer's).
        attention_exclude_first_last: the first and last real token of every row are sentence
            markers (``<SOS>``/``<EOS>`` of J&W's preprocessing, which the ``preprocessing="jw"``
            tokenizer adds): the encoder reads them, attention gives them exactly 0 (J&W code,
            ``model/modelUtils.py`` ``BatchHolder.masks``). Rows with fewer than 3 real tokens
            (no word between the markers) attend over all their tokens instead. Default False.
    """

    model_type = "hf_attn"

    def __init__(
        self,
        vocab_size: int = 3,
        embedding_dim: int = 50,
        encoder: str = "lstm",
        hidden_size: int | None = None,
        num_layers: int = 1,
        cnn_kernel_sizes: tuple[int, ...] | list[int] = (1, 3, 5, 7),
        cnn_filters: int = 64,
        average_activation: str = "relu",
        attention: str = "additive",
        attention_hidden_size: int | None = None,
        variant: str = "base",
        tying_delta: float = 1.0,
        mlm_probability: float = 0.15,
        mlm_weight: float = 1.0,
        class_weights: list[float] | None = None,
        max_tokens: int = 512,
        pad_token_id: int = 0,
        unk_token_id: int = 1,
        mask_token_id: int = 2,
        attention_exclude_first_last: bool = False,
        **kwargs,
    ):
        _register_the_models()
        if encoder not in ENCODERS:
            raise ValueError(f"encoder must be one of {ENCODERS}, got {encoder!r}")
        if attention not in ATTENTIONS:
            raise ValueError(f"attention must be one of {ATTENTIONS}, got {attention!r}")
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
        if average_activation not in ("relu", "tanh"):
            raise ValueError(f"average_activation must be 'relu' or 'tanh', got {average_activation!r}")
        for name, value in (("vocab_size", vocab_size), ("embedding_dim", embedding_dim),
                            ("num_layers", num_layers), ("cnn_filters", cnn_filters),
                            ("max_tokens", max_tokens)):
            if int(value) < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if not 0.0 < mlm_probability < 1.0:
            raise ValueError(f"mlm_probability must be in (0, 1), got {mlm_probability}")
        if tying_delta < 0 or mlm_weight < 0:
            raise ValueError("tying_delta and mlm_weight must be >= 0")
        if hidden_size is None:
            if variant in VARIANTS_NEEDING_2H_EQ_D:
                hidden_size = embedding_dim // 2 if encoder == "lstm" else embedding_dim
            else:
                hidden_size = 128 if encoder == "lstm" else 256
        self.vocab_size = int(vocab_size)
        self.embedding_dim = int(embedding_dim)
        self.encoder = encoder
        self.hidden_size = int(hidden_size)
        self.num_layers = int(num_layers)
        self.cnn_kernel_sizes = [int(k) for k in cnn_kernel_sizes]
        self.cnn_filters = int(cnn_filters)
        self.average_activation = average_activation
        self.attention = attention
        self.variant = variant
        self.tying_delta = float(tying_delta)
        self.mlm_probability = float(mlm_probability)
        self.mlm_weight = float(mlm_weight)
        self.class_weights = None if class_weights is None else [float(w) for w in class_weights]
        self.max_tokens = int(max_tokens)
        self.mask_token_id = int(mask_token_id)
        self.unk_token_id = int(unk_token_id)
        self.attention_exclude_first_last = bool(attention_exclude_first_last)
        if variant in VARIANTS_NEEDING_2H_EQ_D and self.encoder_output_size != self.embedding_dim:
            raise ValueError(
                f"variant {variant!r} compares or adds h_t and e_t, so the encoder output "
                f"({self.encoder_output_size}) must equal embedding_dim ({self.embedding_dim}); "
                f"for the LSTM set hidden_size = embedding_dim / 2 (T&Š: 2H = d)")
        self.attention_hidden_size = (int(attention_hidden_size) if attention_hidden_size
                                      else max(1, self.output_size // 2))
        super().__init__(pad_token_id=pad_token_id, **kwargs)
        if self.class_weights is not None and len(self.class_weights) != self.num_labels:
            raise ValueError(f"class_weights has {len(self.class_weights)} entries for "
                             f"{self.num_labels} labels")

    @classmethod
    def from_dict(cls, config_dict, **kwargs):
        model_type = config_dict.get("model_type")
        if model_type is not None and model_type != cls.model_type:
            raise ValueError(f"this checkpoint's config is for model_type {model_type!r}, not "
                             f"{cls.model_type!r}: it is not an hf_attn model")
        return super().from_dict(config_dict, **kwargs)

    @property
    def encoder_output_size(self) -> int:
        """Size of the encoder's h_t before the variant (2H for the BiLSTM)."""
        if self.encoder == "lstm":
            return 2 * self.hidden_size
        if self.encoder == "cnn":
            return self.cnn_filters * len(self.cnn_kernel_sizes)
        return self.hidden_size

    @property
    def output_size(self) -> int:
        """D, the size of the states h'_t that attention weighs (after concat/residual)."""
        if self.variant == "concat":
            return self.encoder_output_size + self.embedding_dim
        return self.encoder_output_size

    @property
    def num_outputs(self) -> int:
        """Units of the linear decoder: one logit for binary tasks, C otherwise."""
        return 1 if self.num_labels == 2 else self.num_labels
