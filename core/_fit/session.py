"""``Scout.fit(planner="llama.cpp")``: the arguments checked, the files read, the devices a
llama.cpp build would use (or, with ``fewest_gpus``, the fewest of them that hold the model),
then the decision (``gpuscout._fit.decide``)."""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from typing import Any

import attrs

from gpuscout._fit import estimate as est
from gpuscout._fit.decide import Request, distinct, fit_llamacpp
from gpuscout._fit.ggml import GgmlDevices
from gpuscout._fit.model import Model, read_model, read_projector
from gpuscout._fit.oracle import Oracle
from gpuscout._fit.placement import FitResult
from gpuscout._fit.reader import quant_sizes
from gpuscout._records.device import DeviceInfo, SystemInfo
from gpuscout.errors import GpuscoutError

#: The most device sets ``fewest_gpus`` tries (8 GPUs have 255 non-empty subsets).
MAX_SETS = 255


def _read(value: Any, what: str, reader: Any) -> tuple[Model | None, str | None]:
    if value is None:
        return None, None
    if isinstance(value, Model):
        return value, value.path
    if isinstance(value, (str, os.PathLike)):
        return reader(value), os.fspath(value)
    raise GpuscoutError(f"fit: {what} must be a path or a gpuscout._fit.Model, got {type(value).__name__}")


def _request(kw: dict[str, Any], num_gpu: int, mmproj_path: str | None, draft_path: str | None) -> Request:
    target = kw["fit_target"]
    if target is not None:
        values = [target] if isinstance(target, int) and not isinstance(target, bool) else target
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
            raise GpuscoutError("fit: fit_target must be bytes, or a list of bytes per device")
        if any(type(v) is not int or v < 0 for v in values):
            raise GpuscoutError(f"fit: fit_target must hold whole byte counts >= 0, got {target!r:.60}")
        target = values[0] if isinstance(target, int) else tuple(values)
    split = kw["tensor_split"]
    if split is not None:
        if isinstance(split, (str, bytes)) or not isinstance(split, Sequence):
            raise GpuscoutError("fit: tensor_split must be a list of numbers")
        if any(isinstance(x, bool) or not isinstance(x, (int, float)) or not 0 <= x < 1e30 for x in split):
            raise GpuscoutError(f"fit: tensor_split must hold numbers >= 0, got {split!r:.60}")
        split = tuple(float(x) for x in split)
    ot = kw["override_tensor"]
    ot = (ot,) if isinstance(ot, str) else tuple(ot or ())
    if any(not isinstance(x, str) for x in ot):
        raise GpuscoutError("fit: override_tensor must be PATTERN=BUFFER strings")
    n_cpu_moe = kw["n_cpu_moe"]
    if n_cpu_moe is not None and (type(n_cpu_moe) is not int or not 0 <= n_cpu_moe < 1 << 31):
        raise GpuscoutError(f"fit: n_cpu_moe must be an int >= 0, got {n_cpu_moe!r:.60}")
    fit_ctx = kw["fit_ctx"]
    if type(fit_ctx) is not int or not 0 <= fit_ctx < 1 << 32:
        raise GpuscoutError(f"fit: fit_ctx must be an int from 0 to 2**32-1, got {fit_ctx!r:.60}")
    if kw["split_mode"] not in ("layer", "row", "none", "tensor"):
        raise GpuscoutError(
            f"fit: split_mode must be layer, row, none or tensor, got {kw['split_mode']!r:.60}"
        )
    for name in ("cpu_moe", "no_cpu_offload", "fewest_gpus"):
        if not isinstance(kw[name], bool):
            raise GpuscoutError(f"fit: {name} must be a bool, got {kw[name]!r:.60}")
    return Request(
        fit_target=target,
        fit_ctx=fit_ctx,
        n_gpu_layers=None if num_gpu == -1 else num_gpu,
        tensor_split=split,
        override_tensor=ot,
        cpu_moe=kw["cpu_moe"],
        n_cpu_moe=n_cpu_moe,
        split_mode=kw["split_mode"],
        no_cpu_offload=kw["no_cpu_offload"],
        fewest_gpus=kw["fewest_gpus"],
        model_draft=draft_path,
        mmproj_path=mmproj_path,
    )


def fit_with_llamacpp(
    scout: Any,
    model: Any,
    devices: Sequence[DeviceInfo],
    system: SystemInfo,
    *,
    options: est.Options,
    flash_attn: bool | None,
    mmproj: Any,
    num_gpu: int,
    cpu_features: frozenset[str],
    auto_ctx: bool = False,
    **kw: Any,
) -> FitResult:
    """See ``Scout.fit``; ``scout`` gives the rules and the ggml device order."""
    main, _ = _read(model, "model", read_model)
    assert main is not None
    projector, mmproj_path = _read(mmproj, "mmproj", read_projector)
    draft, draft_path = _read(kw.pop("model_draft"), "model_draft", read_model)
    request = _request(kw, num_gpu, mmproj_path, draft_path)
    ggml: GgmlDevices = scout.ggml_devices(devices)

    def run(on: GgmlDevices, opts: est.Options | None = None) -> FitResult:
        options_now = options if opts is None else opts
        extra = None
        if draft is not None:
            slots = distinct(on)
            extra = Oracle(draft, slots, [d.usable_free for d in slots], options_now, quant_sizes())
        return fit_llamacpp(
            main,
            on,
            system,
            reserve=scout.minimum_memory,
            flash_attention=scout.flash_attention_supported,
            platform=scout.platform,
            options=options_now,
            flash_attn=flash_attn,
            projector=projector,
            request=request,
            cpu_features=cpu_features,
            extra=extra,
            supports_op=scout.ggml_supports_op,
        )

    if auto_ctx:
        return _largest_context(main, options, lambda o: run(ggml, o))
    if request.fewest_gpus and len(ggml.devices) > 1:
        return _fewest(ggml, run, scout.ggml_devices)
    result = run(ggml)
    if draft is not None:
        result = attrs.evolve(
            result,
            notes=(
                *result.notes,
                f"draft model {draft_path}: counted on the same devices, at the same context",
            ),
        )
    return result


def _largest_context(model: Model, options: est.Options, attempt: Any) -> FitResult:
    """``ctx="auto"``: a search over contexts (multiples of 256 per sequence, up to the
    training context per sequence) for the largest whose decision keeps every layer on the
    devices; where none does, the largest that still fits; the smallest when nothing fits."""
    seqs = max(1, options.parallel)
    top = max(1, model.hparams.n_ctx_train // 256)

    def at(k: int) -> FitResult:
        result: FitResult = attempt(attrs.evolve(options, ctx=k * 256 * seqs))
        return result

    def good(r: FitResult, whole: bool) -> bool:
        return r.fits and not r.gave_up and (not whole or not r.cpu_layers)

    low = at(1)
    for whole in (True, False):
        if not good(low, whole):
            continue
        lo, hi, best = 1, top, low
        while lo < hi:
            mid = (lo + hi + 1) // 2
            r = at(mid)
            if good(r, whole):
                lo, best = mid, r
            else:
                hi = mid - 1
        what = "every layer on the devices" if whole else "a decision that fits"
        note = f"ctx auto: {best.context.n_ctx}, the largest context (up to the training context) with {what}"
        return attrs.evolve(best, notes=(*best.notes, note))
    return attrs.evolve(low, notes=(*low.notes, "ctx auto: nothing fits, even at 256 per sequence"))


def _sets(ggml: GgmlDevices) -> list[tuple[int, ...]]:
    """Device sets by size, each size's sets best first: on one NUMA node, joined by direct
    links (NVLink, xGMI), then by free memory."""
    devices = ggml.devices
    out: list[tuple[int, ...]] = []
    for k in range(1, len(devices)):
        sets = list(itertools.combinations(range(len(devices)), k))

        def key(s: tuple[int, ...]) -> tuple[int, int, int]:
            nodes = {devices[i].numa_node for i in s}
            ids = {devices[i].id for i in s}
            linked = all(any(p.id in ids for p in devices[i].peers) for i in s) if len(s) > 1 else True
            return (
                0 if len(nodes) == 1 and -1 not in nodes else 1,
                0 if linked else 1,
                -sum(devices[i].usable_free for i in s),
            )

        out += sorted(sets, key=key)
        if len(out) >= MAX_SETS:
            break
    return out[:MAX_SETS]


def _fewest(ggml: GgmlDevices, run: Any, regroup: Any) -> FitResult:
    """The first device set (``_sets``) on which every layer sits on a GPU and the verdict fits,
    handed to llama.cpp alone (its own names and environment, so the other cards stay free);
    every device when none does."""
    for chosen in _sets(ggml):
        subset: GgmlDevices = regroup([ggml.devices[i] for i in chosen])
        result: FitResult = run(subset)
        if result.fits and not result.cpu_layers:
            names = ", ".join(
                f"{ggml.names[i]} ({ggml.devices[i].name or ggml.devices[i].id})" for i in chosen
            )
            nodes = {ggml.devices[i].numa_node for i in chosen}
            why = "the fewest GPUs that hold every layer"
            if len(nodes) == 1 and -1 not in nodes:
                why += f", on NUMA node {nodes.pop()}"
            if len(chosen) > 1 and all(
                any(p.id in {ggml.devices[j].id for j in chosen} for p in ggml.devices[i].peers)
                for i in chosen
            ):
                why += ", joined by direct links"
            return attrs.evolve(result, notes=(*result.notes, f"--fewest-gpus: {names}: {why}"))
    result = run(ggml)
    return attrs.evolve(
        result, notes=(*result.notes, "--fewest-gpus: no smaller set holds every layer; all GPUs used")
    )


__all__ = ["fit_with_llamacpp"]
