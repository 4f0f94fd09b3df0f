"""Screenshot of the explorer Space for the README (docs/space_screenshot.png).

The same steps as tests/test_space_from_hub.py: the model is pushed to a loopback Hub
(tests/hub_server.py) with ``hf-attn push``, the Space with ``hf-attn push-space --model``, the
Space repo is snapshotted into a fresh folder and its ``app.py`` started there with only what the
Space installs and ships; a headless Chromium types a sentence, clicks Explain and saves the page.
Nothing leaves the machine.

    python scripts/space_screenshot.py [--model RUN_DIR] [--sentence TEXT] [--out docs/space_screenshot.png]

``--model`` defaults to a local SST BiLSTM + additive run (``hf_attn.app.space.find_local_model``),
else the explorer's quick model (trained once, ~1 minute). Needs Chromium, chromedriver and selenium.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "tests"))

from hub_server import HubServer  # noqa: E402
from test_space_from_hub import (RunningSpace, chromium, explain_in_browser, publish, screenshot_page,  # noqa: E402
                                 snapshot_space)

USER = "demo"
MODEL_ID = f"{USER}/sst-bilstm-additive"
SPACE_ID = f"{USER}/attention-explorer"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a trained hf_attn run folder (default: a local SST model or the quick one)")
    parser.add_argument("--sentence", default="It's not a great monster movie, but it's a good one.")
    parser.add_argument("--out", default=str(REPO_ROOT / "docs" / "space_screenshot.png"))
    parser.add_argument("--width", type=int, default=1400)
    args = parser.parse_args(argv)

    model_dir = args.model
    if not model_dir:
        from hf_attn.app.space import find_local_model, train_quick_model

        model_dir = find_local_model() or train_quick_model()
    hub = HubServer(user=USER).start()
    try:
        with tempfile.TemporaryDirectory(prefix="space-screenshot-") as tmp:
            workdir = Path(tmp)
            publish(hub, model_dir, workdir, MODEL_ID, SPACE_ID)
            running = RunningSpace(snapshot_space(hub, workdir, SPACE_ID), hub, workdir)
            try:
                with chromium(workdir / "profile", width=args.width) as driver:
                    driver.get(running.url)
                    explain_in_browser(driver, args.sentence)
                    screenshot_page(driver, Path(args.out), width=args.width)
            finally:
                running.stop()
    finally:
        hub.stop()
    print(f"wrote {args.out} (model {model_dir} as {MODEL_ID})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
