"""The llama.cpp command of a fit decision: ``-dev`` names every device the decision puts
anything on, and ``-ts`` pins the layers whenever more than one device is given."""

from __future__ import annotations

from gpuscout._fit import estimate as est
from gpuscout._fit.command import Launch, arguments

NAMES = ("Vulkan0", "Vulkan1", "Vulkan2")


def _launch(split: tuple[float, ...], overrides: tuple[tuple[str, int | None], ...] = ()) -> Launch:
    return Launch(
        n_ctx=4096,
        n_gpu_layers=5,
        tensor_split=split,
        overrides=overrides,
        names=NAMES,
        flash_attn=True,
        options=est.Options(),
    )


def _value(args: list[str], flag: str) -> str | None:
    return args[args.index(flag) + 1] if flag in args else None


def test_trailing_devices_that_hold_nothing_are_not_given() -> None:
    """Devices after the last one with layers hold nothing: llama.cpp is not given them."""
    args, used = arguments(_launch((3.0, 2.0, 0.0)))
    assert used == ("Vulkan0", "Vulkan1") and _value(args, "-dev") == "Vulkan0,Vulkan1"
    assert _value(args, "-ts") == "3,2"
    args, used = arguments(_launch((5.0, 0.0, 0.0)))
    assert used == ("Vulkan0",) and _value(args, "-ts") is None


def test_a_device_only_an_override_names_is_given_with_its_zero_share() -> None:
    """An override that sends a tensor to a device holding no layer (a partial layer's overflow)
    keeps that device in -dev, and -ts writes the zero shares out: without the device llama.cpp
    refuses the buffer name, and without -ts it would spread the layers by free memory
    (random-004-qwen3moe-3dev: -ts 5,0,0 with blk.0's ffn_down on Vulkan1, blk.4's on Vulkan2)."""
    args, used = arguments(_launch((5.0, 0.0, 0.0), ((r"blk\.0\.ffn_down.*", 1), (r"blk\.4\.ffn_down.*", 2))))
    assert used == NAMES and _value(args, "-dev") == "Vulkan0,Vulkan1,Vulkan2"
    assert _value(args, "-ts") == "5,0,0"
    assert _value(args, "-ot") == r"blk\.0\.ffn_down.*=Vulkan1,blk\.4\.ffn_down.*=Vulkan2"
    args, used = arguments(_launch((5.0, 0.0, 0.0), ((r"blk\.0\.ffn_down.*", 1), (r"exps", None))))
    assert used == ("Vulkan0", "Vulkan1") and _value(args, "-ts") == "5,0"
