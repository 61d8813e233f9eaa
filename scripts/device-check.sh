#!/usr/bin/env bash
# Thin wrapper kept for old instructions: the device check is scripts/device_check.py (read its
# docstring). Read-only: it changes no MIG mode, resets nothing, leaves persistence mode alone.
#   scripts/device-check.sh [--out DIR] [--gpuscout CMD] [--budget S]   run the check
#   scripts/device-check.sh --prepare        (networked machine) fill scripts/wheelhouse/
# Environment: PYTHON (default python3).
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec "${PYTHON:-python3}" "$here/device_check.py" "$@"
