"""mutmut's third round (tests/MUTATION.md): the rules of reading a recording that no test held.

Each test names, in its docstring, the mutants of ``gpuscout._recording.replay`` it kills
(``replay.x__int__mutmut_1`` is mutmut's name for the first mutant of ``_int``). Every refusal
is one RecordingError that names the file and the problem (docs/recordings.md), so the messages
are part of what is checked.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

import pytest

from gpuscout._recording import replay
from gpuscout._recording.replay import MAX_RECORDS, Recording, check_tree, load
from gpuscout.errors import RecordingError
from gpuscout.testing import FIFO, Symlink, write_tree


def _rec(path: Path, **manifest: Any) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "recording.json").write_text(json.dumps({"format": 1, "platform": "linux", **manifest}))
    return path


def _rec_text(path: Path, text: str) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "recording.json").write_text(text)
    return path


def _answers(path: Path, files: dict[str, str]) -> Path:
    rec = _rec(path)
    write_tree(rec / "answers", {f"/{name}": text for name, text in files.items()})
    return rec


def _refused(rec: Path, *parts: str) -> str:
    with pytest.raises(RecordingError) as caught:
        load(rec)
    message = str(caught.value)
    for part in parts:
        assert part in message, message
    return message


# -- JSON numbers -----------------------------------------------------------------------------------


@pytest.mark.parametrize("number", [(1 << 64) - 1, -((1 << 64) - 1), 0, -1])
def test_integers_inside_64_bits_are_read(tmp_path: Path, number: int) -> None:
    """A whole number of at most 20 digits strictly between -2**64 and 2**64 is read as itself.

    Kills replay.x__int__mutmut_2 (20 digits refused by length)."""
    rec = _rec_text(tmp_path / "rec", f'{{"format": 1, "platform": "linux", "x": {number}}}')
    assert load(rec).manifest["x"] == number


@pytest.mark.parametrize(
    "text", [str(1 << 64), str(-(1 << 64)), "99999999999999999999", "-99999999999999999999"]
)
def test_integers_outside_64_bits_are_refused(tmp_path: Path, text: str) -> None:
    """2**64, -2**64 and a 20-digit number beyond them are not valid JSON here, and the message
    says why ("does not fit in 64 bits", quoting the number).

    Kills replay.x__int__mutmut_1 (``and``: only long and big refused), _7/_8/_9 (the lower
    bound -2**65, -2**64 included), _11/_13/_14 (the upper bound widened), _15 (no message)."""
    rec = _rec_text(tmp_path / "rec", f'{{"format": 1, "platform": "linux", "x": {text}}}')
    _refused(rec, "recording.json: not valid JSON", f"{text}... does not fit in 64 bits")


@pytest.mark.parametrize("number", ["1.5", "-2.25e3", "1e308"])
def test_finite_floats_are_read(tmp_path: Path, number: str) -> None:
    """A finite number with a fraction or exponent is read as that float.

    Kills replay.x__float__mutmut_1/2 (no value), _3 (finite refused, infinite kept)."""
    rec = _rec_text(tmp_path / "rec", f'{{"format": 1, "platform": "linux", "x": {number}}}')
    assert load(rec).manifest["x"] == float(number)


@pytest.mark.parametrize("text", ["1e400", "-1e400"])
def test_floats_beyond_a_double_are_refused(tmp_path: Path, text: str) -> None:
    """A number that would be +-infinity is refused, named ("does not fit in a double").

    Kills replay.x__float__mutmut_3..9 (either infinity let through, or float() of a bad
    name raising a ValueError that no longer names the number), _10 (no message)."""
    rec = _rec_text(tmp_path / "rec", f'{{"format": 1, "platform": "linux", "x": {text}}}')
    _refused(rec, "not valid JSON", f"{text} does not fit in a double")


def test_nan_is_refused_by_name(tmp_path: Path) -> None:
    """NaN and Infinity are not JSON numbers; the message says which word was found.

    Kills replay.x__reject_constant__mutmut_1."""
    rec = _rec_text(tmp_path / "rec", '{"format": 1, "platform": "linux", "x": Infinity}')
    _refused(rec, "Infinity is not a JSON number")


# -- the manifest's types -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("platform", 5, "'platform' must be a str, got int"),
        ("machine", True, "'machine' must be a str, got bool"),
        ("env", ["A"], "'env' must be an object, got list"),
        ("anonymized", "yes", "'anonymized' must be true or false, got str"),
        ("sources", 5, "'sources' must be an object or a list or a str, got int"),
    ],
)
def test_a_manifest_key_of_the_wrong_type_is_named_with_the_type_it_needs(
    tmp_path: Path, key: str, value: Any, said: str
) -> None:
    """Each manifest key of the wrong type is refused saying what it must be, in words.

    Kills replay.x__kind_name__mutmut_1..4, _7..18, _20 (no tests reached _kind_name)."""
    _refused(_rec(tmp_path / "rec", **{key: value}), "recording.json: ", said)


def test_the_manifest_as_a_fifo_is_named_as_the_manifest(tmp_path: Path) -> None:
    """A manifest that is not a regular file is named, and called the manifest.

    Kills replay.x__json__mutmut_4 (what the file is, lost)."""
    (tmp_path / "rec").mkdir()
    os.mkfifo(tmp_path / "rec/recording.json")
    _refused(tmp_path / "rec", "recording.json: not a regular file (the manifest of a recording)")


# -- the answers folder --------------------------------------------------------------------------------


def test_answers_as_a_file_is_refused(tmp_path: Path) -> None:
    """``answers`` must be a directory. Kills replay.x__answers__mutmut_11."""
    rec = _rec(tmp_path / "rec")
    (rec / "answers").write_text("{}")
    _refused(rec, f"{rec / 'answers'}: not a directory")


def test_a_plugin_name_with_dots_keeps_them(tmp_path: Path) -> None:
    """``answers/my.plugin.json`` holds the answers of plugin ``my.plugin`` (only the last dot
    starts the extension). Kills replay.x__answers__mutmut_23 (``partition``)."""
    rec = _answers(tmp_path / "rec", {"my.plugin.json": '{"k": 1}'})
    assert load(rec).with_answers(["my.plugin"]).answers_for("my.plugin") == {"k": 1}


def test_an_answer_file_not_ending_in_json_is_refused(tmp_path: Path) -> None:
    """Every name in answers/ is ``<plugin>.json``: ``cuda.txt`` is refused.

    Kills replay.x__answers__mutmut_26 (``and``: a dotted name with any extension passes)."""
    rec = _answers(tmp_path / "rec", {"cuda.txt": "{}"})
    _refused(rec, "cuda.txt: not <plugin>.json")


def test_an_answer_that_is_not_a_regular_file_is_named_as_the_plugins(tmp_path: Path) -> None:
    """A FIFO in answers/ is refused naming the file and whose answers it stands for.

    Kills replay.x__answers__mutmut_37 (what, lost), _40 (no message)."""
    rec = _rec(tmp_path / "rec")
    write_tree(rec / "answers", {"/cuda.json": FIFO})
    _refused(rec, "cuda.json: not a regular file (plugin cuda's driver answers)")


def test_only_the_first_10000_names_in_answers_are_looked_at(tmp_path: Path) -> None:
    """answers/ is read up to 10 000 names (in sorted order); a bad name past them is never
    looked at. Kills replay.x__answers__mutmut_15 (10 001)."""
    rec = _rec(tmp_path / "rec")
    (rec / "answers").mkdir()
    for i in range(10_000):
        (rec / f"answers/p{i:05}.json").write_bytes(b"{}")
    (rec / "answers/zz.bad").write_bytes(b"")
    assert len(load(rec).answer_files) == 10_000


def _fail_for(monkeypatch: pytest.MonkeyPatch, name: str, target: str) -> None:
    """os.<name> raises EACCES for ``target`` (root ignores permissions, so a chmod cannot)."""
    real = getattr(os, name)

    def fake(path: Any, *args: Any, **kwargs: Any) -> Any:
        if os.fspath(path) == target:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), target)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, name, fake)


def test_an_unreadable_answers_folder_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """answers/ that cannot be looked at is one RecordingError naming it and the reason.

    Kills replay.x__answers__mutmut_8."""
    rec = _answers(tmp_path / "rec", {"cuda.json": "{}"})
    _fail_for(monkeypatch, "lstat", str(rec / "answers"))
    _refused(rec, f"{rec / 'answers'}: cannot be read: Permission denied")


def test_an_unreadable_answer_file_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An answer file that cannot be looked at is named. Kills replay.x__answers__mutmut_36."""
    rec = _answers(tmp_path / "rec", {"cuda.json": "{}"})
    _fail_for(monkeypatch, "lstat", str(rec / "answers/cuda.json"))
    _refused(rec, "cuda.json: cannot be read: Permission denied")


# -- reading a file ------------------------------------------------------------------------------------


def test_a_manifest_that_cannot_be_looked_at_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills replay.x__read_file__mutmut_4 (lstat failing otherwise than missing)."""
    rec = _rec(tmp_path / "rec")
    _fail_for(monkeypatch, "lstat", str(rec / "recording.json"))
    _refused(rec, "recording.json: cannot be read: ", "Permission denied")


def test_a_manifest_that_cannot_be_opened_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kills replay.x__read_file__mutmut_13 (open failing)."""
    rec = _rec(tmp_path / "rec")
    _fail_for(monkeypatch, "open", str(rec / "recording.json"))
    _refused(rec, "recording.json: cannot be read: Permission denied")


def test_a_manifest_whose_read_fails_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read error (EIO) on the manifest is one RecordingError naming it.

    Kills replay.x__read_file__mutmut_42."""
    rec = _rec(tmp_path / "rec")
    inode = os.stat(rec / "recording.json").st_ino
    real = os.read

    def broken(fd: int, size: int) -> bytes:
        if os.fstat(fd).st_ino == inode:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real(fd, size)

    with monkeypatch.context() as patched:
        patched.setattr(os, "read", broken)
        with pytest.raises(RecordingError) as caught:
            load(rec)
    assert "recording.json: cannot be read: Input/output error" in str(caught.value)


def test_a_manifest_swapped_for_a_fifo_after_its_check_is_still_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What was opened is checked again (fstat): a regular file swapped for a FIFO between the
    look and the open is refused, not read. Kills replay.x__read_file__mutmut_17."""
    rec = _rec(tmp_path / "rec")
    manifest = str(rec / "recording.json")
    regular = os.lstat(manifest)
    os.unlink(manifest)
    os.mkfifo(manifest)
    real = os.lstat
    monkeypatch.setattr(
        os, "lstat", lambda p, *a, **k: regular if os.fspath(p) == manifest else real(p, *a, **k)
    )
    _refused(rec, "recording.json: not a regular file (the manifest of a recording)")


# -- the tree under root/ -------------------------------------------------------------------------------


def test_root_as_a_link_to_a_directory_is_refused(tmp_path: Path) -> None:
    """root/ must be a directory itself, not a link to one (nothing is followed out).

    Kills replay.x_check_tree__mutmut_3 (``and``), _7 (no message)."""
    rec = _rec(tmp_path / "rec")
    (tmp_path / "elsewhere").mkdir()
    (rec / "root").symlink_to(tmp_path / "elsewhere")
    _refused(rec, f"{rec / 'root'}: not a directory")


def test_root_as_a_file_is_refused_as_not_a_directory(tmp_path: Path) -> None:
    """Kills replay.x_check_tree__mutmut_3 (a file then fails only at scandir, otherwise named)."""
    rec = _rec(tmp_path / "rec")
    (rec / "root").write_text("")
    _refused(rec, f"{rec / 'root'}: not a directory")


@pytest.mark.parametrize(("entries", "refused"), [(5, False), (6, True)])
def test_the_tree_holds_at_most_max_tree_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entries: int, refused: bool
) -> None:
    """Every entry under root/ counts once (folders, files, links); one more than
    MAX_TREE_ENTRIES is refused naming the limit (here scaled down to 5).

    Kills replay.x_check_tree__mutmut_9 (counting from 1), _15/_16 (never more), _17 (each
    counted twice), _18 (``>=``), _19 (no message)."""
    monkeypatch.setattr(replay, "MAX_TREE_ENTRIES", 5)
    base = tmp_path / "root"
    files: dict[str, str | Symlink] = {"/sys/a": "1", "/sys/b": "2", "/proc/c": Symlink("../sys/a")}
    if entries == 6:
        files["/proc/d"] = "3"
    write_tree(base, files)  # the folders sys and proc count too
    if refused:
        with pytest.raises(RecordingError, match="more than 5 entries"):
            check_tree(str(base))
    else:
        check_tree(str(base))


def test_an_unreadable_folder_in_the_tree_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kills replay.x_check_tree__mutmut_14 (scandir failing)."""
    base = write_tree(tmp_path / "root", {"/sys/a": "1"})
    _fail_for(monkeypatch, "scandir", str(base / "sys"))
    with pytest.raises(RecordingError, match="sys: cannot be read: Permission denied"):
        check_tree(str(base))


def test_an_entry_that_cannot_be_looked_at_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kills replay.x_check_tree__mutmut_27 (lstat of an entry failing)."""
    base = write_tree(tmp_path / "root", {"/sys/a": "1"})
    _fail_for(monkeypatch, "lstat", str(base / "sys/a"))
    with pytest.raises(RecordingError, match="a: cannot be read: Permission denied"):
        check_tree(str(base))


@pytest.mark.parametrize(
    "target",
    [
        "../recording.json",  # from root/x itself
        "sub//../../recording.json",  # an empty part is no level
        "sub/./../../recording.json",  # nor is "."
        "./../recording.json",
    ],
)
def test_a_link_at_the_top_of_root_cannot_climb_out(tmp_path: Path, target: str) -> None:
    """A link directly under root/ that climbs above it is refused, however its target is
    spelled. Kills replay.x__inside__mutmut_17 (root/'s own "." counted as a level), _26/_27
    (an empty part or "." counted as a level), _28 (the walk stops at the first ".")."""
    rec = _rec(tmp_path / "rec")
    write_tree(rec / "root", {"/x": Symlink(target)})
    _refused(rec, "x: a link to", "leads outside the recording")


def test_a_link_that_climbs_and_stays_inside_is_kept(tmp_path: Path) -> None:
    """The counterpart: ``sys/x -> ./../proc//meminfo`` stays inside and is kept."""
    rec = _rec(tmp_path / "rec")
    write_tree(rec / "root", {"/sys/x": Symlink("./../proc//meminfo"), "/proc/meminfo": "MemTotal: 1 kB\n"})
    assert load(rec).root == str(rec / "root")


# -- reading answer files -------------------------------------------------------------------------------


def test_answers_read_in_two_steps_keep_both(tmp_path: Path) -> None:
    """with_answers keeps what was read before and reads the rest: asking again for one already
    read does not stop the others. Kills replay.xǁRecordingǁwith_answers__mutmut_11 (``break``)."""
    rec = load(_answers(tmp_path / "rec", {"cuda.json": '{"c": 1}', "rocm.json": '{"r": 2}'}))
    both = rec.with_answers(["cuda"]).with_answers(["cuda", "rocm"])
    assert both.answers_for("cuda") == {"c": 1}
    assert both.answers_for("rocm") == {"r": 2}


def test_an_answer_file_removed_after_load_is_named(tmp_path: Path) -> None:
    """Kills replay.xǁRecordingǁwith_answers__mutmut_15 (stat failing, message lost)."""
    rec = load(_answers(tmp_path / "rec", {"cuda.json": "{}"}))
    os.unlink(tmp_path / "rec/answers/cuda.json")
    with pytest.raises(RecordingError, match=r"cuda\.json: cannot be read: No such file or directory"):
        rec.with_answers(["cuda"])


def test_an_answer_file_swapped_for_a_fifo_after_load_is_named_as_the_plugins(tmp_path: Path) -> None:
    """The file is checked again when read. Kills replay.xǁRecordingǁwith_answers__mutmut_25/29."""
    rec = load(_answers(tmp_path / "rec", {"cuda.json": "{}"}))
    os.unlink(tmp_path / "rec/answers/cuda.json")
    os.mkfifo(tmp_path / "rec/answers/cuda.json")
    with pytest.raises(
        RecordingError, match=r"cuda.json: not a regular file \(plugin cuda's driver answers\)"
    ):
        rec.with_answers(["cuda"])


@pytest.mark.parametrize(("objects", "refused"), [(MAX_RECORDS, False), (MAX_RECORDS + 1, True)])
def test_an_answer_file_holds_at_most_max_records_objects(
    tmp_path: Path, objects: int, refused: bool
) -> None:
    """An answer file of more than MAX_RECORDS JSON objects (the outer one counted) is refused
    before decoding, naming the plugin. Kills replay.xǁRecordingǁwith_answers__mutmut_26/29/30
    (no count), replay.x__json__mutmut_13 (no message)."""
    text = '{"d": [' + ",".join(["{}"] * (objects - 1)) + "]}"
    rec = load(_answers(tmp_path / "rec", {"cuda.json": text}))
    if refused:
        with pytest.raises(
            RecordingError, match=f"more than {MAX_RECORDS} JSON objects .plugin cuda's driver"
        ):
            rec.with_answers(["cuda"])
    else:
        assert len(rec.with_answers(["cuda"]).answers_for("cuda")["d"]) == objects - 1


def test_an_answer_that_is_not_an_object_says_what_it_is(tmp_path: Path) -> None:
    """Kills replay.xǁRecordingǁwith_answers__mutmut_33 (the type named wrongly)."""
    rec = load(_answers(tmp_path / "rec", {"cuda.json": "[1]"}))
    with pytest.raises(RecordingError, match="expected a JSON object, got list"):
        rec.with_answers(["cuda"])


@pytest.mark.parametrize(("sizes", "refused"), [((10, 10), False), ((10, 11), True), ((7, 7, 7), True)])
def test_the_answer_files_read_together_hold_at_most_max_answers_total(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sizes: tuple[int, ...], refused: bool
) -> None:
    """The sizes of all answer files read are summed; past MAX_ANSWERS_TOTAL (here 20 bytes)
    the file that crosses it is named. Kills replay.xǁRecordingǁwith_answers__mutmut_7
    (counting from 1), _18 (only the last file counted), _19 (subtracted), _20 (``>=``), _21."""
    monkeypatch.setattr(replay, "MAX_ANSWERS_TOTAL", 20)
    names = [f"p{i}" for i in range(len(sizes))]
    files = {f"{n}.json": '{"k":' + "1" * (size - 6) + "}" for n, size in zip(names, sizes, strict=True)}
    assert [len(t) for t in files.values()] == list(sizes)
    rec: Recording = load(_answers(tmp_path / "rec", files))
    if refused:
        with pytest.raises(
            RecordingError, match=f"p{len(sizes) - 1}.json: the answer files hold more than 20 bytes"
        ):
            rec.with_answers(names)
    else:
        assert rec.with_answers(names).answers_for("p1") == {"k": 1111}


# -- the manifest's rules -------------------------------------------------------------------------------


def test_a_manifest_that_is_not_utf8_is_named_with_the_byte(tmp_path: Path) -> None:
    """Kills replay.x__json__mutmut_25 (no message)."""
    rec = tmp_path / "rec"
    rec.mkdir()
    (rec / "recording.json").write_bytes(b'{"format": 1, "platform": "linux", "x": "\xff"}')
    _refused(rec, "recording.json: not UTF-8 (byte 41)")


def test_a_manifest_nested_too_deeply_is_one_recording_error(tmp_path: Path) -> None:
    """JSON nested deeper than the parser recurses is refused as such, not a RecursionError.

    Kills replay.x__json__mutmut_26 (no message)."""
    deep = "[" * 100_000 + "]" * 100_000
    rec = _rec_text(tmp_path / "rec", f'{{"format": 1, "platform": "linux", "x": {deep}}}')
    _refused(rec, "recording.json: nested too deeply")


def test_a_missing_manifest_is_named_as_the_manifest(tmp_path: Path) -> None:
    """Kills replay.x__manifest__mutmut_9/13/14 (what the missing file is, lost or changed)."""
    (tmp_path / "rec").mkdir()
    _refused(tmp_path / "rec", "recording.json: missing (the manifest of a recording)")


def test_a_manifest_that_is_a_list_says_so(tmp_path: Path) -> None:
    """Kills replay.x__manifest__mutmut_17 (the type named wrongly)."""
    _refused(_rec_text(tmp_path / "rec", "[1]"), "recording.json: expected a JSON object, got list")


@pytest.mark.parametrize("fmt", ["true", "1.0"])
def test_the_format_is_the_whole_number_1_not_true_nor_1_0(tmp_path: Path, fmt: str) -> None:
    """``true`` and ``1.0`` equal 1 in Python but are not format 1.

    Kills replay.x__manifest__mutmut_28 (``and``: only a bool that is not an int refused)."""
    rec = _rec_text(tmp_path / "rec", f'{{"format": {fmt}, "platform": "linux"}}')
    _refused(rec, "is not one this gpuscout reads (it reads format 1)")


@pytest.mark.parametrize(("platform", "refused"), [("", True), ("p" * 64, False), ("p" * 65, True)])
def test_the_platform_is_a_non_empty_name_of_at_most_64_characters(
    tmp_path: Path, platform: str, refused: bool
) -> None:
    """Kills replay.x__manifest__mutmut_41 (``and``: empty accepted), _45 (64 refused), _46 (65
    accepted), _47 (no message)."""
    rec = _rec(tmp_path / "rec", platform=platform)
    if refused:
        _refused(rec, "recording.json: 'platform' must be a sys.platform value such as 'linux'")
    else:
        assert load(rec).platform == platform


def test_an_env_value_that_is_not_a_str_says_what_it_is(tmp_path: Path) -> None:
    """Kills replay.x__manifest__mutmut_56 (the type named wrongly)."""
    _refused(_rec(tmp_path / "rec", env={"A": 1}), "env['A'] must be a str, got int")


@pytest.mark.parametrize(("name", "value"), [("", "1"), ("A=B", "1"), ("A\x00", "1"), ("A", "1\x00")])
def test_env_holds_only_variable_names_and_values(tmp_path: Path, name: str, value: str) -> None:
    """An empty name, a name with ``=`` or a NUL, a value with a NUL: none can be an environment
    variable, each is refused. Kills replay.x__manifest__mutmut_57 (a NUL in the value
    accepted), _58 (a name with ``=`` accepted)."""
    _refused(_rec(tmp_path / "rec", env={name: value}), "is not a variable name and value")


# -- what load takes ------------------------------------------------------------------------------------


def test_load_takes_only_a_path() -> None:
    """Kills replay.x_load__mutmut_3 (no message)."""
    with pytest.raises(RecordingError, match="replay must be a recording's directory, got 5"):
        load(5)  # type: ignore[arg-type]


@pytest.mark.parametrize("path", ["rec\x00x", b"rec"])
def test_load_takes_a_str_path_without_nul(tmp_path: Path, path: str | bytes) -> None:
    """A bytes path or one with a NUL is refused as such (it would otherwise be "no such
    directory"). Kills replay.x_load__mutmut_4 (``and``), _6, _8 (no message)."""
    with pytest.raises(RecordingError, match="replay must be a str path without NUL"):
        load(path)  # type: ignore[arg-type]


def test_load_tells_a_file_from_a_missing_directory(tmp_path: Path) -> None:
    """Kills replay.x_load__mutmut_11..16 (the two cases swapped, merged or unnamed)."""
    (tmp_path / "file").write_text("")
    with pytest.raises(
        RecordingError, match=r"file: not a directory \(a recording is a directory with recording.json\)"
    ):
        load(tmp_path / "file")
    with pytest.raises(RecordingError, match=r"nothing: no such directory \(a recording is a directory"):
        load(tmp_path / "nothing")
