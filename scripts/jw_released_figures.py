"""Read the values the report grades against off J&W's released figures (successar/AttentionExplanation,
graph_outputs/, matplotlib SVGs), for hf_attn/core/published.py.

* Permutation_MAvDY/<run>.svg (J&W Fig. 3): a seaborn violin plot per max-attention bin and predicted
  class drawn with ``inner='quartiles'`` (their common_code/plotting.plot_violin_by_class): the three
  vertical lines inside each violin are the 25th, 50th and 75th percentiles of the instances' Δŷ_med, so
  the middle one is the median of the data in that bin (the median of the smoothed violin area is not:
  the kernel density leans it towards the long tail).
* eMaxJDS_Hist/<run>.svg (J&W Fig. 4): histogram of the ε-max JSD per predicted class (40 bars on
  [0, 0.7], each class normalised to 1): the mean is Σ bar centre × bar height (±half a bar, 0.009).

Colours: purple = predicted class 0 (negative), orange = class 1 (positive), as J&W's captions say.

Usage: ``python scripts/jw_released_figures.py GIT_DIR [COMMIT] [RUN ...]`` with GIT_DIR a clone of
successar/AttentionExplanation (its .git folder or a bare copy), COMMIT default HEAD, RUN e.g.
``sst+lstm+tanh`` (default: SST, IMDB, AG News and Diabetes with the BiLSTM + additive attention).
"""

from __future__ import annotations

import re
import subprocess
import sys

PURPLE, ORANGE = ("#484566", "#43406b"), ("#b75e1a", "#d15a00")  # violin / histogram colours of class 0 / 1
RUNS = ("sst+lstm+tanh", "imdb+lstm+tanh", "agnews+lstm+tanh", "diab+lstm+tanh")


def _svg(git_dir: str, commit: str, path: str) -> str:
    return subprocess.run(["git", "--git-dir", git_dir, "show", f"{commit}:{path}"], check=True,
                          capture_output=True, text=True).stdout


def _x_axis(svg: str, label_pattern: str):
    """The linear map from SVG x to data x, from the first two labelled x ticks."""
    ticks = re.findall(r'<use style="stroke:#000000;stroke-width:[\d.]+;" x="([\d.]+)" xlink:href="#[^"]+" '
                       r'y="[\d.]+"/>\s*</g>\s*</g>\s*<g id="text_\d+">\s*<!-- (' + label_pattern + ') -->', svg)
    (x0, l0), (x1, l1) = [(float(x), float(label)) for x, label in ticks[:2]]
    return lambda x: l0 + (x - x0) * (l1 - l0) / (x1 - x0)


def permutation_medians(svg: str) -> dict:
    """{(bin low, bin high): [median of class 0, median of class 1]} (None where J&W's run has no instance)."""
    fx = _x_axis(svg, r"[-\d.]+")
    bins = re.findall(r'<use style="stroke:#000000;stroke-width:1.6;" x="[\d.]+" xlink:href="#[^"]+" y="([\d.]+)"/>'
                      r'\s*</g>\s*</g>\s*<g id="text_\d+">\s*<!-- (\[[\d.]+,)', svg)
    violins = []  # (colour, y centre)
    for m in re.finditer(r'<path d="(M [^"]*?)" id="(m[0-9a-f]+)"[^>]*/>\s*</defs>\s*<g clip-path="[^"]+">\s*'
                         r'<use style="fill:(#[0-9a-f]+);[^"]*" x="0" xlink:href="#\2" y="([\d.]+)"/>', svg):
        ys = [float(y) + float(m.group(4)) for _, y in re.findall(r"([\d.-]+) ([\d.-]+)", m.group(1))]
        violins.append((m.group(3), (min(ys) + max(ys)) / 2, min(ys), max(ys)))
    lines = [(float(x), (float(y0) + float(y1)) / 2) for x, y0, x1, y1 in
             re.findall(r'<path clip-path="[^"]+" d="M ([\d.]+) ([\d.]+) \s*L ([\d.]+) ([\d.]+) ', svg)
             if x == x1 and y0 != y1]
    # J&W's four bins of max attention over [0, 1] (plot_violin_by_class(..., xlim=(0, 1.0), bins=4))
    labels = [(float(label.strip("[,")), float(label.strip("[,")) + 0.25) for _, label in bins]
    out = {b: [None, None] for b in labels}
    ticks = [float(y) for y, _ in bins]
    for colour, centre, lo, hi in violins:
        quartiles = sorted(fx(x) for x, y in lines if lo <= y <= hi)
        assert len(quartiles) == 3, (colour, quartiles)
        b = min(range(len(ticks)), key=lambda i: abs(ticks[i] - centre))
        out[labels[b]][0 if colour in PURPLE else 1] = round(quartiles[1], 4)
    return out


def histogram_means(svg: str) -> list:
    """Mean of the ε-max JSD per predicted class from the histogram bars."""
    fx = _x_axis(svg, r"[-\d.]+")
    bars = re.findall(r'<path clip-path="[^"]+" d="M ([\d.]+) ([\d.]+) \s*L ([\d.]+) [\d.]+ \s*L [\d.]+ ([\d.]+) '
                      r'\s*L [\d.]+ [\d.]+ \s*z\s*" style="fill:(#[0-9a-f]+);opacity', svg)
    sums = {0: [0.0, 0.0], 1: [0.0, 0.0]}
    for a, base, b, top, colour in bars:
        c, h = (0 if colour in PURPLE else 1), float(base) - float(top)
        sums[c][0] += (fx(float(a)) + fx(float(b))) / 2 * h
        sums[c][1] += h
    return [round(s / n, 4) if n else None for s, n in (sums[0], sums[1])]


def main(argv: list[str]) -> int:
    git_dir, commit = argv[0], argv[1] if len(argv) > 1 else "HEAD"
    for run in argv[2:] or RUNS:
        print(run)
        print("  Fig. 3 median Δŷ_med per max-attention bin [class 0, class 1]:",
              permutation_medians(_svg(git_dir, commit, f"graph_outputs/Permutation_MAvDY/{run}.svg")))
        try:
            print("  Fig. 4 mean ε-max JSD [class 0, class 1]:",
                  histogram_means(_svg(git_dir, commit, f"graph_outputs/eMaxJDS_Hist/{run}.svg")))
        except subprocess.CalledProcessError:
            print("  Fig. 4: not released")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
