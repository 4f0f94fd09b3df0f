"""The printed names of the two leave-one-out measures, so that no output confuses them.

- **LOO-TVD** (Jain & Wallace 2019 §4.1, Alg. 1): Δŷ_t = TVD(ŷ(x₋t), ŷ(x)), the total variation
  distance between the model's output distributions with and without token t; never negative. The
  J&W battery's ``loo`` values and its ``tau_loo`` / ``tau_gradient_loo`` / ``tau_rollout_loo``
  statistics, the ERASER battery's ``loo`` ranking and the explanation object's ``loo`` row are
  this measure.
- **LOO-drop** (Li, Monroe & Jurafsky 2016 §3, Eq. 1): ŷ_c(x) − ŷ_c(x₋t), the signed drop of the
  probability of the class c predicted for x when token t is deleted. The faithfulness table's
  ``leave_one_out`` method (row) and its ``tau_loo`` column (each method's Kendall τ-b with that
  row) are this measure.

Both delete the token (the sequence shortened, special tokens kept). Results files keep their keys
(``tau_loo`` in both batteries' ``results.json``) and name the measure in a ``measure_definitions``
entry (:data:`JW_MEASURES`, :data:`FAITHFULNESS_MEASURES`); every printed label uses the names below.
"""

from __future__ import annotations

LOO_TVD = "LOO-TVD"
LOO_DROP = "LOO-drop"

LOO_TVD_DEFINITION = ("LOO-TVD: Δŷ_t = TVD(ŷ(x₋t), ŷ(x)), the total variation distance between the output "
                      "distributions with and without token t (Jain & Wallace 2019 §4.1, Alg. 1)")
LOO_DROP_DEFINITION = ("LOO-drop: ŷ_c(x) − ŷ_c(x₋t), the signed drop of the predicted class c's probability "
                       "when token t is deleted (Li, Monroe & Jurafsky 2016 §3, Eq. 1)")

# results.json of the J&W battery: what each leave-one-out key holds
JW_MEASURES = {
    "loo": f"{LOO_TVD_DEFINITION}; not the faithfulness table's {LOO_DROP}",
    "tau_loo": f"Kendall τ-b of attention vs {LOO_TVD} (J&W Table 2, τ_loo)",
    "tau_gradient_loo": f"Kendall τ-b of gradient importance vs {LOO_TVD}",
    "tau_rollout_loo": f"Kendall τ-b of attention rollout vs {LOO_TVD}",
}

# results.json of the faithfulness table: what its leave-one-out row and column hold
FAITHFULNESS_MEASURES = {
    "leave_one_out": f"{LOO_DROP_DEFINITION}; not J&W's {LOO_TVD}",
    "tau_loo": f"Kendall τ-b of each method's scores vs the {LOO_DROP} of the leave_one_out row "
               f"(not J&W's {LOO_TVD})",
}

__all__ = ["FAITHFULNESS_MEASURES", "JW_MEASURES", "LOO_DROP", "LOO_DROP_DEFINITION", "LOO_TVD",
           "LOO_TVD_DEFINITION"]
