"""Rules of the core that the second mutation round (tests/MUTATION.md) found no test stating."""

from __future__ import annotations

from gpuscout import DeviceInfo
from gpuscout.merge import is_better
from gpuscout.sizes import GIB


def card(n: int, **kw: object) -> DeviceInfo:
    fields: dict[str, object] = {
        "id": f"GPU-{n}",
        "library": "CUDA",
        "name": f"Card {n}",
        "total_memory": 24 * GIB,
        "free_memory": 20 * GIB,
    }
    return DeviceInfo(**{**fields, **kw})  # type: ignore[arg-type]


def test_library_variants_are_compared_only_within_one_prefix() -> None:
    """The seed's IsBetter: cuda_v13 is newer than cuda_v12, but a variant of another prefix
    (rocm_v7 against cuda_v12) is never "better", whatever its number."""
    v12 = card(0, library_path=("/lib/ollama", "/lib/ollama/cuda_v12"))
    v13 = card(0, library_path=("/lib/ollama", "/lib/ollama/cuda_v13"))
    other = card(0, library_path=("/lib/ollama", "/lib/ollama/rocm_v7"))
    assert (is_better(v12, v13), is_better(v12, other), is_better(other, v12)) == (True, False, False)
