"""The one set of settings of an explanation: :class:`ExplainSettings`, read by all three views.

:meth:`hf_attn.explainer.Explainer.explain` takes its defaults from it, ``hf-attn explain`` its
options' defaults, and the explorer Space its defaults (the Space bounds what visitors may ask for
more tightly, :data:`hf_attn.app.space.INT_LIMITS`, but never changes a default). So one sentence
explained with the defaults gives the same numbers in a notebook, on the command line and in the
Space.

The adversary's and the permutations' defaults are those of the J&W battery
(:class:`hf_attn.batteries.jw.common.JWSettings`: J&W's 500 Adam steps, k = 5, λ = 500, ε = 0.01,
lr = 0.01, 100 permutations), so ``Explainer.explain`` and ``hf-attn analyze --battery jw`` search
the same adversaries.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace

from hf_attn.batteries.jw.common import JWSettings
from hf_attn.core.arguments import count, finite_float, seed_int
from hf_attn.core.settings_cli import option
from hf_attn.core.validation import check_number, check_seed, check_whole
from hf_attn.methods.ig_baselines import BASELINES as IG_BASELINES


@dataclass(frozen=True)
class ExplainSettings:
    """What :meth:`~hf_attn.explainer.Explainer.explain` computes, and how.

    ``ig`` (integrated gradients on or off), ``ig_steps`` (trapezoid intervals), ``ig_baseline``
    (``"zero"``, ``"pad"`` or ``"mean"``: :mod:`hf_attn.methods.ig_baselines`); ``adversary`` (J&W
    Alg. 3 on or off), ``k`` adversaries, ``adversary_steps`` Adam steps, ``eps`` (the TVD budget ε),
    ``lam`` (λ of the relaxed objective), ``lr`` (Adam's learning rate); ``num_permutations`` (J&W
    Alg. 2, 0 to skip); ``seed`` (the permutations' and adversaries' draws); ``batch_size`` (texts per
    forward). Every value is checked when the object is made: a count outside its bounds, a negative
    or non-finite ε / λ, a learning rate ≤ 0, an unknown baseline is a ``ValueError`` naming the field;
    whole numbers are stored as Python ints (NumPy integers accepted)."""

    # ``metadata=option(...)``: the field's ``hf-attn explain`` option (hf_attn.core.settings_cli)
    ig: bool = field(default=True, metadata=option("skip integrated gradients", flag="--no-ig", negate=True))
    ig_steps: int = field(default=20, metadata=option("trapezoid intervals of integrated gradients",
                                                      flag="--ig-steps", type=count(1, limit="ig_nodes")))
    ig_baseline: str = field(default="zero", metadata=option("the integrated-gradients baseline",
                                                             flag="--ig-baseline", choices=IG_BASELINES))
    adversary: bool = field(default=True, metadata=option("skip the adversary", flag="--no-adversary", negate=True))
    k: int = field(default=JWSettings.k, metadata=option("adversaries per text", flag="--k",
                                                        type=count(1, limit="adversaries")))
    adversary_steps: int = field(default=JWSettings.steps, metadata=option(
        "Adam steps of the adversary search", flag="--adversary-steps", type=count(0, limit="steps")))
    eps: float = field(default=JWSettings.eps, metadata=option("the adversary's TVD budget ε", flag="--eps",
                                                              type=finite_float(0)))
    lam: float = field(default=JWSettings.lam, metadata=option("λ of the adversary's relaxed objective",
                                                              flag="--lambda", type=finite_float(0)))
    lr: float = field(default=JWSettings.lr, metadata=option("Adam learning rate of the adversary search",
                                                            flag="--lr", type=finite_float(0, strictly_above=True)))
    num_permutations: int = field(default=JWSettings.num_permutations, metadata=option(
        "random permutations (0: none)", flag="--permutations", type=count(0, limit="permutations")))
    seed: int = field(default=0, metadata=option("the permutations' and adversaries' draws", flag="--seed",
                                                 type=seed_int))
    batch_size: int = 32

    def __post_init__(self) -> None:
        for name in ("ig", "adversary"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")
        checked = {
            "ig_steps": check_whole("ig_steps", self.ig_steps, limit="ig_nodes"),
            "k": check_whole("k", self.k, limit="adversaries"),
            "adversary_steps": check_whole("adversary_steps", self.adversary_steps, 0, limit="steps"),
            "num_permutations": check_whole("num_permutations", self.num_permutations, 0, limit="permutations"),
            "eps": float(check_number("eps", self.eps, 0.0)),
            "lam": float(check_number("lam", self.lam, 0.0)),
            "lr": float(check_number("lr", self.lr, 0.0, low_open=True)),
            "seed": check_seed(self.seed),
            "batch_size": check_whole("batch_size", self.batch_size, limit="batch_size"),
        }
        if self.ig_baseline not in IG_BASELINES:
            raise ValueError(f"ig_baseline must be 'zero', 'pad' or 'mean', got {self.ig_baseline!r}")
        for name, value in checked.items():  # plain ints and floats, whatever numeric type was given
            object.__setattr__(self, name, value if name in ("eps", "lam", "lr") else int(value))

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The settings' names, in order."""
        return tuple(f.name for f in fields(cls))

    def updated(self, **changes) -> "ExplainSettings":
        """A copy with ``changes`` (checked); a name that is not a setting is a ``ValueError`` listing
        the settings."""
        unknown = sorted(set(changes) - set(self.names()))
        if unknown:
            raise ValueError(f"unknown explain setting(s) {unknown}; the settings are {list(self.names())}")
        return replace(self, **changes) if changes else self

    def to_dict(self) -> dict:
        return asdict(self)


DEFAULT_SETTINGS = ExplainSettings()

__all__ = ["DEFAULT_SETTINGS", "ExplainSettings", "IG_BASELINES"]
