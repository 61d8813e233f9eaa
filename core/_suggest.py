""" "Did you mean": the closest of a few known words to a misspelled one (``lsit`` -> ``list``).

Shared by the command line (commands, options, choices) and the selector parser (selector words,
library names), so every misspelling is answered the same way. Standard library only (difflib),
imported when an error is being worded, never on the way to a result.
"""

from __future__ import annotations

from collections.abc import Iterable

#: How alike (difflib's ratio, 0 to 1) a known word must be to be offered: 0.6 takes one
#: swapped, dropped or doubled letter in a short word (``lsit``, ``--jsn``, ``vulkn``) and
#: leaves unrelated words alone.
CUTOFF = 0.6
#: Words longer than this are not compared (an attacker's megabyte is no typo).
MAX_WORD = 100


def suggest(word: str, choices: Iterable[str]) -> str | None:
    """The choice closest to ``word`` (compared without case), or None when none is close or
    ``word`` is itself a choice. Ties go to the first of ``choices``."""
    import difflib

    if not word or len(word) > MAX_WORD:
        return None
    known = [c for c in dict.fromkeys(choices) if c and len(c) <= MAX_WORD]
    folded = {c.lower(): c for c in reversed(known)}  # the first spelling of each wins
    low = word.lower()
    if low in folded:
        return None
    best = difflib.get_close_matches(low, list(folded), n=1, cutoff=CUTOFF)
    return folded[best[0]] if best else None


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``"; did you mean 'list'?"`` for the closest choice, or ``""`` when there is none: to
    append to an error message."""
    found = suggest(word, choices)
    return f"; did you mean {found!r}?" if found is not None else ""


__all__ = ["CUTOFF", "MAX_WORD", "did_you_mean", "suggest"]
