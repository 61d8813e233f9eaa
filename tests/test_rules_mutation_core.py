"""Rules of the core that the mutation run (scripts/mutate.py) found no test stating."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from gpuscout import DeviceInfo, Scout, SystemInfo
from gpuscout._discovery.merge import merge
from gpuscout._discovery.ranking import library_paths, rank
from gpuscout._layout.plan import create_layout, usable_free
from gpuscout._records.memory import BackendMemory, DeviceMemory
from gpuscout._selection.selectors import NoMatchError, select_devices
from gpuscout.load import layer_sizes
from gpuscout.sizes import GIB, MIB, human_bytes


class NoReserve:
    """A Scout's reserve of nothing."""

    def minimum_memory(self, device: DeviceInfo) -> int:
        return 0


def card(n: int, **kw: object) -> DeviceInfo:
    fields: dict[str, object] = {
        "id": f"GPU-{n}",
        "library": "CUDA",
        "name": f"Card {n}",
        "total_memory": 24 * GIB,
        "free_memory": 20 * GIB,
    }
    return DeviceInfo(**{**fields, **kw})  # type: ignore[arg-type]


def test_a_visible_report_of_a_card_beats_a_hidden_one_from_the_same_library() -> None:
    """SAME_BACKEND: of two reports of one card by one library, the visible one survives."""
    pci = "0000:01:00.0"
    hidden = card(0, pci_id=pci, hidden_by="CUDA_VISIBLE_DEVICES=1")
    visible = card(0, pci_id=pci)
    kept, _ = merge([("cuda", hidden), ("cuda", visible)], None, lambda a, b: False)
    assert kept == [visible]


def test_ranking_orders_by_free_memory_not_total_memory() -> None:
    """Of two discrete GPUs the one with more free memory ranks first, whatever their totals."""
    big_but_busy = card(0, total_memory=80 * GIB, free_memory=10 * GIB)
    small_but_idle = card(1, total_memory=24 * GIB, free_memory=20 * GIB)
    assert rank([big_but_busy, small_but_idle]) == [small_but_idle, big_but_busy]


def test_library_paths_keep_each_device_s_order() -> None:
    """The seed's LibraryPaths: base, then each device's paths in the order it lists them."""
    d = card(0, library_path=("/lib/ollama/cuda_v12", "/lib/ollama"))
    assert library_paths([d], ["/base"]) == ["/base", "/lib/ollama/cuda_v12", "/lib/ollama"]


def test_usable_free_memory_is_zero_when_the_reserve_exceeds_it() -> None:
    """A GPU whose reserve is more than its free memory has 0 bytes for layers, never less."""
    assert usable_free(100 * MIB, 0.0, 457 * MIB, 0, 0) == 0


def test_spread_places_layers_on_discrete_and_integrated_gpus_alike() -> None:
    """With spread the planner treats every GPU as one performance group, so an integrated GPU
    takes layers even when the discrete one could hold them all (assignLayers)."""
    discrete = card(0, free_memory=4 * GIB)
    integrated = card(1, free_memory=4 * GIB, integrated=True)
    layout = create_layout([100 * MIB] * 4, [discrete, integrated], lambda d: 0, spread=True)
    assert {g.id for g in layout} == {"GPU-0", "GPU-1"}


def test_a_layer_s_size_is_its_weights_and_cache_on_every_device() -> None:
    """layer_sizes adds each layer's cache to its weights, on the CPU and on each GPU."""
    memory = BackendMemory(
        cpu=DeviceMemory(library="cpu", weights=[10, 0], cache=[1, 0]),
        gpus=[DeviceMemory(id="GPU-0", library="CUDA", weights=[0, 20], cache=[0, 2])],
    )
    assert layer_sizes(memory) == [11, 22]


def test_fits_never_selects_a_device_whose_free_memory_is_unknown() -> None:
    """``fits:`` does not trust a free figure that is a stand-in (free_memory_unknown)."""
    unknown = card(0, free_memory=20 * GIB, free_memory_unknown=True)
    with pytest.raises(NoMatchError):
        select_devices(NoReserve(), [unknown], "fits:1GiB")


def test_a_union_of_selectors_comes_in_rank_order() -> None:
    """``9,1`` over ten devices gives rank 1 then rank 9, not the order they were named."""
    devices = [card(n) for n in range(10)]
    assert select_devices(NoReserve(), devices, "9,1") == [devices[1], devices[9]]


def tiny_model(path: Path) -> Path:
    """A one-block llama GGUF of a few kB."""
    gguf = pytest.importorskip("gguf")
    np = pytest.importorskip("numpy")
    w = gguf.GGUFWriter(str(path), "llama")
    for key, value in (
        ("block_count", 1),
        ("context_length", 512),
        ("embedding_length", 64),
        ("attention.head_count", 4),
    ):
        w.add_uint32(f"llama.{key}", value)
    w.add_tensor("token_embd.weight", np.ones((16, 64), dtype=np.float32))
    w.add_tensor("blk.0.attn_q.weight", np.ones((64, 64), dtype=np.float16))
    w.add_tensor("output.weight", np.ones((16, 64), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_the_micro_batch_is_never_larger_than_the_batch(tmp_path: Path) -> None:
    """llama_context: n_ubatch = min(n_batch, ubatch), so --batch-size 64 caps it at 64."""
    scout = Scout(plugins=["cuda"], entry_points=False)
    result = scout.fit(
        tiny_model(tmp_path / "m.gguf"),
        devices=[],
        system=SystemInfo(64 * GIB, 64 * GIB),
        ctx=256,
        batch_size=64,
        ubatch_size=512,
        cpu_features=(),
    )
    assert result.context.n_batch == 64 and result.context.n_ubatch == 64


def test_a_gpu_s_share_must_fit_in_its_free_memory_less_its_reserve(tmp_path: Path) -> None:
    """A GPU whose free memory holds its share only by eating into the reserve does not fit, and
    the note says how much was free after the reserve."""
    scout = Scout(plugins=["cuda"], entry_points=False)
    model = tiny_model(tmp_path / "m.gguf")
    system = SystemInfo(64 * GIB, 64 * GIB)
    roomy = scout.fit(model, devices=[card(0)], system=system, ctx=256, num_gpu=99, cpu_features=())
    share = roomy.usage[0].total
    reserve = scout.minimum_memory(card(0))
    assert roomy.fits and 0 < share < reserve
    tight = card(0, free_memory=reserve + share // 2)
    result = scout.fit(model, devices=[tight], system=system, ctx=256, num_gpu=99, cpu_features=())
    assert 0 < result.usage[0].total < tight.free_memory  # it would fit without the reserve
    assert not result.fits and any("after its reserve" in n for n in result.notes)


class Isolating:
    """A Scout whose one plugin ``rocm`` hides its devices with the given values."""

    def __init__(self, hide: dict[str, str]) -> None:
        self.hide = hide

    def visible_env(self, devices: object) -> dict[str, str]:
        return {}

    def isolate_env(self, devices: object, env: object) -> list[tuple[str, dict[str, str]]]:
        return [("rocm", dict(self.hide))]


def test_isolation_never_overwrites_a_variable_the_selection_sets() -> None:
    """The selection's CUDA_VISIBLE_DEVICES stays; the plugin that wanted it says so in a note."""
    from gpuscout._selection.visibility import isolation_env

    out = isolation_env(Isolating({"CUDA_VISIBLE_DEVICES": "-1"}), [], {"CUDA_VISIBLE_DEVICES": "0"})
    assert out.env == {"CUDA_VISIBLE_DEVICES": "0"}
    assert len(out.notes) == 1 and "rocm" in out.notes[0]


def test_isolation_that_agrees_with_the_selection_is_no_conflict() -> None:
    """A hide value equal to what the selection already sets adds no note."""
    from gpuscout._selection.visibility import isolation_env

    out = isolation_env(Isolating({"HIP_VISIBLE_DEVICES": "0"}), [], {"HIP_VISIBLE_DEVICES": "0"})
    assert out.env == {"HIP_VISIBLE_DEVICES": "0"} and out.notes == ()


def test_a_selection_without_isolate_hides_no_other_vendor() -> None:
    """selection_env adds the plugins' hide values only when asked to isolate."""
    from gpuscout._selection.visibility import selection_env

    scout = Isolating({"HIP_VISIBLE_DEVICES": "-1"})
    assert selection_env(scout, []).env == {}
    assert selection_env(scout, [], isolate=True).env == {"HIP_VISIBLE_DEVICES": "-1"}


def test_the_border_refuses_a_size_that_int64_cannot_hold() -> None:
    """The wire format is Go's int64: a plugin's 2**63-byte card is refused, 2**63-1 is kept."""
    from gpuscout._records.device import check_device
    from gpuscout._records.fields import RecordError

    assert check_device(card(0, total_memory=2**63 - 1)).total_memory == 2**63 - 1
    with pytest.raises(RecordError, match="total_memory"):
        check_device(card(0, total_memory=2**63))


def test_the_border_refuses_a_pci_id_with_trailing_text() -> None:
    """``0000:01:00.0x`` is no PCI id: the whole text must be one."""
    from gpuscout._records.device import check_device
    from gpuscout._records.fields import RecordError

    with pytest.raises(RecordError, match="pci_id"):
        check_device(card(0, pci_id="0000:01:00.0x"))


def test_a_bool_is_no_byte_count() -> None:
    """``is_size``: True is an int to Python but not a size of 1 byte."""
    from gpuscout._records.device import is_size

    assert is_size(1) and not is_size(True)


def test_a_file_read_in_short_chunks_is_still_refused_past_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """sysfs and procfs answer a page per read: a file over MAX_READ_BYTES read that way is
    refused with a note, never returned cut at the limit."""
    import os

    from gpuscout._machine.context import MAX_READ_BYTES, Context

    (tmp_path / "big").write_bytes(b"7" * (MAX_READ_BYTES + 1))
    real_read = os.read
    monkeypatch.setattr(os, "read", lambda fd, n: real_read(fd, min(n, 4096)))
    ctx = Context(env={}, platform="linux", root=str(tmp_path))
    assert ctx.read_text("/big") is None
    assert ctx.notes == [f"/big: larger than {human_bytes(MAX_READ_BYTES)}; not read"]


def test_an_allowed_word_reads_as_no_number_without_a_note(tmp_path: Path) -> None:
    """cgroup's ``max`` in a limit file is no number and no garbage: None, and nothing noted."""
    from gpuscout._machine.context import Context

    (tmp_path / "memory.max").write_text("max\n")
    ctx = Context(env={}, platform="linux", root=str(tmp_path))
    assert ctx.read_u64("/memory.max", allow=("max",)) is None and ctx.notes == []
    assert ctx.read_u64("/memory.max") is None and len(ctx.notes) == 1


def test_a_reply_cut_short_of_its_content_length_is_an_error() -> None:
    """A runner that closes after 4 of 5 announced body bytes gave no reply."""
    from gpuscout.runner._reply import RunnerError, parse_whole_reply

    head = b"HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\n"
    assert parse_whole_reply(head + b"abcde")[1] == b"abcde"
    with pytest.raises(RunnerError, match="4 of 5 body bytes"):
        parse_whole_reply(head + b"abcd")


def _served_status(path: str) -> int:
    """The status an in-process runner answers a GET of ``path`` with."""
    import socket
    import threading

    from gpuscout.runner._reply import parse_whole_reply
    from gpuscout.runner._server import serve
    from gpuscout.testing import eventually

    ports: list[int] = []
    server = threading.Thread(
        target=serve, args=(lambda: [], 0, 1.0), kwargs={"announce": ports.append}, daemon=True
    )
    server.start()
    assert eventually(lambda: bool(ports))
    with socket.create_connection(("127.0.0.1", ports[0]), timeout=10) as sock:
        sock.sendall(f"GET {path} HTTP/1.0\r\n\r\n".encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    server.join(10)
    return parse_whole_reply(data)[0].status


def test_only_the_info_path_answers_devices() -> None:
    """/info (with or without a query) is 200; a path that merely starts with it is 404."""
    assert _served_status("/info?all=1") == 200
    assert _served_status("/infox") == 404


def _line(**fields: object) -> bytes:
    import json

    return json.dumps(fields).encode() + b"\n"


def test_an_outcome_needs_a_status_of_ok_failed_or_timeout() -> None:
    """A worker's line with any other status is unreadable, not believed."""
    from gpuscout._host.isolation import outcome

    assert outcome({"name": "cuda", "status": "timeout"}).status == "timeout"
    with pytest.raises(ValueError, match="status"):
        outcome({"name": "cuda", "status": "fine"})


def test_the_first_line_for_a_plugin_counts_and_unasked_plugins_are_ignored() -> None:
    """The zygote's answer: a second line for a plugin is ignored, as is one for a plugin that
    was not asked for."""
    from gpuscout._host.isolation import Answer

    answer = Answer(["cuda"])
    answer.add(
        _line(name="cuda", status="ok")
        + _line(name="cuda", status="failed", error="late")
        + _line(name="rocm", status="ok")
    )
    assert set(answer.outcomes) == {"cuda"} and answer.outcomes["cuda"].status == "ok"
    assert not answer.broken


def test_an_answer_line_over_max_line_breaks_the_answer() -> None:
    """A line that grows past MAX_LINE without its newline is not buffered on: the answer is
    broken and nothing more is believed."""
    from gpuscout._host.isolation import MAX_LINE, Answer

    answer = Answer(["cuda"])
    answer.add(b"x" * (MAX_LINE + 1))
    assert "over" in answer.broken
    answer.add(b"\n" + _line(name="cuda", status="ok"))
    assert answer.outcomes == {}


FAKE_RUNNER = """
import http.server, os, sys
body = os.environ["GPUSCOUT_TEST_DEVICES"].encode()
class Info(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Info).serve_forever()
"""


def _validated(
    tmp_path: Path, device: DeviceInfo, child_sees: DeviceInfo
) -> tuple[list[DeviceInfo], list[str]]:
    """validate_devices for ``device`` with a runner whose child reports ``child_sees``."""
    import os
    import sys

    from gpuscout._records.encode import to_json
    from gpuscout.runner._validation import validate_devices

    script = tmp_path / "runner.py"
    script.write_text(FAKE_RUNNER)
    env = {**os.environ, "GPUSCOUT_TEST_DEVICES": to_json([child_sees])}
    kept, dropped = validate_devices([(device, env)], 20.0, command=[sys.executable, str(script), "{port}"])
    return kept, [d.reason for d in dropped]


def test_validation_drops_a_device_the_child_does_not_see(tmp_path: Path) -> None:
    """A child that initialises another card does not confirm this one."""
    mine = card(0, uuid="GPU-aaaaaaaa-0000-0000-0000-000000000000")
    other = card(1, uuid="GPU-bbbbbbbb-0000-0000-0000-000000000000")
    kept, reasons = _validated(tmp_path, mine, other)
    assert kept == [] and reasons == ["init validation failed: device not seen by the child"]


def test_validation_matches_uuids_whatever_their_case(tmp_path: Path) -> None:
    """A child that spells the card's UUID in capitals still saw it."""
    mine = card(0, uuid="GPU-aaaaaaaa-0000-0000-0000-000000000000")
    kept, reasons = _validated(tmp_path, mine, mine.evolve(uuid=mine.uuid.upper()))
    assert kept == [mine] and reasons == []


QUITTER = """
import os
from gpuscout.plugin import hookimpl

@hookimpl
def gpuscout_enumerate(context):
    os._exit(1)
"""


@pytest.fixture(scope="module")
def quitters(site_factory: Callable[..., Path]) -> Path:
    """An installed distribution with a plugin whose worker exits 1."""
    return site_factory(
        "gpuscout-mutation-isolated", "1.0", {"iso_quitter": QUITTER}, {"quitter": "iso_quitter"}
    )


def _isolated_error(site: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> str:
    import os

    monkeypatch.syspath_prepend(str(site))
    scout = Scout(
        plugins=[name], env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, enumerate_timeout=5.0
    )
    report = scout.discover(isolated=True).report(name)
    assert report.status == "failed"
    return report.error


def test_an_isolated_worker_that_exits_1_failed(quitters: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Exit status 1 is a failure, said as such, not a worker that finished without an answer."""
    assert "exited with status 1" in _isolated_error(quitters, "quitter", monkeypatch)


def test_a_reply_with_two_different_content_lengths_is_an_error() -> None:
    """Two Content-Lengths that disagree make the body's end unknowable (request smuggling's
    trick): the reply is refused; the same value twice is accepted."""
    from gpuscout.runner._reply import RunnerError, parse_whole_reply

    same = b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n[]"
    assert parse_whole_reply(same)[1] == b"[]"
    with pytest.raises(RunnerError, match="two Content-Lengths"):
        parse_whole_reply(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n[]x")


def test_after_going_up_to_a_count_in_between_earlier_layouts_may_be_tried_again(
    scout_with: Callable[..., Scout],
) -> None:
    """Once a count in between is taken, the tried layouts are forgotten: when allocating it
    then fails, the smaller layout the fit pass had already tried is tried again, before any
    backoff holds memory back (7 layers, not the 5 a backoff of 0.1 leaves)."""
    from gpuscout._records.layers import GPULayersList
    from gpuscout.load import Allocation, LoadOperation

    gpu = card(0, free_memory=457 * MIB + 1000 * MIB, total_memory=2 * GIB, compute_major=9, driver_major=12)
    layer = 100 * MIB

    def allocate(layout: GPULayersList, operation: LoadOperation) -> Allocation:
        placed = {i for g in layout for i in g.layers}
        held = len(placed)
        if operation is LoadOperation.ALLOC:
            graph = 300 * MIB  # really allocating needs a bigger graph than the fit pass said
        else:
            graph = {10: 300 * MIB, 8: 150 * MIB}.get(held, 100 * MIB)
        graph = graph if held else 0
        gpus = [
            DeviceMemory(
                id=gpu.id,
                library=gpu.library,
                name=gpu.name,
                weights=[layer if i in placed else 0 for i in range(10)],
                cache=[0] * 10,
                graph=graph,
            )
        ]
        cpu = DeviceMemory(
            library="cpu",
            name="CPU",
            weights=[0 if i in placed else layer for i in range(10)],
            cache=[0] * 10,
        )
        fits = held * layer + graph <= 1000 * MIB or operation is LoadOperation.CLOSE
        return Allocation(fits, BackendMemory(input_weights=0, cpu=cpu, gpus=gpus))

    estimate = BackendMemory(
        cpu=DeviceMemory(library="cpu", name="CPU", weights=[layer] * 10, cache=[0] * 10)
    )
    done = scout_with([]).load(estimate, [gpu], SystemInfo(64 * GIB, 60 * GIB), allocate)
    assert done.layout.sum() == 7
