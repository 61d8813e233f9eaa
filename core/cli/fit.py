"""``gpuscout fit``: where a GGUF model's layers would land on this machine's devices."""

from __future__ import annotations

import argparse
import re
from typing import TYPE_CHECKING, Any

from gpuscout.cli import common
from gpuscout.cli.output import output

if TYPE_CHECKING:
    from gpuscout.cli.common import ScoutFactory, Subcommands
    from gpuscout.layers import GPULayersList
    from gpuscout.memory import BackendMemory
    from gpuscout.model import ModelSizes
    from gpuscout.records import DeviceInfo

DESCRIPTION = ("Read a GGUF model's header and tensor table, then plan which of its layers land "
               "on which device of this machine (or those --device selects): memory per device, "
               "what stays on the CPU, and whether it fits. See docs/fit.md.")

INSTALL_HINT = "gpuscout: error: fit needs the gguf package: pip install 'gpuscout[gguf]'\n"
KV_TYPE_CHOICES = ("f16", "q8_0", "q4_0")
BAR_WIDTH = 30

_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?\s*", re.IGNORECASE)
_UNITS = {"b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
          "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}


def size(text: str) -> int:
    """A byte count such as ``100MiB``, ``1.5GiB`` or ``4096``."""
    match = _SIZE.fullmatch(text)
    if not match:
        raise argparse.ArgumentTypeError(f"expected a size such as 100MiB, got {text!r}")
    return int(float(match.group(1)) * _UNITS[(match.group(2) or "B").lower()])


def sizes(text: str) -> list[int]:
    """A comma list of sizes (``--layers``)."""
    return [size(part) for part in text.split(",")]


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a whole number above 0, got {text!r}")
    return value


def add_parser(sub: Subcommands, help: str) -> None:
    """Add ``fit`` and its options to ``gpuscout``'s parser."""
    p = common.command_parser(sub, "fit", help, DESCRIPTION)
    common.add_scout_options(p)
    p.add_argument("model", nargs="?", metavar="MODEL.gguf", help="the GGUF model file")
    p.add_argument("--layers", type=sizes, metavar="SIZES",
                   help="plan these layer sizes instead of a model (100MiB,100MiB,...; the last "
                        "is the output layer)")
    p.add_argument("--ctx", type=_positive, metavar="N",
                   help="context length (default: the model's context_length)")
    p.add_argument("--kv-type", choices=KV_TYPE_CHOICES, default="f16",
                   help="KV cache element type (default f16)")
    p.add_argument("--num-gpu", type=int, default=-1, metavar="N",
                   help="layers to place on GPUs (default -1: as many as fit)")
    p.add_argument("--spread", action="store_true", help="spread layers over every GPU")
    p.add_argument("--device", action="append", default=[], metavar="SELECTOR",
                   help="plan only on the devices this selector matches (repeatable)")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")


def run(args: argparse.Namespace, scout_factory: ScoutFactory) -> int:
    """Read the model (or ``--layers``), plan on the devices, print the placement."""
    import sys

    if (args.model is None) == (args.layers is None):
        sys.stderr.write("gpuscout: error: fit needs MODEL.gguf or --layers (one of them)\n")
        return common.USAGE_ERROR
    from gpuscout.model import ModelError, given_layers, read_model

    try:
        if args.layers is not None:
            model = given_layers(args.layers)
        else:
            try:
                import gguf  # noqa: F401  (an optional extra)
            except ImportError:
                sys.stderr.write(INSTALL_HINT)
                return common.USAGE_ERROR
            model = read_model(args.model, ctx=args.ctx, kv_type=args.kv_type)
    except ModelError as exc:
        sys.stderr.write(f"gpuscout: error: {common.printable(exc)}\n")
        return common.USAGE_ERROR
    scout = common.open_scout(args, scout_factory)
    found = scout.discover(isolated=args.isolated)
    common.warn_failed_plugins(found.plugins)
    devices = found.devices
    if args.device:
        from gpuscout.select import select_devices

        devices = select_devices(scout, devices, args.device)
        if not devices:
            sys.stderr.write("gpuscout: error: no device matches "
                             f"{common.printable(' '.join(args.device))}\n")
            return common.NO_MATCH
    layers = model.layers()
    # Every GPU that holds layers also holds the compute graph: reserved per device. The plan
    # is asked for the layout alone (system memory it cannot run out of); whether the CPU part
    # fits in this machine's memory is judged below, so a layout that does not fit is still shown.
    from gpuscout.records import SystemInfo

    roomy = SystemInfo(total_memory=1 << 62, free_memory=1 << 62, free_swap=0)
    placement = scout.plan(layers, devices, roomy, num_gpu=args.num_gpu,
                           spread=args.spread, graphs={d.id: model.graph for d in devices})
    document = fit_document(model, placement, len(layers), found.system)
    if args.json:
        common.print_json(document)
    else:
        print_fit(model, placement, devices, document, color=getattr(args, "color", "auto"))
    return common.SUCCESS


def fit_document(model: ModelSizes, placement: GPULayersList, n_layers: int,
                 system: Any) -> dict[str, Any]:
    """The ``--json`` object: model, placement, cpu_layers, fits."""
    placed = {layer for g in placement for layer in g.layers}
    cpu_layers = [i for i in range(n_layers) if i not in placed]
    memory = backend_memory(model, placement)
    cpu_need = memory.input_weights + memory.cpu.size
    room = system.free_memory + system.free_swap
    fits = not cpu_layers or system.total_memory == 0 or cpu_need <= room
    return {
        "model": {"path": model.path, "architecture": model.architecture, "blocks": model.blocks,
                  "layer_weights": list(model.layer_weights),
                  "output_weights": model.output_weights,
                  # One int, as the document promises: the largest block's K plus V bytes
                  # (the same for every block unless the KV heads differ per layer).
                  "kv_cache_per_layer": max(model.kv_cache_per_layer, default=0),
                  "graph": model.graph},
        "placement": [{"id": g.id, "backend": g.library, "layers": sorted(g.layers)}
                      for g in placement],
        "cpu_layers": cpu_layers,
        "fits": fits,
    }


def backend_memory(model: ModelSizes, placement: GPULayersList) -> BackendMemory:
    """What each device holds under ``placement``: each GPU its layers and the graph, the CPU
    the rest, the input weights and, when no GPU is used, the graph."""
    from gpuscout.memory import BackendMemory, DeviceMemory

    n = model.blocks + 1
    weights = [*model.layer_weights, model.output_weights]
    cache = [*model.kv_cache_per_layer, 0] + [0] * (n - len(model.kv_cache_per_layer) - 1)

    def part(layers: set[int]) -> tuple[list[int], list[int]]:
        return ([weights[i] if i in layers else 0 for i in range(n)],
                [cache[i] if i in layers else 0 for i in range(n)])

    gpus: list[DeviceMemory] = []
    placed: set[int] = set()
    for g in placement:
        mine = set(g.layers)
        placed |= mine
        w, c = part(mine)
        gpus.append(DeviceMemory(id=g.id, library=g.library, name=f"{g.library}{len(gpus)}",
                                 weights=w, cache=c, graph=model.graph))
    w, c = part(set(range(n)) - placed)
    cpu = DeviceMemory(name="CPU", weights=w, cache=c, graph=0 if gpus else model.graph)
    return BackendMemory(input_weights=model.input_weights, cpu=cpu, gpus=gpus)


def _ranges(layers: list[int]) -> str:
    if not layers:
        return "-"
    out, start = [], layers[0]
    for prev, cur in zip(layers, [*layers[1:], None], strict=True):
        if cur != prev + 1:
            out.append(str(start) if start == prev else f"{start}-{prev}")
            start = cur if cur is not None else start
    return ",".join(out)


def _bar(used: int, total: int) -> str:
    if total <= 0:
        return "[" + "?" * BAR_WIDTH + "]"
    filled = min(BAR_WIDTH, round(BAR_WIDTH * used / total))
    return "[" + "#" * filled + "." * (BAR_WIDTH - filled) + "]"


def print_fit(model: ModelSizes, placement: GPULayersList, devices: list[DeviceInfo],
              document: dict[str, Any], color: str = "auto") -> None:
    """The placement for people: one row per device (layers, need, bar against free memory),
    the CPU row, the memory summary, then whether it fits."""
    from gpuscout.sizes import human_bytes

    memory = backend_memory(model, placement)
    free = {(d.library, d.id): d.free_memory for d in devices}
    what = model.path or "given layers"
    arch = f" ({model.architecture})" if model.architecture else ""
    lines = [f"{common.printable(what)}{arch}: {model.blocks} blocks + output layer "
             f"(layer {model.blocks})"]
    for g, need in zip(placement, memory.gpus, strict=True):
        room = free.get((g.library, g.id), 0)
        lines.append(f"  {common.printable(g.library)} {common.printable(g.id)}  layers "
                     f"{_ranges(sorted(g.layers))}  {human_bytes(need.size)} / "
                     f"{human_bytes(room)} free  {_bar(need.size, room)}")
    cpu_need = memory.input_weights + memory.cpu.size
    lines.append(f"  CPU  layers {_ranges(document['cpu_layers'])}  {human_bytes(cpu_need)} "
                 "(input weights included)")
    output().write("".join(f"{line}\n" for line in lines))
    from gpuscout.cli.table import print_memory

    if not print_memory(memory, color=color):  # a rich table on a terminal, lines in a pipe
        output().write("".join(f"  {line}\n" for line in memory.summary()))
    output().write("fits\n" if document["fits"] else "does not fit\n")
    memory.log_summary()
