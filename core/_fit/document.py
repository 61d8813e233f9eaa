"""What ``gpuscout fit --layers`` prints, built in the library: the reference planner on given
sizes, judged as ``fit MODEL`` is judged (a model's document is ``FitResult.to_dict()``). The
command line only prints it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpuscout._records.device import DeviceInfo, SystemInfo


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
