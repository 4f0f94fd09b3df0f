"""``hf-attn explain MODEL TEXT [TEXT …]``: the printed summary of :meth:`hf_attn.Explainer.explain` — the
same explanation object a notebook shows as HTML and the Space as its page."""

from __future__ import annotations

from hf_attn.core.arguments import count, finite_float, seed_int


def add_parser(subparsers) -> None:
    """``hf-attn explain MODEL TEXT [TEXT …]``."""
    p = subparsers.add_parser(
        "explain", help="explain sentences: attention, gradient, leave-one-out (LOO-TVD), IG, adversary, τ",
        description="Explain each text with Explainer.explain and print its summary: the prediction, per "
                    "token attention, gradient, leave-one-out, integrated gradients and rollout, the word-level "
                    "sums, the sentence's Kendall τ, the adversary and the permutations. Leave-one-out here is "
                    "J&W's LOO-TVD, TVD(ŷ(x₋t), ŷ(x)) (§4.1), not the faithfulness table's LOO-drop.")
    p.add_argument("model", help="a model folder (hf-attn train, any save_pretrained folder), a Hub id or an alias")
    p.add_argument("texts", nargs="+", help="the texts to explain")
    p.add_argument("--ig-steps", type=count(1, limit="ig_nodes"), default=20)
    p.add_argument("--permutations", type=count(0, limit="permutations"), default=100, help="random permutations (0: none)")
    p.add_argument("--k", type=count(1, limit="adversaries"), default=5, help="adversaries per text")
    p.add_argument("--adversary-steps", type=count(0, limit="steps"), default=200)
    p.add_argument("--eps", type=finite_float(0), default=0.01, help="the adversary's TVD budget ε")
    p.add_argument("--seed", type=seed_int, default=0)
    p.add_argument("--no-adversary", action="store_true", help="skip the adversary")
    p.add_argument("--html", default=None, help="also write the notebook's page (heatmaps) to this file")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N | mps")
    p.add_argument("--precision", default="float32", choices=["float32", "bfloat16", "float16"],
                   help="the dtype the weights are loaded in and the forwards run in (float16: CUDA or MPS only)")
    p.set_defaults(func=_run_cli)


def _run_cli(args) -> int:
    from hf_attn.explainer import Explainer

    explainer = Explainer.from_pretrained(args.model, device=args.device, precision=args.precision)
    explanation = explainer.explain(args.texts, ig_steps=args.ig_steps, num_permutations=args.permutations,
                                    k=args.k, adversary_steps=args.adversary_steps, eps=args.eps, seed=args.seed,
                                    adversary=not args.no_adversary)
    print(explanation.summary())
    if args.html:
        explanation.save_html(args.html)
        print(f"page: {args.html}")
    return 0
