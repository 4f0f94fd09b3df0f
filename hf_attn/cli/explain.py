"""``hf-attn explain MODEL TEXT [TEXT …]``: the printed summary of :meth:`hf_attn.Explainer.explain` — the
same explanation object a notebook shows as HTML and the Space as its page."""

from __future__ import annotations


def add_parser(subparsers) -> None:
    """``hf-attn explain MODEL TEXT [TEXT …]``; every option's default is
    :class:`hf_attn.explanation.settings.ExplainSettings`' (the Space's and ``Explainer.explain``'s)."""
    from hf_attn.core.settings_cli import add_settings_options
    from hf_attn.explanation.settings import ExplainSettings

    p = subparsers.add_parser(
        "explain", help="explain sentences: attention, gradient, leave-one-out (LOO-TVD), IG, adversary, τ",
        description="Explain each text with Explainer.explain and print its summary: the prediction, per "
                    "token attention, gradient, leave-one-out, integrated gradients and rollout, the word-level "
                    "sums, the sentence's Kendall τ, the adversary and the permutations. Leave-one-out here is "
                    "J&W's LOO-TVD, TVD(ŷ(x₋t), ŷ(x)) (§4.1), not the faithfulness table's LOO-drop. Values are "
                    "raw (as Explainer.explain returns them and the Space shows them); --shares shows the "
                    "gradient and the LOO-TVD as shares of their sum. The defaults are those of "
                    "Explainer.explain and of the explorer Space, so one sentence gives the same numbers in all "
                    "three.")
    p.add_argument("model", help="a model folder (hf-attn train, any save_pretrained folder), a Hub id or an alias")
    p.add_argument("texts", nargs="+", help="the texts to explain")
    # the explanation's settings: generated from ExplainSettings' fields (type, default, allowed values)
    add_settings_options(p, ExplainSettings, "", "explanation settings (ExplainSettings: the defaults of "
                         "Explainer.explain and of the Space)")
    p.add_argument("--shares", action="store_true",
                   help="print the gradient and the LOO-TVD as shares of their sum (g/Σg, Δŷ/ΣΔŷ), not raw values")
    p.add_argument("--json", action="store_true",
                   help="print the whole explanation as JSON (raw values and shares, the model, the settings)")
    p.add_argument("--html", default=None, help="also write the notebook's page (heatmaps) to this file")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N | mps")
    p.add_argument("--precision", default="float32", choices=["float32", "bfloat16", "float16"],
                   help="the dtype the weights are loaded in and the forwards run in (float16: CUDA or MPS only)")
    p.set_defaults(func=_run_cli)


def settings_of(args):
    """The :class:`~hf_attn.explanation.settings.ExplainSettings` of parsed ``hf-attn explain`` arguments."""
    from hf_attn.core.settings_cli import settings_from_namespace
    from hf_attn.explanation.settings import ExplainSettings

    return settings_from_namespace(ExplainSettings, args, "")


def _run_cli(args) -> int:
    import sys

    from hf_attn.explainer import Explainer

    explainer = Explainer.from_pretrained(args.model, device=args.device, precision=args.precision)
    explanation = explainer.explain(args.texts, settings_of(args))
    if args.json:
        from hf_attn.core.io import print_json

        print_json(explanation.to_dict())
    else:
        print(explanation.summary(shares=args.shares))
    if args.html:
        explanation.save_html(args.html, shares=args.shares)
        print(f"page: {args.html}", file=sys.stderr if args.json else sys.stdout)
    return 0
