"""Placeholder: the seventh mutmut round's tests of usage (tests/MUTATION.md)."""
