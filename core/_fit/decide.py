"""``Scout.fit`` under the llama.cpp planner: llama.cpp's fit computed on the devices a llama.cpp
build would use (``gpuscout._fit.ggml``), judged by gpuscout's verdict, with the llama.cpp
arguments and the environment that run exactly that decision."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

import attrs

from gpuscout._fit import estimate as est
from gpuscout._fit import llamacpp
from gpuscout._fit.command import Launch, arguments
from gpuscout._fit.errors import ModelError
from gpuscout._fit.ggml import GgmlDevices
from gpuscout._fit.hparams import Hparams
from gpuscout._fit.model import Model
from gpuscout._fit.oracle import CPU, Config, Oracle
from gpuscout._fit.placement import FitResult, decided_options, training_note
from gpuscout._fit.reader import quant_sizes
from gpuscout._fit.usage import too_big
from gpuscout._fit.verdict import verdict
from gpuscout._records.device import DeviceInfo, SystemInfo
from gpuscout._records.layers import layer_ranges
from gpuscout._records.notes import grouped
from gpuscout.errors import GpuscoutError
from gpuscout.sizes import plural, word_for

#: The longest ``-ot`` pattern taken (llama.cpp's own are under 60 characters).
MAX_PATTERN = 512
_NESTED_REPEAT = re.compile(r"\((?:[^()\\]|\\.)*[*+}](?:[^()\\]|\\.)*\)\s*[*+{]")


@attrs.frozen
class Request:
    """What the user fixed or asked of the llama.cpp planner (llama.cpp's option names)."""

    fit_target: tuple[int, ...] | int | None = None
    fit_ctx: int = llamacpp.DEFAULT_FIT_CTX
    n_gpu_layers: int | None = None
    tensor_split: tuple[float, ...] | None = None
    override_tensor: tuple[str, ...] = ()
    cpu_moe: bool = False
    n_cpu_moe: int | None = None
    split_mode: str = "layer"
    no_cpu_offload: bool = False
    fewest_gpus: bool = False
    model_draft: str | None = None
    mmproj_path: str | None = None


def distinct(ggml: GgmlDevices) -> list[DeviceInfo]:
    """The planner's devices, a device ggml lists twice given an id of its own the second time
    (``0:Vulkan1``), so each slot has its own memory figures."""
    seen: set[tuple[str, str]] = set()
    out = []
    for d, name in zip(ggml.devices, ggml.names, strict=True):
        key = (d.id, d.library)
        out.append(attrs.evolve(d, id=f"{d.id}:{name}") if key in seen else d)
        seen.add(key)
    return out


def user_overrides(request: Request, names: Sequence[str]) -> list[tuple[str, int | None]]:
    """``-ot`` entries (``PATTERN=BUFFER``, buffer ``CPU`` or a ggml device name), then
    ``-cmoe``, then ``-ncmoe N``'s per-layer entries, as llama.cpp's parser appends them."""
    out: list[tuple[str, int | None]] = []
    for entry in request.override_tensor:
        for part in entry.split(","):
            pattern, eq, buft = part.partition("=")
            if not eq or not pattern:
                raise GpuscoutError(f"fit: --override-tensor {part!r:.80}: expected PATTERN=BUFFER")
            if len(pattern) > MAX_PATTERN or _NESTED_REPEAT.search(pattern):
                # A repeat inside a repeated group can take exponential time on a tensor name
                # (Python's re, like llama.cpp's std::regex, backtracks): refused, never run.
                raise GpuscoutError(
                    f"fit: --override-tensor {pattern!r:.80}: at most {MAX_PATTERN} characters and no "
                    "repeated group that itself repeats, such as (a+)+"
                )
            try:
                re.compile(pattern)
            except re.error as exc:
                raise GpuscoutError(
                    f"fit: --override-tensor {pattern!r:.80}: not a regular expression: {exc}"
                ) from None
            if buft == "CPU":
                out.append((pattern, CPU))
            elif buft in names:
                out.append((pattern, names.index(buft)))
            else:
                known = ", ".join(["CPU", *names])
                raise GpuscoutError(
                    f"fit: --override-tensor {part!r:.80}: unknown buffer type (known: {known})"
                )
    if request.cpu_moe:
        out.append((llamacpp.FFN_EXPS, CPU))
    for i in range(request.n_cpu_moe or 0):
        out.append((rf"blk\.{i}{llamacpp.FFN_EXPS}", CPU))
    return out


#: What ``gpuscout_ggml_supports_op`` is asked for ``-sm row``: whether the backend offers a split
#: buffer type (``ggml_backend_split_buffer_type``), which row split loads the weights into.
SPLIT_BUFFER = "SPLIT_BUFFER"


def scan_params(h: Hparams) -> dict[str, int] | None:
    """The shapes ggml's backends judge a Mamba scan by (``gpuscout_ggml_supports_op``'s
    ``SSM_SCAN``): the state ``s`` is d_state x head_dim x n_head (Mamba2: d_inner split in
    heads; Mamba: one element per channel). None for a model without one."""
    if not any(h.recurrent) or not h.ssm_inner or not h.ssm_state:
        return None
    if h.ssm_heads:
        return {
            "d_state": h.ssm_state,
            "head_dim": h.ssm_inner // h.ssm_heads,
            "n_head": h.ssm_heads,
            "n_group": max(1, h.ssm_groups),
            "mamba2": 1,
        }
    return {"d_state": h.ssm_state, "head_dim": 1, "n_head": h.ssm_inner, "n_group": 1, "mamba2": 0}


def host_scan(
    h: Hparams, devices: Sequence[DeviceInfo], supports_op: Callable[..., bool] | None
) -> frozenset[tuple[str, str]]:
    """The (id, library) of the devices whose backend refuses the model's recurrent scan."""
    params = scan_params(h)
    if params is None or supports_op is None:
        return frozenset()
    return frozenset((d.id, d.library) for d in devices if not supports_op(d, "SSM_SCAN", params))


def cache_abort(
    oracle: Oracle,
    h: Hparams,
    options: est.Options,
    request: Request,
    overrides: Sequence[tuple[str, int | None]],
    names: Sequence[str],
    devices: Sequence[DeviceInfo],
) -> str:
    """Why llama.cpp aborts before its fit decides anything ("" when it does not).

    Its first dry run builds the context with the parameters as given (the training context
    times the sequences when -c is unset or 0): a cache tensor on a device whose backend cannot
    hold it (over its largest allocation) makes ggml's scheduler abort
    (ggml-backend.cpp ``ggml_backend_sched_backend_id_from_cur``: "pre-allocated tensor
    (cache_k_l0) in a buffer (Vulkan0) that cannot run the operation"; llama-fit-params dies
    of SIGABRT: dense16 -np 4 on lavapipe, 256 MiB K tensors against 128 MiB)."""
    n_ctx = options.ctx or min(h.n_ctx_train * max(1, options.parallel), llamacpp.UINT32_MAX)
    ngl = -1 if request.n_gpu_layers is None else request.n_gpu_layers
    if not oracle.options.kv_offload:  # -nkvo: the cache stays in host memory
        return ""
    first = oracle.measure(Config(n_ctx, ngl, tuple(request.tensor_split or ()), tuple(overrides)))
    tensors = [max(kv) for kv in est.cache_tensors(h, first.context, oracle.options, quant_sizes())]
    by_key = {(d.id, d.library): (names[k], d) for k, d in enumerate(devices)}
    for x in first.layout:
        name, d = by_key[(x.id, x.library)]
        for il in sorted(i for i in x.layers if i < h.n_layer):
            if too_big(tensors[il], d):
                return (
                    f"llama.cpp aborts before its fit decides: block {il}'s cache tensor "
                    f"({tensors[il] >> 20} MiB) is over {name}'s largest allocation "
                    f"({d.max_allocation >> 20} MiB)"
                )
    return ""


def fit_llamacpp(
    model: Model,
    ggml: GgmlDevices,
    system: SystemInfo,
    *,
    reserve: Callable[[DeviceInfo], int],
    flash_attention: Callable[[Sequence[DeviceInfo]], bool],
    platform: str,
    options: est.Options,
    flash_attn: bool | None,
    projector: Model | None,
    request: Request,
    cpu_features: frozenset[str],
    extra: Oracle | None = None,
    supports_op: Callable[[DeviceInfo, str, Mapping[str, int]], bool] | None = None,
) -> FitResult:
    """llama.cpp's decision for ``model`` on ``ggml``'s devices, as a FitResult with ``args``.
    ``supports_op`` says which operations a device's backend runs (``Scout.ggml_supports_op``;
    None: every one)."""
    h = model.hparams
    notes = list(h.notes) + [f"llama.cpp would not use {x}" for x in ggml.left_out]
    devices = distinct(ggml)
    fa_auto = flash_attn is None
    opts = decided_options(options, flash_attn, flash_attention, devices, notes)
    flash_attn = opts.flash_attn
    if request.split_mode == "none":
        devices, names = devices[:1], ggml.names[:1]  # llama.cpp keeps only the main GPU
    else:
        names = ggml.names
    overrides = user_overrides(request, names)
    n_ctx_min = request.fit_ctx
    if options.ctx == 0 and request.fit_ctx == llamacpp.DEFAULT_FIT_CTX:
        n_ctx_min = llamacpp.UINT32_MAX  # -c 0: the full context, never reduced (common/arg.cpp)
    if options.ctx is None or options.ctx == 0:
        if h.n_ctx_train <= 0:
            raise ModelError(f"{h.arch}: the model has no context_length; give --ctx")
    oracle = Oracle(
        model,
        devices,
        [d.usable_free for d in devices],
        opts,
        quant_sizes(),
        projector=projector,
        cpu_features=cpu_features,
        extra=extra,
        fa_auto=fa_auto,
        host_scan=host_scan(h, devices, supports_op),
    )
    margins = llamacpp.margins_for(len(devices), request.fit_target)
    decision = llamacpp.plan(
        oracle,
        host_total=system.total_memory,
        margins=margins,
        n_ctx=options.ctx,
        n_ctx_min=n_ctx_min,
        n_streams=max(1, options.parallel),
        n_ctx_train=h.n_ctx_train,
        n_gpu_layers=request.n_gpu_layers,
        tensor_split=request.tensor_split,
        overrides=overrides or None,
        split_mode=request.split_mode,
        n_expert=h.n_expert,
        n_layer=h.n_layer,
        names=names,
    )
    aborted = cache_abort(oracle, h, options, request, overrides, names, devices)
    if aborted:
        decision = attrs.evolve(decision, failure=aborted)
    refused = [
        names[k]
        for k, d in enumerate(devices)
        if request.split_mode == "row" and supports_op is not None and not supports_op(d, SPLIT_BUFFER, {})
    ]
    if refused:
        # -sm row loads the weights into the backend's split buffer type; a backend without one
        # fails the load (llama-model.cpp make_gpu_buft_list), and llama.cpp's fit with it.
        reason = f"failed to load model: device {refused[0]} does not support split buffers (-sm row)"
        decision = attrs.evolve(decision, failure=reason)
    if aborted:
        notes.append(f"{aborted}; the arguments are the decision it would make without that")
    elif decision.failure:
        notes.append(f"llama.cpp's fit gives up here ({decision.failure}); its parameters stay as they are")
    m = decision.measured
    if m.fa_off:
        flash_attn = False
        opts = attrs.evolve(opts, flash_attn=False)
        # One word on flash attention: this placement's, not the one for the devices alone.
        notes[:] = [n for n in notes if not n.startswith("flash attention auto: on")]
        notes.append(
            "flash attention auto: off for this placement (llama.cpp schedules the attention of "
            "the last host block on the GPU that holds the next, recurrent, block and turns it off)"
        )
    short = [
        (
            f"{names[k]} ({d.name or d.id})",
            f"llama.cpp's decision leaves less than the {margins[k] >> 20} MiB "
            "margin free there (it checks a device only when it fills it)",
        )
        for k, d in enumerate(devices)
        if m.devices[k] > d.usable_free - margins[k]
    ]
    notes += grouped(short, every=len(devices))  # said once for the devices it holds for
    n = h.n_layer
    layout = m.layout
    placed = {i for x in layout for i in x.layers}
    cpu_layers = tuple(i for i in range(n + 1) if i not in placed)
    usage = [u for u in m.usage[:-1] if u.total] + [m.usage[-1]]
    ctx = m.context
    training_note(h, ctx, notes)
    kv = est.kv_bytes(h, ctx, opts, quant_sizes())
    L = model.layers
    layer_sizes = [L.blocks[i] + kv[i] for i in range(n)] + [L.output]
    non_empty = [x for x in layout if x.layers]
    from gpuscout._records.layers import GPULayersList

    placement = GPULayersList(non_empty)
    num_gpu = decision.n_gpu_layers if decision.n_gpu_layers >= 0 else n + 1
    fits = verdict(placement, layer_sizes, devices, system, usage, reserve, platform, num_gpu, notes)
    fits = fits and not refused  # the model does not load at all
    if request.no_cpu_offload and (cpu_layers or m.moved):
        fits = False
        count = len(cpu_layers) or len(m.moved)
        what = (
            f"{word_for(count, 'layer')} {layer_ranges(cpu_layers)}"
            if cpu_layers
            else plural(count, "tensor")
        )
        notes.append(
            f"--no-cpu-offload: {what} would stay on the CPU; llama.cpp would spill "
            f"{word_for(count, 'it', 'them')}, this fit refuses"
        )
    launch = Launch(
        n_ctx=decision.n_ctx,
        n_gpu_layers=decision.n_gpu_layers,
        tensor_split=decision.tensor_split,
        overrides=decision.overrides,
        names=tuple(names),
        flash_attn=flash_attn,
        options=opts,
        mmproj=request.mmproj_path,
        model_draft=request.model_draft,
        split_mode=request.split_mode,
    )
    args, used = arguments(launch)
    env = dict(ggml.env) if used else {}
    return FitResult(
        model=model,
        context=ctx,
        flash_attn=flash_attn,
        cache_type_k=opts.cache_type_k,
        cache_type_v=opts.cache_type_v,
        placement=placement,
        memory=m.memory,
        usage=tuple(usage),
        cpu_layers=cpu_layers,
        layer_sizes=tuple(layer_sizes),
        fits=fits,
        notes=tuple(notes),
        planner="llama.cpp",
        args=tuple(args),
        env=env,
        dry_runs=decision.dry_runs,
        gave_up=decision.failure,
    )


__all__ = ["Request", "distinct", "fit_llamacpp", "user_overrides"]
