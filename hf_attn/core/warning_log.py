"""Third-party warnings into the command's log file, not onto the console.

A battery run calls captum, torch, transformers and scikit-learn many times; their ``UserWarning``s
(captum's, dozens per faithfulness table) would bury the table the command prints. Within
:func:`third_party_warnings_to_log` a warning raised from outside hf_attn is logged (logger
``py.warnings``, level WARNING) with ``console=False``, which hf-attn's console handler drops: the
output folder's ``hf-attn.log`` holds it, the console shows it only with ``--verbose``. hf_attn's own
warnings (a category defined in hf_attn, such as ``TruncationWarning``, or one raised from a file of
the hf_attn package) are logged as hf_attn's warnings (logger ``hf_attn.warnings``), which the console
shows (``WARNING hf_attn.warnings: TruncationWarning: …``) and the log file holds. Everything is
restored when the block ends.
"""

from __future__ import annotations

import contextlib
import logging
import os
import warnings
from collections.abc import Iterator

PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # …/hf_attn
LOGGER_NAME = "py.warnings"  # the logger logging.captureWarnings uses: third-party warnings
OWN_LOGGER_NAME = "hf_attn.warnings"  # hf_attn's own warnings


def is_own_warning(category: type, filename: str) -> bool:
    """A warning the user must see: its category is hf_attn's, or it was raised from hf_attn's code."""
    module = getattr(category, "__module__", "") or ""
    if module == "hf_attn" or module.startswith("hf_attn."):
        return True
    try:
        return os.path.commonpath([os.path.abspath(filename), PACKAGE_DIR]) == PACKAGE_DIR
    except (ValueError, TypeError):  # another drive, or no file name
        return False


@contextlib.contextmanager
def third_party_warnings_to_log(logger: logging.Logger | None = None) -> Iterator[None]:
    """Within the block, warnings from outside hf_attn go to ``logger`` (default ``py.warnings``) at
    WARNING with ``console=False`` instead of stderr; hf_attn's own go to ``hf_attn.warnings`` at
    WARNING (console and log file)."""
    logger = logger or logging.getLogger(LOGGER_NAME)
    own = logging.getLogger(OWN_LOGGER_NAME)
    with warnings.catch_warnings():  # restores showwarning and the filters on exit

        def show(message, category, filename, lineno, file=None, line=None):
            if is_own_warning(category, filename):
                own.warning("%s: %s", category.__name__, message)
            else:
                text = warnings.formatwarning(message, category, filename, lineno, line).rstrip()
                logger.warning("%s", text, extra={"console": False})

        warnings.showwarning = show
        yield


__all__ = ["LOGGER_NAME", "OWN_LOGGER_NAME", "PACKAGE_DIR", "is_own_warning", "third_party_warnings_to_log"]
