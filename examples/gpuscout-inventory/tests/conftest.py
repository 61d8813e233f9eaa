"""Fixtures: inventory files in a temporary folder and a Scout that holds only this plugin."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

import gpuscout_inventory
from gpuscout import Scout
from gpuscout.sizes import GIB


def _toml_text(devices: list[dict[str, Any]]) -> str:
    """``devices`` as a TOML inventory (strings, numbers and booleans only, plus one table)."""
    lines: list[str] = []
    for device in devices:
        lines.append("[[devices]]")
        tables: list[str] = []
        for key, value in device.items():
            if isinstance(value, dict):
                tables.append(f"[devices.{key}]")
                tables.extend(f"{k} = {json.dumps(v)}" for k, v in value.items())
            else:
                lines.append(f"{key} = {json.dumps(value)}")
        lines.extend(tables)
        lines.append("")
    return "\n".join(lines)


@pytest.fixture
def toml_text() -> Callable[[list[dict[str, Any]]], str]:
    """Devices as TOML inventory text."""
    return _toml_text


@pytest.fixture
def inventory_file(tmp_path: Path) -> Callable[..., Path]:
    """Write ``devices`` (or raw ``text``) as ``name`` in tmp_path; the suffix picks the format."""

    def write(
        devices: list[dict[str, Any]] | None = None, name: str = "inventory.json", text: str | None = None
    ) -> Path:
        path = tmp_path / name
        if text is None:
            items = devices or []
            text = _toml_text(items) if name.endswith(".toml") else json.dumps({"devices": items})
        path.write_text(text, encoding="utf-8")
        return path

    return write


@pytest.fixture
def scout() -> Callable[..., Scout]:
    """A Scout holding only this plugin, seeing only the environment given."""

    def build(env: Mapping[str, str] | None = None, **options: Any) -> Scout:
        return Scout(
            plugins=["inventory"],
            extra=[("inventory", gpuscout_inventory)],
            entry_points=False,
            env=dict(env or {}),
            **options,
        )

    return build


@pytest.fixture
def two_cards() -> list[dict[str, Any]]:
    """A discrete card with rules and an integrated one with a PCI id and a filter id."""
    return [
        {
            "name": "Big card",
            "total_memory": "24GiB",
            "free_memory": "20GiB",
            "flash_attention": True,
            "minimum_memory": "1GiB",
            "compute_major": 8,
        },
        {
            "id": "igpu",
            "filter_id": "ig0",
            "name": "Small part",
            "integrated": True,
            "pci_id": "0000:c4:00.0",
            "total_memory": 8 * GIB,
            "free_memory": 6 * GIB,
        },
    ]
