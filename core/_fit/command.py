"""The llama.cpp command line of a fit decision (``FitResult.args``), and merging it into a
command the user wrote (``gpuscout exec --fit``).

The fitted part is written as ``llama-fit-params`` prints it (``tools/fit-params/fit-params.cpp``):
``-c N -ngl N``, ``-ts`` with one whole layer count per device when more than one device is left
after dropping trailing zeros (a trailing device that only an override names keeps its 0),
``-ot`` with every override as ``PATTERN=BUFFER`` joined by commas (the buffer ``CPU`` or a
device's name). Then what makes llama.cpp run exactly that: ``-dev`` with
ggml's device names (``none`` for the CPU alone), ``-fa``, the cache types, ``-np``, ``-ub``,
``-b``, ``--mmproj``/``-md`` when given, and ``-fit off`` so that llama.cpp does not decide again.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Sequence

import attrs

from gpuscout._fit import estimate as est
from gpuscout._fit.usage import Usage
from gpuscout._records.device import DeviceInfo


@attrs.frozen
class Launch:
    """A decision and the options it was made under."""

    n_ctx: int
    n_gpu_layers: int
    tensor_split: tuple[float, ...]
    overrides: tuple[tuple[str, int | None], ...]
    names: tuple[str, ...]
    flash_attn: bool
    options: est.Options
    mmproj: str | None = None
    model_draft: str | None = None
    #: ``-sm``: ``row`` is written out (``layer``, the default, and ``none``, whose one device
    #: ``-dev`` names, need nothing).
    split_mode: str = "layer"


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def arguments(launch: Launch) -> tuple[list[str], tuple[str, ...]]:
    """The argument list, and the ggml names ``-dev`` uses."""
    args = ["-c", str(launch.n_ctx), "-ngl", str(launch.n_gpu_layers)]
    split = list(launch.tensor_split[: len(launch.names)])
    while len(split) > 1 and split[-1] == 0.0:
        split.pop()
    used = launch.names
    if launch.tensor_split and len(launch.names) > 1:
        # Devices after the last one with a share hold nothing; llama.cpp is not given them,
        # unless an override sends tensors there (a partial layer's overflow to the next device).
        named = max((t + 1 for _, t in launch.overrides if t is not None), default=0)
        used = launch.names[: max(len(split), 1, named)]
        if len(used) > len(split) > 0:
            # Their share written out (0), or llama.cpp would split the layers by free memory.
            split += [0.0] * (len(used) - len(split))
    if len(split) > 1:
        args += ["-ts", ",".join(_number(x) for x in split)]
    if launch.split_mode == "row":
        args += ["-sm", "row"]
    if launch.overrides:
        args += [
            "-ot",
            ",".join(f"{p}={'CPU' if t is None else launch.names[t]}" for p, t in launch.overrides),
        ]
    args += ["-dev", ",".join(used) if used else "none"]
    o = launch.options
    args += ["-fa", "on" if launch.flash_attn else "off", "-ctk", o.cache_type_k, "-ctv", o.cache_type_v]
    args += ["-np", str(o.parallel), "-ub", str(o.ubatch_size), "-b", str(o.batch_size)]
    if o.swa_full:
        args.append("--swa-full")
    if not o.kv_offload:
        args.append("-nkvo")
    if launch.mmproj:
        args += ["--mmproj", launch.mmproj]
    if launch.model_draft:
        args += ["-md", launch.model_draft]
    args += ["-fit", "off"]
    return args, used


def shell_line(args: Sequence[str]) -> str:
    """``args`` as one line a POSIX shell reads back as the same list."""
    return " ".join(shlex.quote(a) for a in args)


#: llama.cpp's spellings of each option ``arguments`` writes, so a flag the user wrote wins.
SPELLINGS: dict[str, tuple[str, ...]] = {
    "-c": ("-c", "--ctx-size"),
    "-ngl": ("-ngl", "--gpu-layers", "--n-gpu-layers"),
    "-ts": ("-ts", "--tensor-split"),
    "-sm": ("-sm", "--split-mode"),
    "-ot": ("-ot", "--override-tensor"),
    "-dev": ("-dev", "--device"),
    "-fa": ("-fa", "--flash-attn"),
    "-ctk": ("-ctk", "--cache-type-k"),
    "-ctv": ("-ctv", "--cache-type-v"),
    "-np": ("-np", "--parallel"),
    "-ub": ("-ub", "--ubatch-size"),
    "-b": ("-b", "--batch-size"),
    "--swa-full": ("--swa-full",),
    "-nkvo": ("-nkvo", "--no-kv-offload"),
    "--mmproj": ("-mm", "--mmproj"),
    "-md": ("-md", "--model-draft"),
    "-fit": ("-fit", "--fit"),
}
_FLAGS = {"--swa-full", "-nkvo"}


#: Programs whose ``-c SCRIPT`` takes the words after the script as the script's arguments:
#: POSIX shells (the first of them is the script's $0) and Python (``sys.argv[1:]``).
SHELLS = frozenset({"sh", "ash", "dash", "bash", "ksh", "mksh", "zsh", "busybox"})
_PYTHON = re.compile(r"python(\d+(\.\d+)?)?")
_C_CLUSTER = re.compile(r"-[A-Za-z]*c[A-Za-z]*")


def _script_arguments(command: Sequence[str]) -> tuple[list[str], list[str]] | None:
    """For ``sh -c SCRIPT [NAME [ARG...]]`` (and ``python -c``): the command up to the script's
    arguments, and those arguments (what the script sees as "$@" or sys.argv[1:]); None for
    any other command. A shell without NAME gets its own name as $0, so that the first
    argument appended is $1, not $0."""
    if not command:
        return None
    program = os.path.basename(command[0])
    shell = program in SHELLS
    if not shell and not _PYTHON.fullmatch(program):
        return None
    for i, word in enumerate(command[1:], start=1):
        if word == "--" or not word.startswith("-"):
            return None  # a script file, not -c: its own arguments follow, as for any program
        if (word == "-c" or (shell and _C_CLUSTER.fullmatch(word))) and i + 1 < len(command):
            head = list(command[: i + 2])
            rest = list(command[i + 2 :])
            if shell:
                if not rest:
                    rest = [program]
                head, rest = head + rest[:1], rest[1:]
            return head, rest
    return None


def merge(command: Sequence[str], args: Sequence[str]) -> tuple[list[str], list[str]]:
    """``command`` with ``args`` appended, less each option ``command`` already gives (in any
    of llama.cpp's spellings, ``--opt=value`` included): returns the command and the options
    the user's spelling won for. For ``sh -c SCRIPT`` or ``python -c SCRIPT`` only the words
    after the script (its arguments, where ``args`` land) count as given: the ``-c`` is the
    interpreter's."""
    split = _script_arguments(command)
    head, own = split if split is not None else ([], list(command))
    given: set[str] = set()
    for word in own:
        given.add(word.split("=", 1)[0])
    out = head + own
    kept: list[str] = []
    i = 0
    while i < len(args):
        option = args[i]
        width = 1 if option in _FLAGS else 2
        spellings = SPELLINGS.get(option, (option,))
        if any(s in given for s in spellings):
            kept.append(option)
        else:
            out += args[i : i + width]
        i += width
    return out, kept


def fit_devices(candidates: Sequence[DeviceInfo], usage: Sequence[Usage]) -> list[DeviceInfo]:
    """The devices among ``candidates`` that a decision's environment shows a child: those its
    ``usage`` names (every device ggml was given, in ggml's order), the CPU left out."""
    out: list[DeviceInfo] = []
    for u in usage:
        for d in candidates:
            if d.library == u.library and d.id == u.id and d not in out:
                out.append(d)
                break
    return out


__all__ = ["SPELLINGS", "Launch", "arguments", "fit_devices", "merge", "shell_line"]
