"""What counts as a text with nothing to explain: only whitespace or invisible characters. One test,
used by the Python API (``checked_texts``), every data loader and the explorer Space alike."""

from __future__ import annotations

import unicodedata

# Characters that show nothing and carry no word: zero-width spaces and joiners, the byte-order mark,
# soft hyphens, word joiners, bidirectional marks (Unicode categories Cf, Cc, Zs, Zl, Zp).
EMPTY_CATEGORIES = ("Cf", "Cc", "Zs", "Zl", "Zp")


def nothing_to_explain(text: str) -> bool:
    """True for a text of only whitespace or invisible characters (the empty text included)."""
    return all(c.isspace() or unicodedata.category(c) in EMPTY_CATEGORIES for c in text)
