#!/usr/bin/env python
"""Screenshot of the explorer Space (spaces_app/app.py) started locally on a model folder, e.g. a
BERT-family classifier that `hf-attn push` does not publish yet (docs/bert_family/space_minilm.png).

    python scripts/space_screenshot_local.py --model ./runs/minilm-sst --cwd . \
        [--sentence TEXT] [--out docs/bert_family/space_minilm.png]

The app runs on 127.0.0.1 with HF_ATTN_MODELS=MODEL (a path starting with ./ or / is a local folder,
owner/name a Hub id) from --cwd; a headless Chromium types the sentence, clicks Explain and saves the
page. Needs Chromium, chromedriver and selenium (the test extras).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "tests"))

from test_app import running_app  # noqa: E402
from test_space_from_hub import chromium, explain_in_browser, screenshot_page  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="the model folder as the app should see it (./DIR)")
    parser.add_argument("--cwd", default=".", help="the folder the app runs in (--model is relative to it)")
    parser.add_argument("--sentence", default="The film isn't good, but the acting is wonderful.")
    parser.add_argument("--out", default=str(REPO_ROOT / "docs" / "bert_family" / "space_minilm.png"))
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp())
    with running_app({"HF_ATTN_MODELS": args.model}, work / "app.log", cwd=Path(args.cwd)) as url:
        with chromium(work / "profile") as driver:
            driver.get(url)
            explain_in_browser(driver, args.sentence)
            screenshot_page(driver, Path(args.out))
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
