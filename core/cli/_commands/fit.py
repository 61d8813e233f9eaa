"""``gpuscout fit``: whether a GGUF model fits this machine's devices, as llama.cpp would load it."""

from __future__ import annotations

import argparse
import re
from typing import TYPE_CHECKING, Any

from gpuscout.cli import _common as common
from gpuscout.cli._output import output

if TYPE_CHECKING:
    from gpuscout._fit.placement import FitResult
    from gpuscout._records.device import DeviceInfo, SystemInfo
    from gpuscout.cli._common import ScoutFactory, Subcommands

DESCRIPTION = (
    "Read a GGUF model's header and tensor table (bounded: no file can hang or crash "
    "it), estimate what llama.cpp allocates with these options (model buffers, KV "
    "cache, compute buffers per device), place the layers on this machine's devices "
    "(or those --device selects) and say whether it fits: exit 0 fits, 1 does not, "
    "2 bad input. Options mirror llama.cpp's long names. See docs/fit.md."
)

INSTALL_HINT = "gpuscout: error: fit needs the gguf package: pip install 'gpuscout[gguf]'\n"
FITS, DOES_NOT_FIT = 0, 1

_WHOLE = re.compile(r"[0-9]{1,10}")


def sizes(text: str) -> list[int]:
    """A comma list of sizes (``--layers 100MiB,100MiB``), each as ``gpuscout.sizes.parse_size``
    reads it (a unit required; bytes are ``4096B``), up to 2**63-1 bytes."""
    from gpuscout.sizes import SizeError, parse_size

    if text.count(",") > 1 << 16:
        raise argparse.ArgumentTypeError("at most 65536 layer sizes")
    try:
        return [parse_size(part, what=f"--layers size {i}") for i, part in enumerate(text.split(","), 1)]
    except SizeError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _whole(low: int) -> Any:
    def parse(text: str) -> int:
        if not _WHOLE.fullmatch(text) or not low <= int(text) < 1 << 32:
            raise argparse.ArgumentTypeError(
                f"expected a whole number from {low} to 4294967295, got {common.printable(text)[:40]!r}"
            )
        return int(text)

    return parse


def _ctx(text: str) -> int | str:
    """``-c``: a whole number, or ``auto`` (the largest context that fits)."""
    return "auto" if text == "auto" else int(_whole(0)(text))


def _num_gpu(text: str) -> int:
    if text in ("-1", "auto"):
        return -1
    if text == "all":
        return -2  # llama.cpp's "all" (every layer, and set by the user)
    return int(_whole(0)(text))


class _InOrder(argparse.Action):
    """Stores the value and remembers whether ``-c 0`` came after the last ``-fitc``: llama.cpp
    parses in order, and ``-c 0`` sets the fit's smallest context to the full one."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None) -> None:
        setattr(namespace, self.dest, values)
        if self.dest == "ctx":
            namespace.ctx_zero_last = values == 0
        elif getattr(namespace, "ctx_zero_last", False):
            namespace.ctx_zero_last = False


def _mib_list(text: str) -> list[int]:
    """``-fitt``: MiB, one value for every device or one per device (``,`` or ``/`` between)."""
    parts = re.split(r"[,/]+", text)
    if len(parts) > 256:
        raise argparse.ArgumentTypeError("at most 256 values")
    return [int(_whole(0)(part)) << 20 for part in parts]


def _split(text: str) -> list[float]:
    """``-ts``: non-negative numbers, ``,`` or ``/`` between."""
    parts = re.split(r"[,/]", text)
    if len(parts) > 256 or not all(re.fullmatch(r"[0-9]{1,10}(\.[0-9]{1,9})?", p) for p in parts):
        raise argparse.ArgumentTypeError(f"expected numbers such as 3,1, got {common.printable(text)[:40]!r}")
    return [float(p) for p in parts]


def add_parser(sub: Subcommands, help: str) -> None:
    """Add ``fit`` and its options to ``gpuscout``'s parser."""
    p = common.command_parser(sub, "fit", help, DESCRIPTION)
    common.add_scout_options(p)
    p.add_argument("model", nargs="?", metavar="MODEL.gguf", help="the GGUF model file")
    p.add_argument(
        "--layers",
        type=sizes,
        metavar="SIZES",
        help="plan these layer sizes instead of a model (100MiB,100MiB,...; the last is the output layer)",
    )
    add_fit_options(p)
    p.add_argument(
        "--device",
        action="append",
        default=[],
        metavar="SELECTOR",
        help="plan only on the devices this selector matches (repeatable)",
    )
    common.add_include_software(p, "plan on software devices (llvmpipe) too, as list shows them")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")


def add_fit_options(p: argparse.ArgumentParser) -> None:
    """The options of a fit (shared by ``fit`` and ``exec --fit``), llama.cpp's spellings first."""
    from gpuscout._fit.estimate import CACHE_TYPES

    p.add_argument(
        "-c",
        "--ctx",
        "--ctx-size",
        dest="ctx",
        action=_InOrder,
        type=_ctx,
        metavar="N",
        help="total context, shared by --parallel sequences (default: chosen as llama.cpp's fit "
        "chooses, from the model's; 0: the model's, never reduced; auto: the largest that fits)",
    )
    p.add_argument(
        "--planner",
        choices=("llama.cpp", "ollama"),
        default="llama.cpp",
        help="llama.cpp: decide as llama.cpp's --fit does (default); ollama: the reference "
        "planner of LAYOUT.md",
    )
    p.add_argument(
        "--print-args",
        action="store_true",
        help="print only the llama.cpp arguments of the decision, one shell-quoted line",
    )
    p.add_argument(
        "-fitt",
        "--fit-target",
        type=_mib_list,
        metavar="MiB[,MiB...]",
        help="memory llama.cpp's fit keeps free per device, in MiB (default 1024)",
    )
    p.add_argument(
        "-fitc",
        "--fit-ctx",
        action=_InOrder,
        type=_whole(0),
        default=None,
        metavar="N",
        help="the smallest context the fit may choose (default 4096)",
    )
    p.add_argument(
        "-ts",
        "--tensor-split",
        type=_split,
        metavar="A,B,...",
        help="layers per device as llama.cpp's -ts (kept as given)",
    )
    p.add_argument(
        "-ot",
        "--override-tensor",
        action="append",
        default=[],
        metavar="PATTERN=BUFFER,...",
        help="llama.cpp's tensor buffer overrides (kept as given; BUFFER is CPU or a -dev name)",
    )
    p.add_argument("-cmoe", "--cpu-moe", action="store_true", help="every MoE expert tensor on the CPU")
    p.add_argument(
        "-ncmoe",
        "--n-cpu-moe",
        type=_whole(0),
        metavar="N",
        help="the MoE experts of the first N layers on the CPU",
    )
    p.add_argument(
        "-sm",
        "--split-mode",
        choices=("none", "layer", "row", "tensor"),
        default="layer",
        help="default layer",
    )
    p.add_argument("-md", "--model-draft", metavar="FILE", help="a draft model, on the same devices")
    p.add_argument(
        "-nkvo",
        "--no-kv-offload",
        dest="kv_offload",
        action="store_false",
        help="keep the KV cache in host memory, as llama.cpp's -nkvo",
    )
    p.add_argument(
        "--no-cpu-offload",
        action="store_true",
        help="fail (exit 1) rather than leave a layer or tensor on the CPU",
    )
    p.add_argument(
        "--fewest-gpus",
        action="store_true",
        help="hand llama.cpp the fewest GPUs that hold the model (one NUMA node, NVLink/xGMI peers first)",
    )
    p.add_argument(
        "-fa",
        "--flash-attn",
        choices=("on", "off", "auto"),
        default="auto",
        help="flash attention (default auto: on where every device supports it)",
    )
    p.add_argument(
        "-ctk", "--cache-type-k", choices=CACHE_TYPES, default=None, help="K cache type (default f16)"
    )
    p.add_argument(
        "-ctv", "--cache-type-v", choices=CACHE_TYPES, default=None, help="V cache type (default f16)"
    )
    p.add_argument("--kv-type", choices=CACHE_TYPES, default=None, help="both cache types at once")
    p.add_argument("-np", "--parallel", type=_whole(1), default=1, metavar="N", help="sequences (default 1)")
    p.add_argument("-ub", "--ubatch-size", type=_whole(1), default=512, metavar="N", help="default 512")
    p.add_argument("-b", "--batch-size", type=_whole(1), default=2048, metavar="N", help="default 2048")
    p.add_argument("--swa-full", action="store_true", help="full-size cache for sliding-window layers")
    p.add_argument("--mmproj", metavar="FILE", help="a multimodal projector GGUF (on the first GPU)")
    p.add_argument(
        "-ngl",
        "--n-gpu-layers",
        "--gpu-layers",
        "--num-gpu",
        dest="num_gpu",
        type=_num_gpu,
        default=-1,
        metavar="N",
        help="put the last N layers on GPUs, output layer first, as llama.cpp's -ngl "
        "(default -1: as many as fit)",
    )
    p.add_argument("--spread", action="store_true", help="spread layers over every GPU")


def fit_model(
    scout: Any, model: Any, devices: list[DeviceInfo], system: SystemInfo, args: argparse.Namespace
) -> FitResult:
    """``Scout.fit`` with the command line's options (``add_fit_options``)."""
    from gpuscout._fit.model import read_model, read_projector

    mmproj = read_projector(args.mmproj) if args.mmproj else None
    common_options: dict[str, Any] = dict(
        devices=devices,
        system=system,
        ctx=args.ctx,
        flash_attn={"on": True, "off": False}.get(args.flash_attn),
        cache_type_k=args.cache_type_k or args.kv_type or "f16",
        cache_type_v=args.cache_type_v or args.kv_type or "f16",
        parallel=args.parallel,
        ubatch_size=args.ubatch_size,
        batch_size=args.batch_size,
        swa_full=args.swa_full,
        kv_offload=args.kv_offload,
        mmproj=mmproj,
        num_gpu=args.num_gpu,
    )
    if args.ctx == 0 and not getattr(args, "ctx_zero_last", True) and args.fit_ctx is not None:
        # "-c 0 -fitc N": the context is unset and the fit may lower it to N (llama.cpp's order)
        common_options["ctx"] = None
    if args.planner == "ollama":
        return scout.fit(model, **common_options, spread=args.spread, planner="ollama")  # type: ignore[no-any-return]
    return scout.fit(  # type: ignore[no-any-return]
        model,
        **common_options,
        planner="llama.cpp",
        fit_target=args.fit_target,
        fit_ctx=4096 if args.fit_ctx is None else args.fit_ctx,
        tensor_split=args.tensor_split,
        override_tensor=args.override_tensor,
        cpu_moe=args.cpu_moe,
        n_cpu_moe=args.n_cpu_moe,
        split_mode=args.split_mode,
        model_draft=read_model(args.model_draft) if args.model_draft else None,
        no_cpu_offload=args.no_cpu_offload,
        fewest_gpus=args.fewest_gpus,
    )


def run(args: argparse.Namespace, scout_factory: ScoutFactory) -> int:
    """Read the model (or ``--layers``), place it, print where it lands; exit 0 / 1 / 2."""
    import sys

    from gpuscout._fit.document import layers_document
    from gpuscout.errors import GpuscoutError

    common.check_selectors(args.device, "--device")
    if (args.model is None) == (args.layers is None):
        sys.stderr.write("gpuscout: error: fit needs MODEL.gguf or --layers (one of them)\n")
        return common.USAGE_ERROR
    if args.model is not None:
        try:
            import gguf  # noqa: F401  (an optional extra)
        except ImportError:
            sys.stderr.write(INSTALL_HINT)
            return common.USAGE_ERROR
    try:
        model = None
        if args.model is not None:
            from gpuscout._fit.model import read_model

            model = read_model(args.model)
        scout = common.open_scout(args, scout_factory)
        found = scout.discover(isolated=args.isolated, include_software=args.include_software)
        common.warn_failed_plugins(found.plugins)
        common.warn_budgets(found, args)
        devices = found.devices
        if args.device:
            from gpuscout._selection.selectors import select_devices

            devices = select_devices(scout, devices, args.device, found.numbering)
            if not devices:
                sys.stderr.write(
                    f"gpuscout: error: no device matches {common.printable(' '.join(args.device))}\n"
                )
                return common.NO_MATCH
        if model is None:
            num_gpu = len(args.layers) if args.num_gpu == -2 else args.num_gpu
            document = layers_document(
                args.layers, devices, found.system, scout.minimum_memory, scout.platform, num_gpu, args.spread
            )
            result = None
        else:
            result = fit_model(scout, model, devices, found.system, args)
            document = result.to_dict()
    except GpuscoutError as exc:
        from gpuscout._selection.selectors import NoMatchError

        sys.stderr.write(f"gpuscout: error: {common.printable(exc)[:400]}\n")
        # A well-formed --device selector that matches nothing is exit 1, as for env and exec.
        return common.NO_MATCH if isinstance(exc, NoMatchError) else common.USAGE_ERROR
    if args.print_args:
        from gpuscout._fit.command import shell_line

        if result is None:
            sys.stderr.write("gpuscout: error: --print-args needs MODEL.gguf (not --layers)\n")
            return common.USAGE_ERROR
        output().write(shell_line(result.args) + "\n")
        for note in document["notes"]:
            if "llama.cpp" in note and ("gives up" in note or "margin" in note):
                sys.stderr.write(f"gpuscout: note: {common.printable(note)}\n")
        if result.gave_up:
            return DOES_NOT_FIT  # llama-fit-params exits 1 where its fit gives up
    elif args.json:
        common.print_json(document)
    else:
        print_fit(document, devices, color=getattr(args, "color", "auto"))
    return FITS if document["fits"] else DOES_NOT_FIT


def print_fit(document: dict[str, Any], devices: list[DeviceInfo], color: str = "auto") -> None:
    """The placement for people (``gpuscout.cli._render.fit``): on a terminal (or with
    ``--color always``) fitted to its width, in a pipe plain lines."""
    from gpuscout.cli._render.fit import plain_fit
    from gpuscout.cli._render.table import _on_terminal, stdout_console, use_color

    terminal = _on_terminal()
    if not terminal and color != "always":
        output().write(plain_fit(document, devices))
        return
    from gpuscout.cli._render.fit import print_fit as draw

    draw(document, devices, stdout_console(use_color(color, terminal)))
