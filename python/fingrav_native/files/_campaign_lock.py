"""Who holds a campaign folder: an exclusive ``flock`` on ``DIR/campaign.lock`` and the holder it names.

Two processes writing runs into one folder would interleave their runs and
each resume the other's by mistake, so a campaign takes the folder before it
writes anything (:func:`lock_campaign`). The lock file records the holder's
pid, host, start time and command, so whoever is refused is told who holds
it (:func:`lock_holder`, :func:`in_use`); the kernel releases the lock when
its holder exits or dies, so a lock left by a killed process never blocks.
The folder's layout, its runs and manifest are
:mod:`fingrav_native.files._campaign`'s.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import socket
import stat
import sys
import threading
import time
from typing import Iterator, Optional

from fingrav_native.files._campaign import LOCK_FILE, CampaignFormatError, CampaignLockedError
from fingrav_native.files._safe import file_problem

try:
    import fcntl as _fcntl
except ImportError:  # pragma: no cover - Windows: lock_campaign says what is missing
    _fcntl = None  # type: ignore[assignment]


def _describe_holder(fd: int) -> str:
    """Who holds the lock, from the text its holder wrote into the lock file."""
    text = b""
    # The holder writes its details just after taking the lock: a refusal
    # that lands in between waits a moment for them.
    for _ in range(20):
        text = os.pread(fd, 4096, 0)
        if text:
            break
        time.sleep(0.01)
    return _describe_text(text)


def _describe_text(text: bytes) -> str:
    """The holder the lock file's text names, in words."""
    try:
        who = json.loads(text)
        pid, host, since = int(who["pid"]), str(who["host"]), str(who["since"])
    except (ValueError, KeyError, TypeError, RecursionError):
        return "another process (it has not said which)"
    described = f"pid {pid} on {host} since {since}"
    command = str(who.get("command") or "")
    if command:
        described += f" ({command if len(command) <= 80 else command[:77] + '...'})"
    if host == socket.gethostname() and pid != os.getpid():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            # The lock outlives its taker only through a child that inherited
            # it: that child still writes, so it is still refused.
            described += f"; pid {pid} has exited, but a process it started still holds the lock"
        except PermissionError:
            pass  # alive, another user's
    elif pid == os.getpid():
        described += ", another thread of this process"
    return described


# Locks this process holds: (folder, thread) -> the pid that took it. Taking
# one again in the same thread (the CLI around profile()) nests; another
# thread is refused as another process would be.
_held: dict[tuple[str, int], int] = {}


_held_guard = threading.Lock()


def _command_line() -> str:
    """This process's command, as typed: names the holder in a refusal."""
    argv = list(sys.argv) or ["python"]
    if os.path.basename(argv[0]) == "__main__.py":
        # python -m PACKAGE: sys.argv[0] is the package's __main__.py.
        argv[0] = f"python -m {os.path.basename(os.path.dirname(argv[0]))}"
    else:
        argv[0] = os.path.basename(argv[0])
    return " ".join(argv)[:200]


def _open_lock(path: str, create: bool) -> int:
    """The lock file's descriptor; a link or anything but a regular file in its place is refused by name.

    The holder truncates and writes the lock file: through a link it would
    empty whatever the link points at (a device gives "Invalid argument", a
    user's file would be wiped), so a link is never followed.
    """
    flags = os.O_RDWR | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags | (os.O_CREAT if create else 0), 0o644)
    except OSError as exc:
        if os.path.islink(path):
            raise CampaignFormatError(f"{path}: is a symbolic link (to {os.readlink(path)!r}), not the campaign's "
                                      "lock file; remove it and run again") from None
        raise CampaignLockedError(f"{path}: cannot be opened to lock the folder ({exc.strerror or exc})") from exc
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise CampaignFormatError(f"{path}: is not a regular file (a pipe, socket or device), not the campaign's "
                                  "lock file; remove it and run again")
    return fd


def lock_holder(out_dir: str) -> Optional[str]:
    """Who holds a campaign folder's lock, from the text its holder wrote (None: nobody, as far as it says).

    A reading, not a lock: it never takes the lock, so it cannot make
    another process's start fail. The holder empties the text when it lets
    go; text left by a process of this host that has exited is stale.

    Parameters
    ----------
    out_dir : str
        A campaign folder.

    Returns
    -------
    str or None
        The holder, as a refusal names it (pid, host, start, command).
    """
    path = os.path.join(out_dir, LOCK_FILE)
    try:
        if file_problem(path) is not None:
            return None
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0))
    except OSError:  # FileNotFoundError included: no lock file, no holder
        return None
    try:
        text = os.pread(fd, 4096, 0)
    finally:
        os.close(fd)
    try:
        who = json.loads(text)
        pid, host = int(who["pid"]), str(who["host"])
    except (ValueError, KeyError, TypeError, RecursionError):
        return None
    if host == socket.gethostname():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass  # alive, another user's
    return _describe_text(text)


def in_use(out_dir: str, holder: str) -> CampaignLockedError:
    """The refusal of a folder another process holds (``holder`` as :func:`lock_holder` names it)."""
    return CampaignLockedError(f"{out_dir}: in use by {holder}; wait for it to finish (or stop it), then run again")


def _acquire(out_dir: str) -> int:
    assert _fcntl is not None
    path = os.path.join(out_dir, LOCK_FILE)
    # Opened without truncating: a refused process writes nothing, not even here.
    fd = _open_lock(path, create=True)
    try:
        _fcntl.flock(fd, _fcntl.LOCK_EX | _fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _describe_holder(fd)
        os.close(fd)
        raise in_use(out_dir, holder) from None
    except OSError as exc:
        os.close(fd)
        raise CampaignLockedError(f"{path}: cannot be locked ({exc.strerror}); campaign folders need a file "
                                  "system with flock (a local disk)") from exc
    since = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    who = {"pid": os.getpid(), "host": socket.gethostname(), "since": since, "command": _command_line()}
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(who).encode(), 0)
    return fd


@contextlib.contextmanager
def lock_campaign(out_dir: str) -> Iterator[None]:
    """Hold a campaign folder exclusively while the block runs.

    Taken before anything in the folder is written (``profile(out_dir=...)``
    and ``fingrav profile`` do). The lock is an ``flock`` on
    ``DIR/campaign.lock``, which also records the holder's pid, host, start
    time and command for the message of whoever is refused. The kernel
    releases it when the holder exits or dies, so a lock left by a killed
    process never blocks. Nested use in one thread is allowed.

    Parameters
    ----------
    out_dir : str
        The campaign folder; created if missing.

    Yields
    ------
    None

    Raises
    ------
    CampaignLockedError
        Another process, or another thread of this one, holds the folder;
        the message names the holder.
    ValueError
        ``out_dir`` is a file.
    RuntimeError
        No ``fcntl`` module (Windows): campaign folders need a POSIX system.

    Examples
    --------
    >>> import tempfile
    >>> with lock_campaign(tempfile.mkdtemp()):
    ...     pass
    """
    if _fcntl is None:  # pragma: no cover - Windows
        raise RuntimeError(f"{out_dir}: campaign folders are locked with fcntl.flock, which this platform lacks; "
                           "profile into a campaign folder on Linux or macOS")
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise ValueError(f"out_dir={out_dir!r}: is a file, not a folder; give a folder for the campaign")
    os.makedirs(out_dir, exist_ok=True)
    key = (os.path.realpath(out_dir), threading.get_ident())
    with _held_guard:
        # After a fork the child inherits this table but not the right to write: it takes its own lock.
        nested = _held.get(key) == os.getpid()
    if nested:
        yield
        return
    fd = _acquire(out_dir)
    with _held_guard:
        _held[key] = os.getpid()
    try:
        yield
    finally:
        with _held_guard:
            del _held[key]
        try:
            # No stale holder text for the next one to read.
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)  # releases the flock
