"""Cut a GGUF file down to its header, gzipped, as a small test fixture.

Keeps only the bytes before the tensor data (magic, version, every KV pair, every tensor info and
the alignment padding), so the fixture holds all the metadata and the exact tensor offsets of the
original but none of its weights. A test gunzips it and grows the file back to the original size
with ``truncate()`` (sparse), so every tensor's data range lies inside the file again::

    python scripts/gguf_header_fixture.py MODEL.gguf tests/data/fit/NAME.header.gguf.gz
    python scripts/gguf_header_fixture.py --check tests/data/fit/NAME.header.gguf.gz --size N

It prints ``file_size`` and ``data_offset`` as JSON (the fit fixture records both). The gzip stream
is written with mtime 0 and no file name, so the same model always gives the same bytes.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import gguf


def data_offset(path: Path) -> int:
    """Where the tensor data of the GGUF file at ``path`` starts."""
    return int(gguf.GGUFReader(str(path)).data_offset)


def write_header(model: Path, out: Path) -> dict[str, int]:
    """Write the gzipped header of ``model`` to ``out`` atomically; return its sizes."""
    offset, size = data_offset(model), model.stat().st_size
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    try:
        os.fchmod(fd, 0o644)  # mkstemp makes it 0600
        with os.fdopen(fd, "wb") as raw, open(model, "rb") as src:
            with gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=9, mtime=0) as gz:
                remaining = offset
                while remaining:
                    chunk = src.read(min(remaining, 1 << 20))
                    if not chunk:
                        raise ValueError(f"{model}: ends before its tensor data starts")
                    gz.write(chunk)
                    remaining -= len(chunk)
        os.replace(tmp, out)
    except BaseException:
        os.unlink(tmp)
        raise
    return {"file_size": size, "data_offset": offset, "gzip_size": out.stat().st_size}


def restore(fixture: Path, file_size: int, dest: Path) -> Path:
    """Gunzip ``fixture`` to ``dest`` and extend it (sparse) to ``file_size`` bytes."""
    with gzip.open(fixture, "rb") as gz, open(dest, "wb") as fh:
        shutil.copyfileobj(gz, fh)
        fh.truncate(file_size)
    return dest


def check(fixture: Path, file_size: int) -> dict[str, int]:
    """Restore ``fixture`` in a temporary folder and read it back with gguf's reader."""
    with tempfile.TemporaryDirectory() as tmp:
        path = restore(fixture, file_size, Path(tmp) / "model.gguf")
        reader = gguf.GGUFReader(str(path))
        return {
            "file_size": file_size,
            "data_offset": int(reader.data_offset),
            "tensors": len(reader.tensors),
            "kv": len(reader.fields),
        }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", type=Path, help="the GGUF file (or, with --check, the .gguf.gz fixture)")
    ap.add_argument("out", type=Path, nargs="?", help="where to write the .gguf.gz fixture")
    ap.add_argument("--check", action="store_true", help="restore the fixture and read it back")
    ap.add_argument("--size", type=int, help="with --check: the original file size")
    args = ap.parse_args(argv)
    if args.check:
        if args.size is None:
            ap.error("--check needs --size")
        result = check(args.model, args.size)
    elif args.out is None:
        ap.error("give the output path")
    else:
        result = write_header(args.model, args.out)
    json.dump(result, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
