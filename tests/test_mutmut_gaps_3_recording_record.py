"""mutmut's third round (tests/MUTATION.md): what ``gpuscout record`` keeps, rules no test held.

Each test names, in its docstring, the mutants of ``gpuscout._recording.record`` it kills
(``record.x__wanted__mutmut_5`` is mutmut's name for the fifth mutant of ``_wanted``). They
drive ``TrackedEnv``, ``declared_families``, ``RecordingContext`` and ``Recorder.write`` and
look at what the written recording holds.
"""

from __future__ import annotations

import errno
import json
import math
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gpuscout._recording.record import Recorder, RecordingContext, TrackedEnv, declared_families
from gpuscout.testing import Symlink, write_tree


def _written(recorder: Recorder, where: Path, **options: Any) -> Path:
    recorder.write(str(where), platform="linux", env={}, **options)
    return where


def _context(root: Path | str, recorder: Recorder) -> RecordingContext:
    return RecordingContext(env={}, platform="linux", root=str(root), recorder=recorder)


# -- which variables are recorded ---------------------------------------------------------------------


def test_a_family_without_a_star_is_one_exact_name() -> None:
    """``GPU_DEVICE_ORDINAL`` records that variable only, not longer names it begins, nor names
    that begin it. Kills record.x__wanted__mutmut_5 (every family read as a prefix)."""
    env = TrackedEnv({"GPU_DEVICE_ORDINAL": "1", "GPU_DEVICE_ORDINALS": "2", "GPU_DEVICE_ORDINA": "3"})
    assert env.recorded(["GPU_DEVICE_ORDINAL"]) == {"GPU_DEVICE_ORDINAL": "1"}


def test_a_star_family_is_exactly_the_prefix_before_the_star() -> None:
    """``CUDA_*`` records the names starting ``CUDA_`` (and ``CUDA_`` itself), not ``CUDAX`` nor
    ``CUPY_CACHE``. Kills record.x__wanted__mutmut_7 (only the first letter), _8 (the ``_``
    dropped)."""
    env = TrackedEnv({"CUDA_VISIBLE_DEVICES": "0", "CUDA_": "1", "CUDAX": "2", "CUPY_CACHE": "3", "C": "4"})
    assert env.recorded(["CUDA_*"]) == {"CUDA_VISIBLE_DEVICES": "0", "CUDA_": "1"}


def test_declared_families_keep_well_formed_names_only() -> None:
    """A plugin's GPUSCOUT_RECORDED_ENV entries are kept when they are str of 1 to 200
    characters; anything else is ignored, and a plugin without the attribute declares nothing.

    Kills record.x_declared_families__mutmut_8 (no default: AttributeError), _12 (``or``: a
    non-str passes, then len() fails), _13 (one-letter names dropped), _14 (the empty name
    kept), _15 (200 characters dropped), _16 (201 kept)."""
    plugin = SimpleNamespace(GPUSCOUT_RECORDED_ENV=("X", "", "A" * 200, "B" * 201, 5, None, "MTL_*"))
    assert declared_families([object(), plugin]) == ["X", "A" * 200, "MTL_*"]


def test_at_most_100_entries_of_one_plugin_are_looked_at() -> None:
    """Kills record.x_declared_families__mutmut_11 (101)."""
    plugin = SimpleNamespace(GPUSCOUT_RECORDED_ENV=[f"V{i}" for i in range(101)])
    assert declared_families([plugin]) == [f"V{i}" for i in range(100)]


# -- what a recording context notes ---------------------------------------------------------------------


def test_a_relative_path_is_refused_and_never_recorded(tmp_path: Path) -> None:
    """A relative path is not read (a note says so), and the recording does not copy the file
    it would have meant under the root. Kills record.xǁRecordingContextǁ_seen__mutmut_3."""
    root = write_tree(tmp_path / "live", {"/sys/x": "secret-ish\n"})
    recorder = Recorder()
    context = _context(root, recorder)
    assert context.read_text("sys/x") is None
    rec = _written(recorder, tmp_path / "rec")
    assert not (rec / "root/sys/x").exists()


def test_a_path_that_climbs_out_of_the_root_is_noted_nowhere(tmp_path: Path) -> None:
    """``/../x`` climbs above the root: it reads as nothing, and nothing is noted (nor does the
    context fail). Kills record.xǁRecordingContextǁ_seen__mutmut_7 (``or``: TypeError)."""
    recorder = Recorder()
    context = _context(write_tree(tmp_path / "live", {"/x": "1"}), recorder)
    assert context.read_text("/../x") is None
    assert recorder.paths == {}


def test_on_an_empty_root_names_are_kept_as_they_are(tmp_path: Path) -> None:
    """A root of ``""`` is the live machine's: ``/dev/null`` is noted as ``/dev/null``.

    Kills record.xǁRecordingContextǁ_seen__mutmut_17 (names made relative to another folder)."""
    recorder = Recorder()
    assert _context("", recorder).device_node("/dev/null") == "present"
    assert recorder.paths == {"/dev/null": "node"}


def test_listing_the_root_records_its_names_and_nothing_else(tmp_path: Path) -> None:
    """Listing ``/`` keeps ``/``'s names (as empty files and folders) and adds no other name."""
    root = write_tree(tmp_path / "live", {"/a": "1", "/b/c": "2"})
    recorder = Recorder()
    assert sorted(_context(root, recorder).list_dir("/") or []) == ["a", "b"]
    rec = _written(recorder, tmp_path / "rec")
    assert sorted(p.name for p in (rec / "root").iterdir()) == ["a", "b"]
    assert (rec / "root/a").read_text() == "" and (rec / "root/b").is_dir()


@pytest.mark.parametrize(("folder", "listed"), [("mineX", "mineX"), ("mine ", "mine "), ("mine", "mine/")])
def test_a_listed_folder_keeps_its_names_whatever_its_name_ends_with(
    tmp_path: Path, folder: str, listed: str
) -> None:
    """The names seen in a listing of ``/sys/class/<folder>`` are kept under that folder (only
    a trailing ``/`` is dropped before joining). Kills record.xǁRecordingContextǁlist_dir__mutmut_11
    (white space stripped instead), _13 (``X`` stripped too)."""
    root = write_tree(tmp_path / "live", {f"/sys/class/{folder}/card0": "1"})
    recorder = Recorder()
    assert _context(root, recorder).list_dir(f"/sys/class/{listed}") == ["card0"]
    rec = _written(recorder, tmp_path / "rec")
    assert (rec / f"root/sys/class/{folder}/card0").read_text() == ""


def test_a_node_of_a_recorded_tree_keeps_its_text(tmp_path: Path) -> None:
    """Recording on a tree (``--root``, a replay's): a node that is a plain file saying
    ``denied EPERM`` is copied with its text, so the new recording's node is refused the same
    way. Kills record.xǁRecordingContextǁdevice_node__mutmut_5/6 (the node noted as something
    else: copied empty, present), record.xǁRecorderǁ_copy_tree__mutmut_57/58 (a node's file not
    copied)."""
    root = write_tree(tmp_path / "live", {"/dev/mine0": "denied EPERM\n", "/dev/mine1": ""})
    recorder = Recorder()
    context = _context(root, recorder)
    assert [context.device_node("/dev/mine0"), context.device_node("/dev/mine1")] == ["denied", "present"]
    rec = _written(recorder, tmp_path / "rec")
    assert (rec / "root/dev/mine0").read_text() == "denied EPERM\n"
    assert (rec / "root/dev/mine1").read_text() == ""


# -- device nodes: what the recorder was told -------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "code", "text"),
    [("present", None, ""), ("denied", errno.EACCES, "denied\n"), ("denied", errno.EPERM, "denied EPERM\n")],
)
def test_a_device_node_is_recorded_as_what_discovery_found(
    tmp_path: Path, state: str, code: int | None, text: str
) -> None:
    """A character device becomes a plain file holding the state discovery found (not probed
    again): empty for present, ``denied`` for EACCES, ``denied EPERM`` for EPERM (a device
    cgroup's refusal). /dev/null on the live root stands for any node.

    Kills record.xǁRecorderǁnode__mutmut_1 (the state lost: probed again, present),
    record.xǁRecorderǁnode_errno__mutmut_1 (EPERM lost), record.xǁRecorderǁ__init____mutmut_7
    (no errno table), _9 (a root that is not ``/``: the node not found),
    record.xǁRecorderǁ_copy_tree__mutmut_89..92, _94, _97..118 (the node's file written otherwise)."""
    recorder = Recorder()
    recorder.saw("/dev/null", "node")
    recorder.node("/dev/null", state)
    if code is not None:
        recorder.node_errno("/dev/null", code)
    rec = _written(recorder, tmp_path / "rec")
    assert (rec / "root/dev/null").read_text() == text


# -- driver answers -------------------------------------------------------------------------------------


def test_an_answer_that_is_not_plain_json_is_a_problem_naming_it(tmp_path: Path) -> None:
    """Kills record.xǁRecorderǁanswer__mutmut_6 (the problem's text lost)."""
    recorder = Recorder()
    recorder.answer("mine", "devices", {1, 2})
    manifest = recorder.write(str(tmp_path / "rec"), platform="linux", env={})
    [problem] = manifest["problems"]  # the exception's own words vary with the Python version
    assert problem.startswith("plugin mine: answer 'devices' is not plain JSON (") and "set" in problem
    assert problem.endswith("); not recorded")
    assert not (tmp_path / "rec/answers/mine.json").exists()


def test_an_answer_item_that_is_nan_is_left_out_and_the_others_stay(tmp_path: Path) -> None:
    """NaN is not JSON (a replay refuses it): an item holding it is a problem and is left out,
    the other items of that answer are written. Kills record.xǁRecorderǁanswer_item__mutmut_4/5
    (NaN allowed), _6 (the problem's text lost)."""
    recorder = Recorder()
    recorder.answer_item("metal", "sysctl", "hw.memsize", 1 << 34)
    recorder.answer_item("metal", "sysctl", "hw.bad", math.nan)
    manifest = recorder.write(str(tmp_path / "rec"), platform="darwin", env={})
    [problem] = manifest["problems"]
    assert problem.startswith("plugin metal: answer 'sysctl'['hw.bad'] is not plain JSON (Out of range float")
    assert problem.endswith("); not recorded")
    assert json.loads((tmp_path / "rec/answers/metal.json").read_text()) == {
        "sysctl": {"hw.memsize": 1 << 34}
    }


def test_a_link_through_which_a_file_is_read_is_copied_as_discovery_read_it(tmp_path: Path) -> None:
    """The counterpart of the link rules: a file read through a link is copied with its content."""
    root = write_tree(tmp_path / "live", {"/sys/real/f": "7\n", "/sys/l": Symlink("real")})
    recorder = Recorder()
    assert _context(root, recorder).read_text("/sys/l/f") == "7\n"
    rec = _written(recorder, tmp_path / "rec")
    assert (rec / "root/sys/l/f").read_text() == "7\n"


def test_a_node_found_missing_is_not_in_the_recording(tmp_path: Path) -> None:
    """A node discovery found missing is left out (a missing file is a missing node).

    Kills record.xǁRecorderǁ_copy_tree__mutmut_95/96 (a missing node written as denied)."""
    recorder = Recorder()
    recorder.saw("/dev/null", "node")
    recorder.node("/dev/null", "missing")
    rec = _written(recorder, tmp_path / "rec")
    assert not (rec / "root/dev/null").exists()


# -- what is copied -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sizes", "copied"),
    [
        ((5, 5), (True, True)),
        ((6, 6, 2), (True, False, True)),
        ((11, 2), (False, True)),
        ((4, 4, 4), (True, True, False)),
    ],
)
def test_the_files_copied_hold_at_most_max_total_bytes_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sizes: tuple[int, ...], copied: tuple[bool, ...]
) -> None:
    """Files are copied in name order while their sizes together stay within MAX_TOTAL_BYTES
    (here 10); one that would pass it is left out, and the smaller ones after it are still
    copied. Kills record.xǁRecorderǁ_copy_tree__mutmut_13 (counting from 1), _73 (sizes
    subtracted), _74 (``>=``), _75 (``break``: nothing after the first left out), _76 (only the
    last size counted), _77."""
    from gpuscout._recording import record

    monkeypatch.setattr(record, "MAX_TOTAL_BYTES", 10)
    names = [f"/f{i}" for i in range(len(sizes))]
    root = write_tree(tmp_path / "live", {n: "x" * size for n, size in zip(names, sizes, strict=True)})
    recorder = Recorder()
    context = _context(root, recorder)
    for name in names:
        assert context.read_text(name) is not None
    rec = _written(recorder, tmp_path / "rec")
    assert tuple((rec / "root" / n.lstrip("/")).exists() for n in names) == copied


def test_a_file_a_plugin_could_not_read_is_left_out(tmp_path: Path) -> None:
    """A file over the read limit is read as nothing, and not copied (nor does the copy fail).

    Kills record.xǁRecorderǁ_copy_tree__mutmut_71 (``and``: len(None))."""
    root = write_tree(tmp_path / "live", {"/big": b"0" * (2 << 20), "/small": "1\n"})
    recorder = Recorder()
    context = _context(root, recorder)
    assert context.read_text("/big") is None and context.read_text("/small") == "1\n"
    rec = _written(recorder, tmp_path / "rec")
    assert not (rec / "root/big").exists() and (rec / "root/small").read_text() == "1\n"


def test_a_name_starting_with_x_keeps_its_letters(tmp_path: Path) -> None:
    """Kills record.xǁRecorderǁ_copy_tree__mutmut_24 (``X`` stripped from the front of names)."""
    root = write_tree(tmp_path / "live", {"/Xorg/log": "1\n"})
    recorder = Recorder()
    assert _context(root, recorder).read_text("/Xorg/log") == "1\n"
    rec = _written(recorder, tmp_path / "rec")
    assert (rec / "root/Xorg/log").read_text() == "1\n"


def test_only_relative_links_are_kept_and_a_non_link_read_as_one_is_nothing(tmp_path: Path) -> None:
    """A link read as a link is kept when its target is relative; an absolute one (which a
    replay would refuse) and a regular file read as a link leave nothing, and the recording
    loads. Kills record.xǁRecorderǁ_copy_tree__mutmut_30 (``or``: None.startswith), _34
    (absolute targets kept)."""
    from gpuscout._recording.replay import load

    root = write_tree(
        tmp_path / "live",
        {"/sys/rel": Symlink("../bus/x"), "/sys/abs": Symlink("/etc/passwd"), "/sys/plain": "1"},
    )
    recorder = Recorder()
    context = _context(root, recorder)
    assert [context.read_link(p) for p in ("/sys/rel", "/sys/abs", "/sys/plain")] == [
        "../bus/x",
        "/etc/passwd",
        None,
    ]
    rec = _written(recorder, tmp_path / "rec")
    assert os.readlink(rec / "root/sys/rel") == "../bus/x"
    assert not os.path.lexists(rec / "root/sys/abs") and not os.path.lexists(rec / "root/sys/plain")
    load(rec)


def test_a_link_read_as_a_link_and_walked_through_leaves_its_files(tmp_path: Path) -> None:
    """A name first kept as a link that turns out to hold files read through it becomes a
    folder holding them. Kills record.x__ensure_dir__mutmut_6 (unlink(None))."""
    root = write_tree(tmp_path / "live", {"/sys/real/f": "7\n", "/sys/l": Symlink("real")})
    recorder = Recorder()
    context = _context(root, recorder)
    assert context.read_link("/sys/l") == "real"
    assert context.read_text("/sys/l/f") == "7\n"
    rec = _written(recorder, tmp_path / "rec")
    assert (rec / "root/sys/l/f").read_text() == "7\n"


UUID = "GPU-12345678-abcd-ef01-2345-6789abcdef01"


def test_an_anonymized_recording_replaces_ids_in_link_targets_and_the_environment(tmp_path: Path) -> None:
    """--anonymize reaches link targets and the recorded environment as it reaches files.

    Kills record.xǁRecorderǁ_copy_tree__mutmut_43 (link targets kept), _45 (text(None)),
    record.xǁRecorderǁwrite__mutmut_91 (env kept), _96 (``anonymized`` always false)."""
    root = write_tree(tmp_path / "live", {"/sys/l": Symlink(f"../dev/{UUID}")})
    recorder = Recorder()
    assert _context(root, recorder).read_link("/sys/l") == f"../dev/{UUID}"
    manifest = recorder.write(
        str(tmp_path / "rec"), platform="linux", env={"CUDA_VISIBLE_DEVICES": UUID}, anonymize=True
    )
    target = os.readlink(tmp_path / "rec/root/sys/l")
    assert target.startswith("../dev/GPU-") and UUID not in target
    assert UUID not in manifest["env"]["CUDA_VISIBLE_DEVICES"]
    assert manifest["anonymized"] is True


def test_without_anonymize_nothing_is_replaced(tmp_path: Path) -> None:
    """Kills record.xǁRecorderǁwrite__mutmut_1 (anonymizing by default), _26 (always)."""
    recorder = Recorder()
    recorder.answer("cuda", "uuid", UUID)
    manifest = recorder.write(str(tmp_path / "rec"), platform="linux", env={"CUDA_VISIBLE_DEVICES": UUID})
    assert manifest["env"] == {"CUDA_VISIBLE_DEVICES": UUID} and manifest["anonymized"] is False
    assert json.loads((tmp_path / "rec/answers/cuda.json").read_text()) == {"uuid": UUID}


def test_the_manifest_holds_its_keys_and_a_utc_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The manifest's keys are those docs/recordings.md lists, ``machine`` empty unless given,
    ``created`` the UTC time as ``YYYY-MM-DDTHH:MM:SSZ`` (whatever the local zone).

    Kills record.xǁRecorderǁwrite__mutmut_2 (a machine by default), _76..79, _94/95 (keys
    renamed), _81 (local time), _82..84 (another format)."""
    import datetime
    import re
    import time

    from gpuscout.version import VERSION

    monkeypatch.setenv("TZ", "XYZ-9")  # nine hours ahead of UTC, no zone data needed
    time.tzset()
    try:
        manifest = Recorder().write(str(tmp_path / "rec"), platform="linux", env={})
    finally:
        monkeypatch.undo()
        time.tzset()
    assert set(manifest) == {"format", "gpuscout", "created", "machine", "platform", "env", "anonymized"}
    assert manifest["machine"] == "" and manifest["gpuscout"] == VERSION
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", manifest["created"])
    created = datetime.datetime.strptime(manifest["created"], "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=datetime.UTC
    )
    assert abs((datetime.datetime.now(datetime.UTC) - created).total_seconds()) < 600
    assert json.loads((tmp_path / "rec/recording.json").read_text()) == manifest


def test_answer_files_are_written_with_sorted_keys(tmp_path: Path) -> None:
    """An answer file's keys are sorted (a recording kept in git diffs by content, not by the
    order a plugin answered in). Kills record.xǁRecorderǁwrite__mutmut_64/67/69."""
    recorder = Recorder()
    recorder.answer("cuda", "zeta", 1)
    recorder.answer("cuda", "alpha", 2)
    text = (_written(recorder, tmp_path / "rec") / "answers/cuda.json").read_text()
    assert list(json.loads(text)) == ["alpha", "zeta"] and text.index("alpha") < text.index("zeta")


def test_a_plugin_name_that_cannot_be_a_file_leaves_only_its_answers_out(tmp_path: Path) -> None:
    """Answers of a plugin whose name is not a recordable file name are left out with a
    problem naming it; the other plugins' answers are written. Kills
    record.xǁRecorderǁwrite__mutmut_47 (the problem's text lost), _48 (``break``)."""
    recorder = Recorder()
    recorder.answer("Bad/Name", "k", 1)
    recorder.answer("zeta", "k", 2)
    manifest = json.loads((_written(recorder, tmp_path / "rec") / "recording.json").read_text())
    assert manifest["problems"] == ["plugin 'Bad/Name': not a recordable name; answers left out"]
    assert json.loads((tmp_path / "rec/answers/zeta.json").read_text()) == {"k": 2}


def test_an_existing_empty_directory_is_written_into(tmp_path: Path) -> None:
    """Kills record.xǁRecorderǁwrite__mutmut_8 (an empty directory refused), _10 (the current
    directory's listing checked instead), _117 (rmdir(None))."""
    (tmp_path / "rec").mkdir()
    _written(Recorder(), tmp_path / "rec")
    assert (tmp_path / "rec/recording.json").is_file()


def test_the_recording_is_assembled_in_a_hidden_folder_beside_its_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The recording is written in a ``.gpuscout-record-*`` folder next to the target and
    renamed into place, so it is never seen half-written and the rename stays on one file
    system. Kills record.xǁRecorderǁwrite__mutmut_12/13/18/20 (the folder made elsewhere),
    _17/_19/_21/_22 (not so named)."""
    moves: list[tuple[str, str]] = []
    real = os.rename

    def rename(src: Any, dst: Any) -> None:
        moves.append((os.fspath(src), os.fspath(dst)))
        real(src, dst)

    monkeypatch.chdir(tmp_path)
    (tmp_path / "out").mkdir()
    monkeypatch.setattr(os, "rename", rename)
    _written(Recorder(), tmp_path / "out/rec")
    [(src, dst)] = moves
    assert dst == str(tmp_path / "out/rec")
    assert os.path.dirname(src) == str(tmp_path / "out")
    assert os.path.basename(src).startswith(".gpuscout-record-")


def test_a_target_in_a_missing_folder_is_one_error_naming_it(tmp_path: Path) -> None:
    """Kills record.xǁRecorderǁwrite__mutmut_23 (no message)."""
    from gpuscout.errors import GpuscoutError

    with pytest.raises(
        GpuscoutError, match="nowhere: cannot write a recording there: No such file or directory"
    ):
        _written(Recorder(), tmp_path / "nowhere/rec")


@pytest.mark.parametrize("error", [OSError(5, "Input/output error"), RuntimeError("boom")])
def test_a_failed_write_leaves_no_half_written_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: BaseException
) -> None:
    """When the last step fails, the folder being written is removed; an OS error becomes one
    GpuscoutError naming the target, anything else goes on as it is. Kills
    record.xǁRecorderǁwrite__mutmut_122/124 and _128/130 (rmtree(None), rmtree()), _127 (no
    message)."""
    from gpuscout.errors import GpuscoutError

    def rename(src: Any, dst: Any) -> None:
        raise error

    monkeypatch.setattr(os, "rename", rename)
    expected = GpuscoutError if isinstance(error, OSError) else RuntimeError
    with pytest.raises(expected) as caught:
        _written(Recorder(), tmp_path / "rec")
    if isinstance(error, OSError):
        assert str(caught.value).startswith(f"{tmp_path / 'rec'}: the recording could not be written: ")
    assert os.listdir(tmp_path) == []


def test_a_device_node_whose_state_was_not_noted_is_probed_when_copied(tmp_path: Path) -> None:
    """A character device discovery touched otherwise (read as a file, which is refused) is
    looked at when copied, and kept as what it is: /dev/null, present. Kills
    record.xǁRecorderǁ_copy_tree__mutmut_93 (device_node(None))."""
    recorder = Recorder()
    recorder.saw("/dev/null", "file")
    rec = _written(recorder, tmp_path / "rec")
    assert (rec / "root/dev/null").read_text() == ""
