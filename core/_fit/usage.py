"""What each backend holds under a layout: weights, KV cache and compute buffer per device and
for the CPU, with what ggml leaves on the host (a tensor or an op over the device's largest
allocation, llama.cpp's op offload of host weights to the first GPU, the projector's share)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import attrs

from gpuscout._fit import estimate as est
from gpuscout._fit.hparams import Hparams
from gpuscout._fit.model import Model, projector_graph, projector_weights
from gpuscout._fit.reader import TensorInfo
from gpuscout._layout.plan import order
from gpuscout._records.device import CPU_LIBRARY, DeviceInfo
from gpuscout._records.layers import GPULayersList
from gpuscout._records.memory import BackendMemory, DeviceMemory

#: ggml backends offload a host weight's operation to a GPU from this many tokens on
#: (ggml-cuda and ggml-vulkan ``offload_op``: batch size >= 32).
OP_OFFLOAD_BATCH = 32


@attrs.frozen
class Usage:
    """What one backend holds, in bytes (``weights`` includes, on the CPU, the input weights
    and the repacked copies; ``total`` the output buffer too)."""

    id: str
    library: str
    name: str
    weights: int
    kv_cache: int
    graph: int
    output: int = 0

    @property
    def total(self) -> int:
        """Everything this backend allocates."""
        return self.weights + self.kv_cache + self.graph + self.output


_FFN_IN = re.compile(r"\.ffn_(gate|up|gate_up)(_(ch|sh|)exps)?\.")
_FFN_OUT = re.compile(r"\.ffn_down(_(ch|sh|)exps)?\.")
_EXPERTS = re.compile(r"\.ffn_(up|down|gate|gate_up)_(ch|)exps\.")
_EXPERTS_UP = re.compile(r"\.ffn_(up|gate_up)_(ch|)exps\.")
_EXPERTS_IN = re.compile(r"\.ffn_(up|gate|gate_up)_(ch|)exps\.")
_EXPERTS_DOWN = re.compile(r"\.ffn_down_(ch|)exps\.")


def ffn_copy(tensors: Sequence[TensorInfo]) -> int:
    """The weights a feed-forward run on a GPU from host memory has copied in at once: its
    input projections (gate and up) together, or its output projection."""
    inputs = sum(t.nbytes for t in tensors if _FFN_IN.search(t.name))
    output = max((t.nbytes for t in tensors if _FFN_OUT.search(t.name)), default=0)
    return max(inputs, output)


def expert_matmuls(h: Hparams, n_tokens: int, moved: Sequence[TensorInfo]) -> int:
    """What the first GPU holds for a block on another device whose expert tensors an override
    left on the host: only those tensors' MUL_MAT_IDs run there, their weights copied in one at
    a time (ggml's scheduler starts a new split at each host weight). A gate or up product holds
    the input row, its weight and its output (the up's also the gate's output); the down product
    the swiglu product, its weight, its output and a row; both, a row more (moe24 and moe8 on
    two lavapipe devices, block 1's experts on the CPU: gate 37.06 / 19.02 MiB, up 43.06 /
    27.02, down 77.07 / 31.02, gate and down or all three 82.06 / 32.02; moe_offload.json)."""
    row = h.n_embd * n_tokens * est.F32
    inner = h.n_expert_used * h.n_ff_exp * n_tokens * est.F32
    out = h.n_expert_used * h.n_embd * n_tokens * est.F32
    gate_up = [t for t in moved if _EXPERTS_IN.search(t.name)]
    down = [t.nbytes for t in moved if _EXPERTS_DOWN.search(t.name)]
    ups = any(_EXPERTS_UP.search(t.name) for t in gate_up)
    phases = [row + (2 if ups else 1) * inner + max(t.nbytes for t in gate_up)] if gate_up else []
    phases += [inner + max(down) + out + row] if down else []
    return max(phases, default=0) + (row if gate_up and down else 0)


def experts_on_host(tensors: Sequence[TensorInfo], moved: Mapping[str, int | None]) -> bool:
    """Whether a block has expert tensors and an override sends every one of them to the CPU."""
    experts = [t for t in tensors if _EXPERTS.search(t.name)]
    return bool(experts) and all(t.name in moved and moved[t.name] is None for t in experts)


def too_big(t_bytes: int, device: DeviceInfo | None) -> bool:
    """Whether ``t_bytes`` exceed ``device``'s largest single allocation (when it has one)."""
    return device is not None and 0 < getattr(device, "max_allocation", 0) < t_bytes


def split_ops(
    g: est.Graph, layers: set[int], n: int, device: DeviceInfo | None, h: Hparams
) -> tuple[list[int], list[int], bool, list[int], bool]:
    """What a device holding ``layers`` runs: (its blocks' attention, their other phase, the head)
    and what falls back to the host: attention whose KQ scores exceed the device's largest
    allocation, and the head when the logits do (ggml's supports_op keeps those ops on the CPU)."""
    blocks = sorted(i for i in layers if i < n)
    moved = [i for i in blocks if too_big(g.scores[i], device)]
    attention = [i for i in blocks if i not in moved]
    head = n in layers and not too_big(g.logits, device) and not too_big(h.n_vocab * 4, device)
    return attention, blocks, head, moved, n in layers and not head


def device_graph(g: est.Graph, layers: set[int], n: int, device: DeviceInfo | None, h: Hparams) -> int:
    """The compute buffer of a device holding ``layers`` (what ``split_ops`` leaves it)."""
    attention, rest, head, _, _ = split_ops(g, layers, n, device, h)
    return g.on(attention, rest, head)


def _follows(
    h: Hparams, cpu_blocks: Sequence[int], layout: GPULayersList
) -> dict[int, tuple[str, str] | None]:
    """Host attention blocks whose next block is recurrent-only: the (id, library) of the GPU
    that holds that next block, or None when it is on the host too (see ``account``)."""
    held = {i: (x.id, x.library) for x in layout for i in x.layers}
    return {
        i: held.get(i + 1)
        for i in cpu_blocks
        if h.kv_layers[i] and i + 1 < h.n_layer and h.recurrent[i + 1] and not h.kv_layers[i + 1]
    }


def account(
    model: Model,
    kv: list[int],
    g: est.Graph,
    gd: est.Graph,
    ctx: est.Context,
    layout: GPULayersList,
    devices: Sequence[DeviceInfo],
    features: frozenset[str],
    tied: int,
    projector: Model | None,
    moved: Mapping[str, int | None] | None = None,
    kv_offload: bool = True,
) -> tuple[list[Usage], BackendMemory]:
    """Per backend: weights, cache and graph under ``layout`` (see DESIGN.md's fit figures).

    ``moved`` maps a tensor name to where a tensor override (llama.cpp's ``-ot``) puts it
    instead of its layer's device: an index into ``devices``, or None for the CPU. A layer's
    cache stays with its layer; with a GPU in use, ggml's scheduler runs the operations on
    host weights on the first GPU, the weights copied into its compute buffer (op offload).
    """
    h, L = model.hparams, model.layers
    n = h.n_layer
    by_key = {(d.id, d.library): d for d in devices}
    moved = moved or {}
    keys = [(d.id, d.library) for d in devices]
    extra_w: dict[tuple[str, str], list[int]] = {}  # tensors an override moved onto a device
    host_copies = [0] * (n + 1)  # per layer: the bytes of its tensors an override moved to the CPU
    cpu_w = [0] * (n + 1)
    cpu_c = [0] * (n + 1)
    gpus: list[DeviceMemory] = []
    usage: list[Usage] = []
    on_cpu = set(range(n + 1))
    cpu_head = True
    # The head's weight: the output tensor, or the tied embeddings it reads instead.
    out_w = sum(t.nbytes for t in L.output_tensors if t.name == "output.weight")
    if not out_w and L.tied and L.embedding is not None:
        out_w = L.embedding.nbytes
    host_attention: list[int] = []  # blocks whose attention a device leaves to the host
    splits: list[tuple[list[int], list[int], bool]] = []
    mapped: list[TensorInfo] = list(L.input_tensors)  # host tensors served from the mapped file
    host_moved: list[TensorInfo] = []  # tensors an override moved from a GPU layer to the CPU
    holding = [x for x in layout if x.layers]
    if len(holding) == 1 and gd.last_own and n - 1 in holding[0].layers:
        # one GPU holds every offloaded block, the last one among them (``est.Graph.last_own``)
        gd = attrs.evolve(gd, rest=(*gd.rest[: n - 1], max(gd.rest[n - 1], gd.last_own)))
    for x in layout:
        d = by_key[(x.id, x.library)]
        mine = set(x.layers)
        on_cpu -= mine
        w = [0] * (n + 1)
        c = [0] * (n + 1)
        for i in mine:
            tensors = L.tensors_by_block[i] if i < n else L.output_tensors
            for t in tensors:
                if t.name in moved:
                    target = moved[t.name]
                    if target is None:
                        cpu_w[i] += t.nbytes
                        host_copies[i] += t.nbytes
                        host_moved.append(t)
                    else:
                        extra_w.setdefault(keys[target], [0] * (n + 1))[i] += t.nbytes
                    continue
                if too_big(t.nbytes, d):
                    cpu_w[i] += t.nbytes  # stays in host memory (mapped)
                    mapped.append(t)
                else:
                    w[i] += t.nbytes
            if i == n and tied and not too_big(tied, d):
                w[i] += tied
            if i < n and kv_offload:
                c[i] = kv[i]
            elif i < n:  # -nkvo: the cache stays in host memory
                cpu_c[i] = kv[i]
        attention, rest, head, left, head_moved = split_ops(g, mine, n, d, h)
        if head and too_big(out_w, d):
            # The output weight over this device's largest allocation stays in host memory, and
            # ggml-vulkan's supports_op refuses a matrix product whose weight it cannot hold, so
            # the head runs on the host (llama-fit-params, gemma3-270m's tied 170 MiB embeddings
            # on lavapipe at -ub 64/128: Vulkan_Host holds the logits; tied_head.json).
            head, head_moved = False, True
        # A block whose expert tensors an override left on the host: its MUL_MAT_IDs run where
        # ggml's scheduler sends ops on host weights (the first GPU, op offload, counted below
        # with the copies), not on the block's device, which keeps only its attention and
        # router (moe8 -ts 1,6,2 with blocks 1-6's experts on the CPU: Vulkan1 15 MiB).
        rest = [i for i in rest if not (i < n and experts_on_host(L.tensors_by_block[i], moved))]
        splits.append((attention, rest, head))
        host_attention += left
        # the output layer's GPU after the first: its recurrent scan phase (``est.SCAN_LATER``)
        gk = gd
        if gpus and n in mine:
            # The output layer's GPU after the first: the head's logits take one row beside them,
            # not the first GPU's masks and four rows (llama-fit-params on llama-wide, -c 4096:
            # 64.50 MiB = 62.5 of logits + 2 for -ts 0,1 and 0,3, against 74.52 on one device).
            gk = attrs.evolve(
                gd, rest=gd.later or gd.rest, head_rest=h.n_embd * ctx.n_tokens * est.F32, head_on_masks=False
            )
        if n in mine:
            cpu_head = head_moved
        gpus.append(
            DeviceMemory(
                id=d.id,
                library=d.library,
                name=d.name,
                weights=w,
                cache=c,
                graph=gk.on(attention, rest, head),
            )
        )
    for k, dm in enumerate(gpus):
        more = extra_w.pop((dm.id, dm.library), None)
        if more:
            gpus[k] = attrs.evolve(dm, weights=[a + b for a, b in zip(dm.weights, more, strict=True)])
    for key, more in extra_w.items():  # a device that holds no layer of its own, only moved tensors
        d = by_key[key]
        gpus.append(DeviceMemory(id=d.id, library=d.library, name=d.name, weights=more, cache=[0] * (n + 1)))
        splits.append(([], sorted(i for i, b in enumerate(more) if b and i < n), False))
    host: list[TensorInfo] = list(host_moved)
    for i in on_cpu:
        tensors = L.tensors_by_block[i] if i < n else L.output_tensors
        host += tensors
        cpu_w[i] += sum(t.nbytes for t in tensors)
        if i < n:
            cpu_c[i] = kv[i]
    if n in on_cpu and tied and L.embedding is not None:
        host.append(L.embedding)  # the tied output: a second tensor over the same file bytes
    repacked = [est.repacked([t], features) for t in host]
    mapped += [t for t, copy in zip(host, repacked, strict=True) if not copy]
    repack = sum(repacked)
    # The CPU's weights are the mapped range plus the repacked copies; what the layers' own
    # bytes do not cover (input weights, gaps, copies) is the input-weights share.
    host_weights = est.mapped_span(mapped) + repack
    cpu_blocks = sorted(i for i in on_cpu if i < n)
    if not gpus and devices and ctx.n_tokens >= OP_OFFLOAD_BATCH:
        # No layer on a GPU, but llama.cpp still opens the first one and offloads to it: the
        # first in the planner's order (by free memory as reported), not in the ranking, which a
        # budget reorders (a reserve on the card layers go to would move only its compute).
        first = order(devices)[0]
        gpus.append(
            DeviceMemory(
                id=first.id,
                library=first.library,
                name=first.name,
                weights=[0] * (n + 1),
                cache=[0] * (n + 1),
            )
        )
        splits.append(([], [], False))
    if gpus and cpu_blocks and ctx.n_tokens >= OP_OFFLOAD_BATCH:
        # op_offload: with a GPU in use, ggml's scheduler runs a batch's operations on host
        # weights on the first GPU (their weights copied over), so the host keeps only its
        # staging buffer and that GPU's compute buffer covers the host's blocks too.
        d0 = by_key[(gpus[0].id, gpus[0].library)]
        attention, rest, head = splits[0]
        host_attention += [i for i in cpu_blocks if too_big(g.scores[i], d0)]
        # A host attention block followed by a recurrent-only block: the next block's state
        # copies are the graph's next nodes (they read none of the attention's output), and
        # ggml's scheduler (ggml-backend.cpp ggml_backend_sched_split_graph, "expand gpu up")
        # gives the attention the backend of those copies, not the first GPU's: the host's
        # when that block is on the host, else the GPU that holds it (llama-fit-params
        # GGML_SCHED_DEBUG on hybrid24 -ngl 18 / 19).
        follows = _follows(h, cpu_blocks, layout)
        host_attention += [i for i, k in follows.items() if k is None and i not in host_attention]
        followed = [(i, k) for i, k in follows.items() if k is not None and i not in host_attention]
        host_attention += [i for i in follows if i not in host_attention]
        attention = attention + [i for i in cpu_blocks if i not in host_attention]
        moved_head = (
            cpu_head
            and not too_big(g.logits, d0)
            and not too_big(h.n_vocab * 4, d0)
            and not too_big(out_w, d0)  # its weight copied in must fit, as above
        )
        # A host recurrent block's conv state and scan read state tensors in host memory, so
        # ggml's scheduler runs them on the host (GGML_SCHED_DEBUG on hybrid24 and mamba2-24
        # -ngl 10: the SSM_SCAN splits are the CPU's); the first GPU runs the block's matrix
        # products. Where the block has a feed-forward, that phase is the GPU's peak for it;
        # without one (mamba2) the projections and convolution around the scan measured about
        # the size of the scan phase (mamba2-24 -ngl 0: 58 MiB on Vulkan0, the phase 59.6), so
        # that phase stands.
        scan = [i for i in cpu_blocks if h.recurrent[i] and gd.matmul and gd.matmul[i]]
        graph = gd.on(attention, rest + [i for i in cpu_blocks if i not in scan], head or moved_head)
        graph = max([graph] + [gd.masks_for(attention) + gd.matmul[i] for i in scan])
        # The masks live on a backend only while it runs an attention that reads them
        # (ggml-backend.cpp ggml_backend_sched_split_graph copies a split's inputs to the backend
        # that runs it); with every attention left on the host (its KQ scores over the largest
        # allocation) the GPU's feed-forward copies sit on no masks.
        masks = gd.masks_for(attention)
        # An offloaded attention of a host block reads that block's K and V from host memory:
        # the scheduler copies them into the GPU's compute buffer beside the attention phase.
        offloaded = [i for i in cpu_blocks if gd.core[i] and i not in host_attention]
        copies = [masks + kv[i] + gd.attention[i] for i in offloaded]
        # Its feed-forward reads the block's projection weights: the gate and up (or down)
        # weights are copied in beside the phase's activations.
        copies += [
            masks + (gd.matmul[i] if i in scan else gd.rest[i]) + ffn_copy(L.tensors_by_block[i])
            for i in cpu_blocks
        ]
        if moved_head:
            # The head run on the first GPU from host weights: its output weight (or the tied
            # embeddings) is copied in beside the logits (op offload, as for the blocks).
            copies.append(gd.on([], [], True) + out_w)
        gpus[0] = attrs.evolve(gpus[0], graph=max([graph, *copies]))
        for i, key in followed:  # the attention's K, V and masks copied to the next block's GPU
            at = next(j for j, dm in enumerate(gpus) if (dm.id, dm.library) == key)
            copy = gd.masks_for([*splits[at][0], i]) + kv[i] + gd.core[i]
            gpus[at] = attrs.evolve(gpus[at], graph=max(gpus[at].graph, copy))
        cpu_head = cpu_head and not moved_head
        cpu_blocks = []
    if gpus and any(host_copies) and ctx.n_tokens >= OP_OFFLOAD_BATCH:
        # Weights an override left on the host while their layer sits on a GPU: the scheduler
        # copies them into the first GPU's compute buffer for the operation that reads them.
        moved_by_block = [
            [t for t in L.tensors_by_block[i] if t.name in moved and moved[t.name] is None] for i in range(n)
        ]
        masks = gd.masks_for(splits[0][0])
        own_blocks = next(
            (set(x.layers) for x in layout if (x.id, x.library) == (gpus[0].id, gpus[0].library)), set()
        )
        copies = []
        for i in (i for i in range(n) if host_copies[i]):
            experts = [t for t in moved_by_block[i] if _EXPERTS.search(t.name)]
            if experts and i not in own_blocks:
                # two rows more where the first GPU runs blocks of its own (moe24 -ts 8,17, block
                # 12's experts on the CPU: 91.01 MiB against 82.06 with -ts 0,1)
                own = 2 * h.n_embd * ctx.n_tokens * est.F32 if own_blocks else 0
                copies.append(masks + own + expert_matmuls(h, ctx.n_tokens, experts))
            elif experts and experts_on_host(L.tensors_by_block[i], moved):
                # the block's own expert phase, with its expert weights copied in one at a time
                # (moe24 at -c 8192, four blocks' experts on the CPU: 97.01 MiB, not 100)
                copies.append(masks + gd.rest[i] + max(t.nbytes for t in experts))
            else:
                copies.append(masks + gd.rest[i] + ffn_copy(moved_by_block[i]))
        gpus[0] = attrs.evolve(gpus[0], graph=max([gpus[0].graph, *copies]))
    cpu_graph = g.on(cpu_blocks + host_attention, cpu_blocks, cpu_head)
    if gpus and not cpu_blocks and not host_attention:
        # GPUs run every block: the host still looks up the input embeddings and stages the
        # attention masks it fills for them (llama.cpp's *_Host compute buffer).
        cpu_graph = max(g.masks + g.embeddings, g.host_head if cpu_head else 0)
    if projector is not None and gpus:  # the projector's compute buffer, on the first GPU
        gpus[0] = attrs.evolve(gpus[0], graph=gpus[0].graph + projector_graph(projector))
    cpu = DeviceMemory(library=CPU_LIBRARY, name="CPU", weights=cpu_w, cache=cpu_c, graph=cpu_graph)
    input_weights = max(0, host_weights - sum(cpu_w))
    memory = BackendMemory(input_weights=input_weights, cpu=cpu, gpus=gpus)
    for dm in gpus:
        extra = projector_weights(projector) if projector is not None and dm is gpus[0] else 0
        usage.append(
            Usage(
                id=dm.id,
                library=dm.library,
                name=dm.name,
                weights=sum(dm.weights) + extra,
                kv_cache=sum(dm.cache),
                graph=dm.graph,
            )
        )
    on_host = projector is not None and not gpus
    usage.append(
        Usage(
            id="",
            library=CPU_LIBRARY,
            name="CPU",
            weights=input_weights + sum(cpu_w) + (projector_weights(projector) if on_host else 0),
            kv_cache=sum(cpu_c),
            graph=cpu_graph + (projector_graph(projector) if on_host else 0),
            output=h.n_vocab * ctx.n_seq * 4,
        )
    )
    return usage, memory


__all__ = ["OP_OFFLOAD_BATCH", "Usage", "account", "device_graph", "split_ops", "too_big"]
