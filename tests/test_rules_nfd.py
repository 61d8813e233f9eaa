"""Rules of Kubernetes label names and values as the NFD feature file writes them."""

from __future__ import annotations

import pytest

from gpuscout.cluster.nfd import check_labels, sanitize_value
from gpuscout.errors import GpuscoutError


@pytest.mark.parametrize("name", ["a-", "a.", "a_", "cuda.count-"])
def test_a_label_name_must_end_with_an_alphanumeric(name: str) -> None:
    """Kubernetes names end in [A-Za-z0-9]: a trailing ``-``, ``.`` or ``_`` is refused."""
    with pytest.raises(GpuscoutError, match="not a valid Kubernetes label name"):
        check_labels({name: "1"})


@pytest.mark.parametrize("value", ["x-", "x.", "x_"])
def test_a_label_value_must_end_with_an_alphanumeric(value: str) -> None:
    """Label values follow the same end rule as names."""
    with pytest.raises(GpuscoutError, match="not a valid Kubernetes label value"):
        check_labels({"cuda.count": value})


def test_names_and_values_with_inner_punctuation_are_valid() -> None:
    """``-``, ``_`` and ``.`` inside a name or value, and an empty value, pass."""
    check_labels({"cuda.memory_total-mib": "a-b_c.d", "x": "", "a": "b"})


def test_a_value_cut_at_63_characters_is_trimmed_again_to_an_alphanumeric() -> None:
    """A value whose 63rd character is punctuation loses it after the cut: the end rule holds."""
    assert sanitize_value("model", "a" * 62 + "-b") == "a" * 62
    assert sanitize_value("model", "a" * 62 + ".." + "b") == "a" * 62


def test_a_sanitized_value_is_always_a_valid_label_value() -> None:
    """What sanitize_value returns passes check_labels, at the 63-character edge too."""
    for value in ["a" * 62 + "-b", "-x-", "a b c", "é" + "b" * 70]:
        check_labels({"v": sanitize_value("v", value)})
