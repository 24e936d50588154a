"""Session-lock owners that name one process for good, so a lock left by a killed process is reclaimed at once.

An owner is ``host~bootid/pid.starttime/run``: the boot id tells apart two machines that share a host name
(and one machine across reboots); the process start time tells apart two processes that got the same PID
(a container restarted as PID 1). Owners on other hosts are never judged dead here; their locks expire.
"""

from __future__ import annotations

import os
import socket


def _process_start(pid: int) -> str:
    """The process's start time in clock ticks since boot (``/proc/PID/stat`` field 22), or ``""``.

    With the boot id it names one process for good: a PID reused later (a container restarted as PID 1)
    has another start time.
    """
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[19]
    except (OSError, IndexError):
        return ""


def _host_identity() -> str:
    # The boot id tells apart two machines that share a hostname (and one machine across reboots).
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()[:8]
    except OSError:
        boot = ""
    return f"{socket.gethostname()}~{boot}" if boot else socket.gethostname()


_HOST = _host_identity()
_PROCESS = (os.getpid(), _process_start(os.getpid()))


def lock_owner(run_id: str) -> str:
    """A lock owner naming this host and process (pid and start time), so a lock left by a killed
    process can be reclaimed, even when a restarted process got the same PID."""
    pid = os.getpid()
    if _PROCESS[0] != pid:  # forked since import
        _refresh_process()
    return f"{_HOST}/{pid}.{_PROCESS[1]}/{run_id}"


def run_of(owner: str) -> str:
    """The run an owner made by :func:`lock_owner` names (a run's is its interaction id)."""
    return owner.rpartition("/")[2]


def _refresh_process() -> None:
    global _PROCESS
    _PROCESS = (os.getpid(), _process_start(os.getpid()))


def owner_is_dead(owner: str) -> bool:
    """True when ``owner`` is a process on this host that no longer exists (it was killed mid-run).

    Owners on other hosts are never judged dead here; their locks expire by TTL instead.
    """
    host, _, rest = owner.partition("/")
    process, _, _ = rest.partition("/")
    pid_text, _, started = process.partition(".")
    if host != _HOST or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if started and started != _process_start(pid):
        return True  # that PID is gone, or now names another process (PID reuse after a restart)
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    try:  # a killed child not yet reaped by its parent is a zombie: dead for our purposes
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] == "Z"
    except (OSError, IndexError):
        return False
