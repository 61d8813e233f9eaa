"""Hostile plugins in process: hangs in every hook, every kind of exception, lying records,
attempts to change the host. None of it may raise into, hang or change the host."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import pytest

from gpuscout import DeviceInfo, Scout, hookimpl
from gpuscout.errors import GpuscoutError
from gpuscout.sizes import GIB
from gpuscout.testing import ScoutFactory

CUDA_CARD = DeviceInfo(
    id="GPU-1",
    library="CUDA",
    description="Acme",
    pci_id="0000:01:00.0",
    total_memory=8 * GIB,
    free_memory=8 * GIB,
    compute_major=8,
)
RULE_HOOKS = (
    "gpuscout_minimum_memory",
    "gpuscout_flash_attention",
    "gpuscout_is_duplicate",
    "gpuscout_preferred_library",
    "gpuscout_duplicate_key",
)


class Reports:
    """Reports one fixed list of devices."""

    def __init__(self, *devices: Any) -> None:
        self.devices = list(devices)

    @hookimpl
    def gpuscout_enumerate(self, context: Any) -> Any:
        return self.devices


def status(s: Scout, name: str) -> tuple[str, str]:
    r = next(r for r in s.reports if r.name == name)
    return str(r.status), r.error


def hanging(hook: str, seconds: float = 30.0) -> Any:
    """A plugin whose ``hook`` sleeps ``seconds`` (and counts its calls)."""
    params = {
        "gpuscout_minimum_memory": "device",
        "gpuscout_flash_attention": "device",
        "gpuscout_is_duplicate": "a, b",
        "gpuscout_preferred_library": "device, other",
        "gpuscout_duplicate_key": "device",
    }[hook]
    namespace: dict[str, Any] = {"hookimpl": hookimpl, "time": time, "calls": []}
    exec(f"@hookimpl\ndef {hook}({params}):\n    calls.append(1)\n    time.sleep({seconds})\n", namespace)

    class Hangs:
        calls: list[int] = namespace["calls"]

    setattr(Hangs, hook, staticmethod(namespace[hook]))
    return Hangs()


@pytest.mark.parametrize("hook", RULE_HOOKS)
def test_a_rule_hook_that_hangs_costs_its_deadline_once_per_discovery(
    gpuscout_scout: ScoutFactory, hook: str
) -> None:
    """A hanging rule hook costs its deadline once per discovery, and is never called twice."""
    plugin = hanging(hook)
    twin = DeviceInfo(id="0", library="Vulkan", description="Acme", total_memory=8 * GIB)
    s = gpuscout_scout(
        "cuda",
        "vulkan",
        ("hang", plugin),
        ("dev", Reports(CUDA_CARD, twin)),
        env={"VK_DRIVER_FILES": "/nonexistent.json"},
        hook_timeout=0.3,
    )
    start = time.monotonic()
    for _ in range(3):
        s.discover()
        s.minimum_memory(CUDA_CARD)
        s.flash_attention_supported([CUDA_CARD, twin])
        s.preferred(CUDA_CARD, twin)
        s.compare(CUDA_CARD.evolve(pci_id=""), twin)
    assert time.monotonic() - start < 3.0
    assert status(s, "hang")[0] == "timeout" and hook in status(s, "hang")[1]
    assert len(plugin.calls) == 1


def test_a_timed_out_firstresult_hook_falls_through_to_the_next_answer(gpuscout_scout: ScoutFactory) -> None:
    """After a timeout the next plugin answers, then the core default."""
    s = gpuscout_scout(("hang", hanging("gpuscout_minimum_memory")), hook_timeout=0.2)
    assert s.minimum_memory(CUDA_CARD) == 457 * 1024 * 1024
    assert s.flash_attention(DeviceInfo(library="cpu")) is True


def test_a_hanging_visible_env_hook_is_not_waited_for(gpuscout_scout: ScoutFactory) -> None:
    """visible_env still answers from the built-ins when a third party hangs."""

    class Hangs:
        @hookimpl
        def gpuscout_visible_env(self, selection: Any, context: Any) -> Any:
            time.sleep(30)

    s = gpuscout_scout("cuda", ("hang", Hangs()), env={}, hook_timeout=0.2)
    assert s.visible_env([CUDA_CARD]) == {"CUDA_VISIBLE_DEVICES": "GPU-1"}
    assert status(s, "hang")[0] == "timeout"


def test_a_plugin_whose_enumerate_hangs_is_waited_for_not_started_again(gpuscout_scout: ScoutFactory) -> None:
    """An enumerate still hanging is waited for by the next discovery, not started twice."""
    calls: list[int] = []

    class Hangs:
        @hookimpl
        def gpuscout_enumerate(self, context: Any) -> Any:
            calls.append(1)
            time.sleep(30)

    s = gpuscout_scout(("hang", Hangs()), ("good", Reports(CUDA_CARD)), enumerate_timeout=0.3)
    for _ in range(3):
        assert [d.id for d in s.discover().devices] == ["GPU-1"]
    assert len(calls) == 1 and status(s, "hang")[0] == "timeout"


@pytest.mark.parametrize(
    "exc",
    [
        RuntimeError("boom"),
        SystemExit(3),
        KeyboardInterrupt(),
        GeneratorExit(),
        MemoryError(),
        RecursionError(),
        BaseException("base"),
        StopIteration(),
    ],
)
def test_any_exception_from_a_plugin_is_its_own_failure(
    gpuscout_scout: ScoutFactory, exc: BaseException
) -> None:
    """Every kind of exception, BaseException included, fails only the plugin that raised it."""

    class Raises:
        @hookimpl
        def gpuscout_enumerate(self, context: Any) -> Any:
            raise exc

        @hookimpl
        def gpuscout_minimum_memory(self, device: Any) -> Any:
            raise exc

    s = gpuscout_scout(("bad", Raises()), ("good", Reports(CUDA_CARD)))
    assert [d.id for d in s.discover().devices] == ["GPU-1"]
    assert s.minimum_memory(CUDA_CARD) == 457 * 1024 * 1024
    assert (
        status(s, "bad")[0] == "failed" and type(exc).__name__ in status(s, "bad")[1]
    ) or "sys.exit" in status(s, "bad")[1]


def lying(**fields: Any) -> DeviceInfo:
    """A DeviceInfo whose fields were forced past the record's own checks."""
    d = DeviceInfo(id="liar", library="Liar")
    for name, value in fields.items():
        object.__setattr__(d, name, value)
    return d


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"pci_id": 1234}, "[0].pci_id: expected str, got 1234"),
        ({"integrated": "no"}, "[0].integrated: expected bool, got 'no'"),
        ({"total_memory": -1}, "[0].total_memory: expected an int in 0..2**63-1, got -1"),
        ({"free_memory": 2**64}, "[0].free_memory: expected an int in 0..2**63-1"),
        ({"total_memory": 1.5}, "[0].total_memory: expected int, got 1.5"),
        ({"total_memory": True}, "[0].total_memory: expected int, got True"),
        ({"compute_major": "9"}, "[0].compute_major: expected int, got '9'"),
        ({"pci_id": "zz:00.0"}, "[0].pci_id: expected a PCI id like 0000:c4:00.0, got 'zz:00.0'"),
        ({"library_path": ["/x"]}, "[0].library_path: expected a sequence of str"),
        ({"library_path": ("/x", 5)}, "[0].library_path[1]: expected str, got 5"),
        ({"runner_env_overrides": {"A": 1}}, "[0].runner_env_overrides['A']: expected str, got 1"),
        ({"description": "x" * 100_000}, "[0].description: text of 100000 characters"),
        ({"library": None}, "[0].library: expected str, got None"),
    ],
)
def test_a_bad_record_fails_its_plugin_naming_the_field(
    gpuscout_scout: ScoutFactory, fields: dict[str, Any], message: str
) -> None:
    """A record with a wrong field type or range fails its plugin; other plugins' devices stay."""
    s = gpuscout_scout(("liar", Reports(lying(**fields))), ("good", Reports(CUDA_CARD)))
    found = s.discover()
    assert [d.id for d in found.devices] == ["GPU-1"]
    state, error = status(s, "liar")
    assert state == "failed" and message in error


@pytest.mark.parametrize("answer", [None, "devices", {"a": 1}, [CUDA_CARD, "x"], 7])
def test_an_enumerate_answer_that_is_not_a_list_of_records_fails_the_plugin(
    gpuscout_scout: ScoutFactory, answer: Any
) -> None:
    """Anything but a list of DeviceInfo is a failure (None included)."""
    s = gpuscout_scout(("bad", Reports()), ("good", Reports(CUDA_CARD)))
    s.plugin_manager.get_plugin("bad").devices = answer
    assert [d.id for d in s.discover().devices] == ["GPU-1"]
    assert status(s, "bad")[0] == "failed"


def test_a_record_subclass_is_copied_into_a_plain_record(gpuscout_scout: ScoutFactory) -> None:
    """A DeviceInfo subclass that lies through a property reaches the host as plain values."""

    class Shifty(DeviceInfo):
        @property
        def compute(self) -> str:
            raise RuntimeError("gotcha")

    s = gpuscout_scout(("shifty", Reports(Shifty(id="s", library="Odd"))))
    [device] = s.discover().devices
    assert type(device) is DeviceInfo and device.compute == "0.0"


def test_a_plugin_cannot_change_the_environment_of_the_host_or_others(gpuscout_scout: ScoutFactory) -> None:
    """Writes to context.env fail; Scout.env, other plugins and visible_env see the original."""
    seen: list[dict[str, str]] = []

    class Writer:
        @hookimpl
        def gpuscout_enumerate(self, context: Any) -> Any:
            context.env["CUDA_VISIBLE_DEVICES"] = "hijacked"
            return []

    class Reader:
        @hookimpl
        def gpuscout_enumerate(self, context: Any) -> Any:
            seen.append(dict(context.env))
            return [CUDA_CARD]

    env = {"KEEP": "1"}
    s = gpuscout_scout(("writer", Writer()), ("reader", Reader()), "cuda", env=env)
    found = s.discover()
    assert status(s, "writer")[0] == "failed"
    assert seen == [{"KEEP": "1"}] and dict(s.env) == {"KEEP": "1"} and env == {"KEEP": "1"}
    assert s.visible_env(found.devices) == {"CUDA_VISIBLE_DEVICES": "GPU-1"}
    with pytest.raises(TypeError):
        s.env["X"] = "1"  # type: ignore[index]


def test_a_plugin_cannot_change_a_record_or_a_selection_it_is_handed(gpuscout_scout: ScoutFactory) -> None:
    """runner_env_overrides and the selection a hook receives are read-only."""

    class Meddler:
        @hookimpl
        def gpuscout_visible_env(self, selection: Any, context: Any) -> Any:
            selection[0].runner_env_overrides["EVIL"] = "1"

        @hookimpl
        def gpuscout_isolate_env(self, selection: Any, env: Any, context: Any) -> Any:
            env["EVIL"] = "1"

    card = CUDA_CARD.evolve(runner_env_overrides={"GOOD": "1"})
    s = gpuscout_scout("cuda", ("meddler", Meddler()), env={})
    assert s.visible_env([card]) == {"CUDA_VISIBLE_DEVICES": "GPU-1", "GOOD": "1"}
    assert dict(card.runner_env_overrides) == {"GOOD": "1"}
    assert s.isolate_env([card], {"A": "1"}) == []
    assert status(s, "meddler")[0] == "failed"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"plugins": "cuda"}, "not the string 'cuda'"),
        ({"disable": "cuda"}, "not the string 'cuda'"),
        ({"plugins": [1]}, "plugin names must be str"),
        ({"enumerate_timeout": float("nan")}, "finite and > 0"),
        ({"enumerate_timeout": float("inf")}, "finite and > 0"),
        ({"hook_timeout": 0}, "finite and > 0"),
        ({"hook_timeout": -1}, "finite and > 0"),
        ({"hook_timeout": "1"}, "a number of seconds"),
        ({"enumerate_timeout": True}, "a number of seconds"),
        ({"env": {"A": 1}}, "env must map str to str"),
        ({"env": ["A"]}, "env must be a mapping"),
        ({"root": 5}, "root must be a path"),
        ({"root": "/tmp\x00x"}, "without NUL"),
        ({"plugins": ["nosuch"]}, "unknown plugin 'nosuch' in the allow list"),
        ({"env": {"GPUSCOUT_PLUGINS": "cuda,nosuch"}}, "GPUSCOUT_PLUGINS"),
        ({"extra": 5}, "extra must be a list"),
    ],
)
def test_bad_scout_arguments_raise_a_gpuscout_error(kwargs: dict[str, Any], message: str) -> None:
    """Only GpuscoutError, with a message naming the argument, for bad Scout arguments."""
    with pytest.raises(GpuscoutError, match=None) as info:
        Scout(entry_points=False, **kwargs)
    assert message in str(info.value)


def test_an_unknown_name_in_a_deny_list_is_a_warning() -> None:
    """A deny list may name plugins this machine lacks: one warning, the run goes on."""
    s = Scout(entry_points=False, disable=["nosuch"], env={"GPUSCOUT_DISABLE_PLUGINS": "other"})
    assert len(s.warnings) == 2 and all("known plugins: cuda, metal, rocm, vulkan" in w for w in s.warnings)


def test_a_missing_root_is_a_machine_with_nothing_under_it(
    gpuscout_scout: ScoutFactory, tmp_path: Any
) -> None:
    """Scout(root=...) accepts a folder that does not exist; plugins find nothing there."""
    found = gpuscout_scout("rocm", env={}, root=os.fspath(tmp_path / "nowhere")).discover()
    assert found.devices == [] and found.system.total_memory == 0


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.visible_env("GPU-1"),
        lambda s: s.visible_env([1]),
        lambda s: s.minimum_memory(None),
        lambda s: s.flash_attention_supported([object()]),
        lambda s: s.compare(CUDA_CARD, "x"),
        lambda s: s.refresh(5),
    ],
)
def test_bad_arguments_to_rule_methods_raise_a_gpuscout_error(
    gpuscout_scout: ScoutFactory, call: Callable[[Scout], Any]
) -> None:
    """The rule methods refuse what is not a DeviceInfo with a GpuscoutError."""
    with pytest.raises(GpuscoutError):
        call(gpuscout_scout())


def test_a_hook_wrapper_is_refused_rather_than_dropped(gpuscout_scout: ScoutFactory) -> None:
    """gpuscout calls implementations one by one, so a wrapper fails its plugin, visibly."""

    class Wraps:
        @hookimpl(wrapper=True)
        def gpuscout_minimum_memory(self, device: Any) -> Any:
            return (yield)

    s = gpuscout_scout(("wraps", Wraps()))
    assert status(s, "wraps")[0] == "failed" and "wrapper" in status(s, "wraps")[1]


def test_a_plugin_that_answers_many_devices_is_merged(gpuscout_scout: ScoutFactory) -> None:
    """Thousands of records from one plugin are all checked, merged and ranked."""
    devices = [
        DeviceInfo(
            id=f"d{i}",
            library="Many",
            description="Acme GPU",
            total_memory=7 * GIB,
            free_memory=GIB * (1 + i % 7),
        )
        for i in range(3000)
    ]
    s = gpuscout_scout("vulkan", ("many", Reports(*devices)), env={"VK_DRIVER_FILES": "/nonexistent.json"})
    found = s.discover()
    assert len(found.devices) == 3000 and found.devices[0].free_memory == 7 * GIB


def test_a_slow_rule_hook_costs_at_most_one_total_over_many_devices(gpuscout_scout: ScoutFactory) -> None:
    """A hook that stays just under the per-call limit is cut off by the batch total."""

    class Slow:
        @hookimpl
        def gpuscout_duplicate_key(self, device: Any) -> Any:
            time.sleep(0.25)

        @hookimpl
        def gpuscout_is_duplicate(self, a: Any, b: Any) -> Any:
            return None

    devices = [DeviceInfo(id=f"d{i}", library="Many") for i in range(40)]
    s = gpuscout_scout(("slow", Slow()), ("many", Reports(*devices)), hook_timeout=0.3, enumerate_timeout=1.0)
    start = time.monotonic()
    assert len(s.discover().devices) == 40
    assert time.monotonic() - start < 3.0
    assert status(s, "slow")[0] == "timeout" and "40 calls" in status(s, "slow")[1]


@pytest.mark.parametrize(
    "device",
    [
        CUDA_CARD.evolve(id="GPU-\x00"),
        CUDA_CARD.evolve(runner_env_overrides={"A=B": "1"}),
        CUDA_CARD.evolve(runner_env_overrides={"": "1"}),
        CUDA_CARD.evolve(runner_env_overrides={"OK": "nul\x00"}),
    ],
)
def test_visible_env_refuses_what_no_environment_can_hold(
    gpuscout_scout: ScoutFactory, device: DeviceInfo
) -> None:
    """A NUL, an empty name or '=' in a name is a GpuscoutError naming the variable."""
    s = gpuscout_scout("cuda", env={})
    with pytest.raises(GpuscoutError, match="visible_env: variable"):
        s.visible_env([device])
