"""Configuration of the sentence-pair attentive classifier (Jain & Wallace 2019 §2–3, NLI):
attention over the premise tokens with the encoded hypothesis as the query.

Copied next to ``config.json`` by ``save_pretrained`` together with ``configuration_hf_attn.py``
(its relative import) so that a saved folder loads with ``trust_remote_code=True`` without
``hf_attn``: it must only import ``transformers`` and its sibling configuration file.
"""

from __future__ import annotations

from .configuration_hf_attn import AttnClassifierConfig

PAIR_DECODERS = ("tanh", "linear")


class AttnPairClassifierConfig(AttnClassifierConfig):
    r"""Config of :class:`AttnPairClassifierForSequenceClassification`.

    Takes every field of :class:`AttnClassifierConfig` (encoder, hidden_size, attention, …; both the
    premise and the hypothesis encoder are built from them) plus:

    Args:
        pair_decoder: how the prediction is made from the premise context c = Σ_t α_t h_t and the
            hypothesis query Q.
            ``"tanh"`` (default, the J&W code's ``AttnDecoderQA`` that produced their SNLI numbers):
            logits = W_o tanh(W_c c + W_q Q + b) + b_o, W_c, W_q: D → ``decoder_hidden_size``.
            ``"linear"``: logits = W_c c + W_q Q + b, the paper's linear Dec (§2, ŷ = σ(θ·h_α))
            with the query term added so the hypothesis reaches the prediction other than through α.
        decoder_hidden_size: width of the tanh layer; ``None`` → D // 2 (J&W code).
        share_embeddings: one embedding matrix for premise and hypothesis. ``False`` (default)
            follows the J&W code, where the premise and hypothesis encoders each own an embedding
            matrix (both initialised from the same pretrained vectors; one tokenizer vocabulary).

    The attention φ(h_t, Q) is ``additive`` vᵀ tanh(W₁h_t + W₂Q) or ``dot`` h_tᵀQ/√D (J&W §2), or
    ``uniform``. Only ``variant="base"``: the T&Š regularisers are defined for single sequences.
    """

    model_type = "hf_attn_pair"

    def __init__(self, pair_decoder: str = "tanh", decoder_hidden_size: int | None = None,
                 share_embeddings: bool = False, **kwargs):
        if pair_decoder not in PAIR_DECODERS:
            raise ValueError(f"pair_decoder must be one of {PAIR_DECODERS}, got {pair_decoder!r}")
        if kwargs.get("variant", "base") != "base":
            raise ValueError(f"the pair model supports only variant='base' (the T&Š regularisers are "
                             f"defined for single sequences), got {kwargs['variant']!r}")
        if decoder_hidden_size is not None and int(decoder_hidden_size) < 1:
            raise ValueError(f"decoder_hidden_size must be >= 1, got {decoder_hidden_size}")
        super().__init__(**kwargs)
        self.pair_decoder = pair_decoder
        self.decoder_hidden_size = (int(decoder_hidden_size) if decoder_hidden_size
                                    else max(1, self.output_size // 2))
        self.share_embeddings = bool(share_embeddings)
