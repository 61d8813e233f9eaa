"""bench/llama_reference.py reads llama.cpp's own memory lines (the fixtures come from it)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

_spec = importlib.util.spec_from_file_location(
    "llama_reference", Path(__file__).resolve().parents[2] / "bench" / "llama_reference.py"
)
assert _spec and _spec.loader
reference: Any = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(reference)

LOG = """\
0.01.000.000 I llama_context: n_seq_max             = 1
0.01.000.000 I llama_context: n_ctx                 = 2048
0.01.000.000 I llama_context: n_ctx_seq             = 2048
0.01.000.000 I llama_context: n_ubatch              = 512
0.01.000.000 I load_tensors:   CPU_Mapped model buffer size =   235.16 MiB
0.01.000.000 I load_tensors:      Vulkan0 model buffer size =    65.16 MiB
0.01.000.000 I llama_context: Vulkan_Host  output buffer size =     1.00 MiB
0.01.000.000 I llama_kv_cache_iswa: creating non-SWA KV cache, size = 2048 cells
0.01.000.000 I llama_kv_cache:    Vulkan0 KV buffer size =     6.00 MiB
0.01.000.000 I llama_kv_cache: size =    6.00 MiB (  2048 cells,   3 layers,  1/1 seqs), \
K (f16):    3.00 MiB, V (f16):    3.00 MiB
0.01.000.000 I llama_kv_cache_iswa: creating     SWA KV cache, size = 1024 cells
0.01.000.000 I llama_kv_cache:    Vulkan0 KV buffer size =    15.00 MiB
0.01.000.000 I llama_kv_cache: size =   15.00 MiB (  1024 cells,  15 layers,  1/1 seqs), \
K (f16):    7.50 MiB, V (f16):    7.50 MiB
0.01.000.000 I sched_reserve:    Vulkan0 compute buffer size =    20.03 MiB
0.01.000.000 I sched_reserve: Vulkan_Host compute buffer size =   514.50 MiB
"""


def test_buffers_are_read_per_backend() -> None:
    """Model, KV, output and compute buffers land under their backend's name, in MiB."""
    run = reference.parse_log(LOG)
    assert run["model_buffers_mib"] == {"CPU_Mapped": 235.16, "Vulkan0": 65.16}
    assert run["kv_buffers_mib"] == {"Vulkan0": 21.0}
    assert run["output_buffers_mib"] == {"Vulkan_Host": 1.0}
    assert run["compute_buffers_mib"] == {"Vulkan0": 20.03, "Vulkan_Host": 514.5}


def test_each_kv_cache_keeps_its_kind_and_cells() -> None:
    """The non-SWA and SWA caches are told apart, with cells and layers."""
    caches = reference.parse_log(LOG)["kv_caches"]
    assert [(c["kind"], c["cells"], c["layers"]) for c in caches] == [("non-SWA", 2048, 3), ("SWA", 1024, 15)]


def test_context_figures_are_read() -> None:
    """n_ctx, n_ctx_seq, n_ubatch and n_seq_max as llama_context printed them."""
    run = reference.parse_log(LOG)
    assert (run["n_ctx"], run["n_ctx_seq"], run["n_ubatch"], run["n_seq_max"]) == (2048, 2048, 512, 1)
