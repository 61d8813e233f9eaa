"""What ``gpuscout fit`` prints, built in the library: the ``--layers`` document (the reference
planner on given sizes, judged as ``fit MODEL`` is judged; a model's document is
``FitResult.to_dict()``), and the sentences the text form says about either document (what was
planned, what the total holds). The command line only lays them out."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpuscout._records.device import DeviceInfo, SystemInfo
from gpuscout.sizes import human_bytes, plural


def layers_document(
    layers: list[int],
    devices: list[DeviceInfo],
    system: SystemInfo,
    minimum_memory: Callable[[DeviceInfo], int],
    platform: str,
    num_gpu: int,
    spread: bool,
) -> dict[str, Any]:
    """``--layers``: the reference planner on given sizes (no model, so no cache or graphs),
    judged as ``fit MODEL`` judges a placement (``fit.verdict``): the CPU's share against free
    system memory, the one pool of shared-memory devices, and every GPU's share within its room
    (a forced ``--num-gpu`` may overfill one)."""
    from gpuscout._discovery.budgets import budget_notes
    from gpuscout._fit.usage import Usage
    from gpuscout._fit.verdict import verdict
    from gpuscout._layout.plan import create_layout

    layout = create_layout(layers, devices, minimum_memory, num_gpu=num_gpu, spread=spread)
    placed = {i for g in layout for i in g.layers}
    cpu_layers = [i for i in range(len(layers)) if i not in placed]
    notes: list[str] = []
    held = [(g.id, g.library, sum(layers[i] for i in g.layers)) for g in layout]
    held.append(("", "cpu", sum(layers[i] for i in cpu_layers)))
    usage = [Usage(id_, lib, "", n, 0, 0) for id_, lib, n in held]
    fits = verdict(layout, layers, devices, system, usage, minimum_memory, platform, num_gpu, notes)
    notes += budget_notes(devices, notes)
    memory = [
        {"id": id_, "backend": lib, "weights": n, "kv_cache": 0, "graph": 0, "total": n}
        for id_, lib, n in held
    ]
    return {
        "model": {
            "path": "",
            "architecture": "",
            "blocks": len(layers) - 1,
            "layer_weights": layers[:-1],
            "output_weights": layers[-1],
            "input_weights": 0,
            "kv_cache_per_layer": 0,
            "graph": 0,
        },
        "placement": [{"id": g.id, "backend": g.library, "layers": sorted(g.layers)} for g in layout],
        "cpu_layers": cpu_layers,
        "fits": fits,
        "ctx": None,
        "flash_attn": None,
        "cache_type_k": None,
        "cache_type_v": None,
        "notes": notes,
        "memory": memory,
        "total": sum(n for _, _, n in held),
    }


def headline(document: dict[str, Any]) -> str:
    """``m.gguf (llama): 18 blocks + output layer (layer 18), ctx 4096, flash attention on,
    cache f16/f16``: what was planned (``given layers`` for ``--layers``), as ``fit`` says it."""
    m = document["model"]
    arch = f" ({m['architecture']})" if m["architecture"] else ""
    blocks = plural(m["blocks"], "block")
    head = f"{m['path'] or 'given layers'}{arch}: {blocks} + output layer (layer {m['blocks']})"
    if document["ctx"] is not None:
        head += (
            f", ctx {document['ctx']}, flash attention {'on' if document['flash_attn'] else 'off'}, "
            f"cache {document['cache_type_k']}/{document['cache_type_v']}"
        )
    return head


def total_line(document: dict[str, Any]) -> str:
    """``total memory 1.5 GiB: ...``: the document's one ``total`` (the sum of its ``memory``
    rows' totals, as ``--json`` has it) and, once, what it holds."""
    total = human_bytes(document["total"])
    if not document["model"]["path"]:
        return f"total memory {total}: the given layers' sizes"
    return (
        f"total memory {total}: the weights, KV cache and compute buffers of every device and the "
        "CPU (the CPU's weights hold the input weights, its total the output buffer)"
    )
