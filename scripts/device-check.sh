#!/usr/bin/env bash
# Install gpuscout from this tree into a throw-away venv and show what it finds on this machine:
# `gpuscout list --json`, `gpuscout plugins --json`, the wall time of each, and `nvidia-smi -L`.
#
# Usage:
#   scripts/device-check.sh                      install from the package index (pip's defaults)
#   scripts/device-check.sh --wheelhouse DIR     install offline from wheels in DIR
#   scripts/device-check.sh --make-wheelhouse DIR   (on a networked machine) fill DIR with the
#                                                wheels an offline run needs, then stop
# Environment: PYTHON (default python3), KEEP_VENV=1 to keep the venv and print its path.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
cd "$repo" || exit 1
python="${PYTHON:-python3}"
wheelhouse=""

case "${1:-}" in
  --make-wheelhouse)
    [ -n "${2:-}" ] || { echo "usage: $0 --make-wheelhouse DIR" >&2; exit 2; }
    mkdir -p "$2"
    "$python" -m pip wheel --wheel-dir "$2" . setuptools wheel || {
      echo "device-check: could not build the wheelhouse (is the package index reachable?)" >&2
      exit 1
    }
    echo "device-check: wheelhouse ready in $2"
    exit 0
    ;;
  --wheelhouse)
    [ -d "${2:-}" ] || { echo "device-check: no wheelhouse directory '${2:-}'" >&2; exit 2; }
    wheelhouse="$(cd "$2" && pwd)"
    ;;
  "") ;;
  *) echo "usage: $0 [--wheelhouse DIR | --make-wheelhouse DIR]" >&2; exit 2 ;;
esac

venv="$(mktemp -d "${TMPDIR:-/tmp}/gpuscout-device-check.XXXXXX")"
cleanup() { if [ "${KEEP_VENV:-0}" = 1 ]; then echo "device-check: venv kept in $venv" >&2; else rm -rf "$venv"; fi; }
trap cleanup EXIT

now() { "$python" -c 'import time; print(time.perf_counter())'; }
seconds_since() { "$python" -c "import time, sys; print(f'{time.perf_counter() - float(sys.argv[1]):.3f}')" "$1"; }

echo "== device-check: gpuscout from $(git rev-parse --short HEAD 2>/dev/null || echo 'a tree without git')"
echo "== python: $("$python" --version 2>&1), host: $(uname -srm)"

if ! "$python" -m venv "$venv"; then
  echo "device-check: could not create a venv with $python (install python3-venv)" >&2
  exit 1
fi
pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check)
if [ -n "$wheelhouse" ]; then
  pip+=(--no-index --find-links "$wheelhouse")
fi
if ! "${pip[@]}" . >"$venv/pip.log" 2>&1; then
  echo "device-check: installing gpuscout from $repo failed; pip said:" >&2
  tail -n 20 "$venv/pip.log" >&2
  echo "device-check: without network, run '$0 --make-wheelhouse DIR' on a networked machine" \
       "and then '$0 --wheelhouse DIR' here" >&2
  exit 1
fi
gpuscout="$venv/bin/gpuscout"
echo "== installed: $("$venv/bin/python" -c 'from importlib.metadata import version as v; print("gpuscout", v("gpuscout"), "nvidia-ml-py", v("nvidia-ml-py"))' 2>&1)"

run_timed() {  # run_timed TITLE SHOW_OUTPUT(1/0) COMMAND...
  local title="$1" show="$2"; shift 2
  echo
  echo "== $title"
  local start status
  start="$(now)"
  if [ "$show" = 1 ]; then "$@"; else "$@" >/dev/null; fi
  status=$?
  echo "== $title: exit $status, wall $(seconds_since "$start") s"
}

run_timed "gpuscout list --json" 1 "$gpuscout" list --json
run_timed "gpuscout plugins --json" 1 "$gpuscout" plugins --json
# Second run: NVML start-up cost without persistence mode shows as the difference.
run_timed "gpuscout list --json (again, output not shown)" 0 "$gpuscout" list --json

echo
if command -v nvidia-smi >/dev/null 2>&1; then
  echo "== nvidia-smi -L"
  nvidia-smi -L
  echo "== persistence mode"
  nvidia-smi --query-gpu=index,persistence_mode,pci.bus_id,memory.total,memory.free \
             --format=csv 2>&1
else
  echo "== nvidia-smi: not found"
fi
