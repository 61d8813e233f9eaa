"""The human tables against hostile text and numbers: what a plugin or device says is printed
literally (never read as rich markup), and no size is too large to print."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import pytest
from rich.console import Console

from gpuscout import DeviceInfo, PluginReport, Scout
from gpuscout.cli import main
from gpuscout.cli._render import table
from gpuscout.cli._render.labels import memory_bar, memory_label
from gpuscout.cli._render.table import print_discovery, print_plugins
from gpuscout.sizes import GIB, human_bytes

#: The ``machine`` fixture: devices (and an environment) in, a Scout factory for ``main`` out.
Machine = Callable[..., Callable[[Any], Scout]]

MARKUP = ["[/beta]", "[link=https://x]y[/link]", "[bold red]loud[/]", ":thumbs_up:"]


def render(print_fn: Callable[..., None], what: Any) -> str:
    """What ``print_fn`` writes for ``what`` on a wide console that records hyperlinks."""
    buf = io.StringIO()
    console = Console(file=buf, width=300, force_terminal=True, color_system="truecolor")
    print_fn(what, console=console)
    return buf.getvalue()


def listing(
    machine: Machine,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    *devices: DeviceInfo,
) -> str:
    """The output of ``gpuscout list`` over ``devices``, on a terminal (the rich table)."""
    monkeypatch.setattr(table, "_on_terminal", lambda: True)
    monkeypatch.setenv("COLUMNS", "300")
    monkeypatch.setenv("NO_COLOR", "1")
    factory = machine(list(devices))
    assert main(["list"], scout_factory=factory) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("text", MARKUP)
def test_markup_in_a_device_description_prints_literally(
    machine: Machine, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    """A description holding rich markup is shown as written."""
    out = listing(
        machine, capsys, monkeypatch, DeviceInfo(id="0", library="Vulkan", description=f"card {text}")
    )
    assert f"card {text}" in out


@pytest.mark.parametrize("field", ["id", "library", "name"])
def test_a_closing_tag_in_any_device_field_does_not_break_the_table(
    machine: Machine, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, field: str
) -> None:
    """`[/beta]` in an id, library or name is printed, not a MarkupError."""
    fields: dict[str, Any] = {"id": "0", "library": "Vulkan", field: "x[/beta]"}
    device = DeviceInfo(**fields)
    assert "x[/beta]" in listing(machine, capsys, monkeypatch, device)


def test_a_link_in_a_description_is_not_a_hyperlink() -> None:
    """`[link=...]` text gives no terminal hyperlink escape, even on a terminal that has them."""
    found = _discovery(DeviceInfo(id="0", library="Vulkan", description="[link=https://x]y[/link]"))
    out = render(print_discovery, found)
    assert "\x1b]8;" not in out and "[link=https://x]y[/link]" in out


def test_the_memory_bar_is_shown(
    machine: Machine, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bar's brackets survive: a half-used card shows `[#####-----]` beside `4.0/8.0 GiB`."""
    out = listing(
        machine,
        capsys,
        monkeypatch,
        DeviceInfo(id="0", library="Vulkan", total_memory=8 * GIB, free_memory=4 * GIB),
    )
    assert "4.0/8.0 GiB  [#####-----]" in out


def test_control_characters_in_a_name_are_shown_escaped() -> None:
    """An escape sequence or line break from a device reaches the terminal as text."""
    found = _discovery(DeviceInfo(id="0", library="Vulkan", description="a\x1b[2Jb\nc"))
    out = render(print_discovery, found)
    assert "\x1b[2J" not in out and "a\\x1b[2Jb\\nc" in out


def test_a_dropped_device_with_markup_prints_literally() -> None:
    """The `dropped:` lines show a device's text and the reason as written."""
    from gpuscout import Dropped

    device = DeviceInfo(id="[/x]", library="Vulkan", description="[bold]d[/bold]")
    found = _discovery(dropped=[Dropped(device=device, reason="because [/beta]")])
    out = render(print_discovery, found)
    assert "dropped: Vulkan [/x] [bold]d[/bold] (because [/beta])" in out


def test_markup_in_a_plugin_report_prints_literally() -> None:
    """A plugin's name, version, distribution and error are shown as written."""
    report = PluginReport(
        name="p[/a]", version="[/b]", distribution="[link=https://x]d[/link]", error="boom [/c] :thumbs_up:"
    )
    out = render(print_plugins, [report])
    for text in ("p[/a]", "[/b]", "[link=https://x]d[/link]", "boom [/c] :thumbs_up:"):
        assert text in out
    assert "\x1b]8;" not in out


@pytest.mark.parametrize("total", [2**63, 10**19, 2**64 - 1])
def test_a_huge_memory_size_prints(total: int) -> None:
    """A total memory far beyond any real card still makes a table row."""
    found = _discovery(DeviceInfo(id="0", library="Vulkan", total_memory=total, free_memory=total))
    out = render(print_discovery, found)
    device = found.devices[0]
    assert memory_label(device) in out and "[----------]" in out
    assert memory_label(device) == f"{human_bytes(total).split()[0]}/{human_bytes(total)}"


@pytest.mark.parametrize(
    ("n", "shown"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (1536, "1.5 KiB"),
        (1024**2 - 1, "1.0 MiB"),
        (24 * GIB, "24.0 GiB"),
        (2**63, "8.0 EiB"),
        (10**30, "827180.6 YiB"),
        (1024**8, "1.0 YiB"),
        (10**400 * 1024**8, f"{10**400}.0 YiB"),
    ],
    ids=lambda v: str(v)[:12] if isinstance(v, int) else None,
)
def test_human_bytes_keeps_scaling_units(n: int, shown: str) -> None:
    """Sizes use B up to YiB; beyond that the YiB figure grows, exactly."""
    assert human_bytes(n) == shown


def test_memory_bar_handles_free_above_total() -> None:
    """A device reporting more free than total memory shows an empty bar, not a negative one."""
    assert memory_bar(10**30, 2**63) == "[----------]"


def _discovery(*devices: DeviceInfo, dropped: list[Any] | None = None) -> Any:
    from gpuscout import Discovery, SystemInfo

    return Discovery(
        devices=list(devices), dropped=dropped or [], system=SystemInfo(), plugins=[], elapsed=0.0
    )
