"""The devices a llama.cpp build would use, in its order and by its names (``-dev``).

Each backend plugin says how ggml enumerates its devices (``gpuscout_ggml_devices``: the
registry's order of backends, the device order within one, a device listed twice where a
visibility variable names it twice); then llama.cpp's default selection applies
(``src/llama.cpp`` ``llama_prepare_model_devices``): every GPU once per device id (a device
seen by two backends is used once, the first), and integrated GPUs only when there is no other
GPU, those of the first integrated GPU's backend only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import attrs

from gpuscout._machine.context import GgmlOrder
from gpuscout._records.device import DeviceInfo

#: The registry position of a backend whose plugin does not say (after every built-in).
DEFAULT_RANK = 50


@attrs.frozen
class GgmlDevices:
    """The planner's devices: ``devices[k]`` is ggml's device ``names[k]``; ``env`` makes a child
    enumerate exactly them, in this order; ``left_out`` says which candidates llama.cpp would
    not use, and why."""

    devices: tuple[DeviceInfo, ...]
    names: tuple[str, ...]
    env: Mapping[str, str]
    left_out: tuple[str, ...] = ()


def ggml_devices(
    candidates: Sequence[DeviceInfo],
    answers: Sequence[tuple[str, GgmlOrder]],
    visible_env: Callable[[Sequence[DeviceInfo]], Mapping[str, str]],
) -> GgmlDevices:
    """Order ``candidates`` as a ggml build would (see the module's docstring)."""
    claimed: set[int] = set()
    orders: list[tuple[int, str, list[tuple[int, str]], Mapping[str, str]]] = []
    for _plugin, answer in answers:
        entries = [(i, name) for i, name in answer.devices if 0 <= i < len(candidates)]
        if not entries:
            continue
        library = candidates[entries[0][0]].library
        claimed.update(i for i, _ in entries)
        orders.append((answer.rank, library, entries, answer.env))
    rest: dict[str, list[int]] = {}
    for i, d in enumerate(candidates):
        if i not in claimed:
            rest.setdefault(d.library, []).append(i)
    for library, positions in rest.items():
        chosen = [candidates[i] for i in positions]
        entries = [(i, f"{library}{n}") for n, i in enumerate(positions)]
        orders.append((DEFAULT_RANK, library, entries, dict(visible_env(chosen))))
    orders.sort(key=lambda o: o[0])  # stable: equal ranks keep the plugins' order
    gpus: list[tuple[DeviceInfo, str, str]] = []
    igpus: list[tuple[DeviceInfo, str, str]] = []
    left_out: list[str] = []
    seen_ids: dict[str, str] = {}
    for _, library, entries, _env in orders:
        for i, name in entries:
            d = candidates[i]
            if d.integrated:
                if not igpus or igpus[-1][2] == library:
                    igpus.append((d, name, library))
                continue
            key = (d.pci_id or "").lower()
            if key and key in seen_ids and seen_ids[key] != name:
                left_out.append(f"{name}: the same device as {seen_ids[key]}, which llama.cpp uses")
                continue
            if key:
                seen_ids[key] = name
            gpus.append((d, name, library))
    if gpus:
        left_out += [
            f"{name} ({d.name or d.id}): an integrated GPU, which llama.cpp uses only when there is "
            "no other GPU"
            for d, name, _ in igpus
        ]
        picked = gpus
    else:
        picked = igpus
    libraries = {entry[2] for entry in picked}
    env: dict[str, str] = {}
    for order in orders:
        if order[1] in libraries:
            env.update(order[3])
    return GgmlDevices(
        devices=tuple(entry[0] for entry in picked),
        names=tuple(entry[1] for entry in picked),
        env=env,
        left_out=tuple(left_out),
    )


__all__ = ["DEFAULT_RANK", "GgmlDevices", "ggml_devices"]
