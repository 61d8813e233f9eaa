"""Run a command as a child with extra environment: no shell, stdio inherited, signals forwarded,
exit status passed through (128+N when the child dies of signal N).

On POSIX systems with ``sigtimedwait`` (Linux) the forwarded signals are blocked and taken
synchronously, which tells who sent each one: a signal the terminal sent to the whole foreground
process group (Ctrl-C, hang-up) has already reached the child, which shares our group, so it is not
sent a second time; a signal sent to gpuscout alone (``kill``) is forwarded. Elsewhere (macOS,
Windows) Python signal handlers forward every signal. Called outside the main thread, where
Python cannot take signals, the child simply runs.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator, Mapping, Sequence
from types import FrameType

from gpuscout.errors import GpuscoutError

FORWARDED = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))
#: si_code of a signal the kernel itself sent (the terminal driver's Ctrl-C / hang-up).
SI_KERNEL = 0x80
#: Shell conventions for a command that cannot be started.
NOT_FOUND, NOT_EXECUTABLE = 127, 126


class CommandError(GpuscoutError):
    """The command could not be started; ``code`` is the shell's exit status for that case."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def exit_code(returncode: int) -> int:
    """A child's status as a shell reports it: its exit code, or 128+N after signal N."""
    return 128 - returncode if returncode < 0 else returncode


def child_environment(extra: Mapping[str, str], base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default the current environment) with ``extra`` added, ``extra`` winning."""
    return {**(os.environ if base is None else base), **extra}


def run(command: Sequence[str], env: Mapping[str, str], cpus: frozenset[int] | None = None) -> int:
    """Run ``command`` with exactly ``env`` (and on ``cpus``, when given: the child starts
    pinned there, see ``gpuscout._selection.affinity``); return its shell-style exit status.

    Raises ``CommandError`` (code 127 or 126) when it cannot be started, 126 too when the
    CPUs cannot be set.
    """
    if not command:
        raise CommandError("no command to run", 2)
    main = threading.current_thread() is threading.main_thread()
    if main and hasattr(signal, "sigtimedwait") and hasattr(os, "posix_spawn"):
        return _run_posix(list(command), dict(env), cpus)
    return _run_portable(list(command), dict(env), forward_signals=main, cpus=cpus)


@contextlib.contextmanager
def _on(cpus: frozenset[int] | None) -> Iterator[None]:
    from gpuscout._records.cpulist import cpulist
    from gpuscout._selection.affinity import pinned

    stack = contextlib.ExitStack()
    try:
        stack.enter_context(pinned(cpus))
    except OSError as exc:
        shown = cpulist(cpus) if cpus is not None else ""
        raise CommandError(f"cannot run on CPUs {shown}: {exc.strerror or exc}", NOT_EXECUTABLE) from None
    with stack:  # only setting the CPUs is an error of ours; the child's own start is not
        yield


def _resolve(program: str, env: Mapping[str, str]) -> str:
    if os.sep in program or (os.altsep and os.altsep in program):
        return program
    found = shutil.which(program, path=env.get("PATH", os.defpath))
    if found is None:
        raise CommandError(f"command not found: {program!r}", NOT_FOUND)
    return found


def _start_error(program: str, exc: OSError) -> CommandError:
    code = NOT_FOUND if isinstance(exc, FileNotFoundError) else NOT_EXECUTABLE
    return CommandError(f"cannot run {program!r}: {exc.strerror or exc}", code)


def _run_posix(command: list[str], env: dict[str, str], cpus: frozenset[int] | None = None) -> int:
    waited = {*FORWARDED, signal.SIGCHLD}
    # Blocked before the child exists, so neither a signal nor the child's exit can slip past.
    previous_mask = signal.pthread_sigmask(signal.SIG_BLOCK, waited)
    previous_chld = signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    child: list[int] = []

    def forward(signo: int, _frame: FrameType | None) -> None:
        # Only reached when a signal lands on another thread that does not block it (a plugin's
        # enumerate thread that overran its deadline): forward it rather than die.
        for pid in child:
            _send(pid, signo)

    previous = {s: signal.signal(s, forward) for s in FORWARDED}
    try:
        path = _resolve(command[0], env)
        try:
            with _on(cpus):
                pid = os.posix_spawn(
                    path,
                    command,
                    env,
                    setsigmask=previous_mask,
                    # Python ignores SIGPIPE and SIGXFSZ; the child gets the defaults back, as
                    # subprocess's restore_signals does.
                    setsigdef=[getattr(signal, n) for n in ("SIGPIPE", "SIGXFSZ") if hasattr(signal, n)],
                )
        except CommandError:
            raise
        except OSError as exc:
            raise _start_error(command[0], exc) from None
        child.append(pid)
        return _wait_forwarding(pid)
    finally:
        # Drain what arrived for us so unblocking raises nothing late (KeyboardInterrupt).
        while signal.sigtimedwait(waited, 0) is not None:
            pass
        signal.signal(signal.SIGCHLD, previous_chld)
        for s, handler in previous.items():
            signal.signal(s, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, previous_mask)


def _wait_forwarding(pid: int) -> int:
    waited = {*FORWARDED, signal.SIGCHLD}
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return exit_code(os.waitstatus_to_exitcode(status))
        info = signal.sigtimedwait(waited, 1.0)
        if info is None or info.si_signo == signal.SIGCHLD:
            continue
        if info.si_code == SI_KERNEL and _same_group(pid):
            continue  # the terminal sent it to the whole group; the child has it already
        _send(pid, info.si_signo)


def _same_group(pid: int) -> bool:
    try:
        return os.getpgid(pid) == os.getpgrp()
    except OSError:
        return False


def _send(pid: int, signo: int) -> None:
    try:
        os.kill(pid, signo)
    except ProcessLookupError:
        pass


def _run_portable(
    command: list[str], env: dict[str, str], forward_signals: bool = True, cpus: frozenset[int] | None = None
) -> int:
    try:
        with _on(cpus):
            child = subprocess.Popen(command, env=env)
    except CommandError:
        raise
    except OSError as exc:
        raise _start_error(command[0], exc) from None

    def forward(signo: int, _frame: FrameType | None) -> None:
        if child.poll() is None:
            child.send_signal(signo)

    # Only the main thread may install signal handlers; elsewhere the child just runs.
    previous = {s: signal.signal(s, forward) for s in FORWARDED} if forward_signals else {}
    try:
        return exit_code(child.wait())
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


__all__ = ["CommandError", "child_environment", "exit_code", "run"]
