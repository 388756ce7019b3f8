"""The client's file capability: text reads and writes, confined to the session's folder.

An agent asks the *client* to read and write files (``fs/read_text_file``,
``fs/write_text_file``) so that an editor can serve unsaved buffers; Panewatch serves the disk,
and only inside the folder the session was started in.

Confinement is decided when the file is *opened*, never by checking a path and then opening it
(a folder flipped to a symlink between the two used to read outside files): the path is resolved
beneath a descriptor of the session's folder with ``openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS)``
where the kernel has it, else one component at a time with ``O_NOFOLLOW`` from the previous
component's descriptor. Every symlink is refused, even one pointing inside: following only the
inside ones race-free would need the kernel's help on every host, and an agent can name the real
path instead. What was opened is then checked on its descriptor (a regular file, one link — a hard
link could be an outside file — and the size), at most the limit + 1 bytes are read, and a FIFO
never blocks (``O_NONBLOCK``). Writes go to a temporary file made through the verified folder
descriptor and renamed over the target through it. Every ``OSError`` becomes a clean refusal.
The work runs in a thread: a large or slow file never holds up the event loop.
"""

from __future__ import annotations

import asyncio
import ctypes
import errno
import functools
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager

from .jsonrpc import INVALID_PARAMS, RpcError

__all__ = ["MAX_FILE", "RESOURCE_NOT_FOUND", "FileAccess", "Refused", "have_openat2"]

#: Largest file served or written (bytes).
MAX_FILE = 8 * 1024 * 1024
#: ACP's "resource not found" error code.
RESOURCE_NOT_FOUND = -32002

#: ``openat2``'s number: one table for every architecture since Linux 5.1 (alpha and ia64 aside,
#: which ``have_openat2`` then finds wanting and the walk serves)
_SYS_OPENAT2 = 437
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
_RESOLVE = _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS

# a folder is opened only to resolve beneath it (O_PATH needs no read permission on it)
_DIR = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_NOFOLLOW | os.O_CLOEXEC
_TEMP = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_NOCTTY | os.O_CLOEXEC


class Refused(RpcError):
    """A path the session may not touch, or a file that is not text."""

    def __init__(self, message: str) -> None:
        super().__init__(INVALID_PARAMS, message)


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


@functools.cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def _openat2(dir_fd: int, path: str, flags: int) -> int:
    """``openat2(dir_fd, path, {flags, resolve: beneath, no symlinks})``; raises ``OSError``."""
    how = _OpenHow(flags, 0, _RESOLVE)
    fd = _libc().syscall(
        ctypes.c_long(_SYS_OPENAT2),
        ctypes.c_int(dir_fd),
        ctypes.c_char_p(os.fsencode(path)),
        ctypes.byref(how),
        ctypes.c_size_t(ctypes.sizeof(how)),
    )
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), path)
    return int(fd)


@functools.cache
def have_openat2() -> bool:
    """Whether this kernel resolves beneath a folder itself (Linux ≥ 5.6, not filtered away)."""
    if not hasattr(os, "O_PATH"):
        return False
    root = os.open("/", _DIR)
    try:
        os.close(_openat2(root, ".", _DIR))
    except (OSError, AttributeError):
        # ENOSYS on an old kernel; EPERM where a seccomp profile does not know the call
        return False
    finally:
        os.close(root)
    return True


class FileAccess:
    """Reads and writes under one root folder (the session's ``cwd``)."""

    def __init__(self, root: str, *, limit: int = MAX_FILE, openat2: bool | None = None) -> None:
        self.root = os.path.realpath(root)
        self._names = {self.root, os.path.abspath(root)}  # the prefixes an agent may use
        self.limit = limit
        self._openat2 = openat2  # None: use it where the kernel has it
        try:
            st = os.stat(self.root)
            self._identity: tuple[int, int] | None = (st.st_dev, st.st_ino)
        except OSError:
            self._identity = None

    # -- resolving ---------------------------------------------------------------------
    def _parts(self, path: str) -> list[str]:
        """The components of ``path`` beneath the root (lexically: no symlink is followed later,
        so ``a/b/..`` is ``a`` as the kernel would have it); ``Refused`` when outside."""
        if "\x00" in path:
            raise Refused("a path with a NUL byte")
        if not os.path.isabs(path):
            raise Refused(f"{path!r} is not absolute (ACP paths are absolute)")
        norm = os.path.normpath(path)
        for name in self._names:
            if norm == name:
                return []
            if norm.startswith(name.rstrip("/") + "/"):
                parts = norm[len(name.rstrip("/")) + 1 :].split("/")
                if any(part in ("", ".", "..") for part in parts):
                    break
                return parts
        raise Refused(f"{path!r} is outside the session's folder {self.root}")

    @contextmanager
    def _root_fd(self) -> Iterator[int]:
        fd = os.open(self.root, _DIR)
        try:
            st = os.fstat(fd)
            if self._identity is None:
                raise Refused(f"the session's folder {self.root} was not there when the session began")
            if (st.st_dev, st.st_ino) != self._identity:
                raise Refused(f"the session's folder {self.root} was moved or replaced")
            yield fd
        finally:
            os.close(fd)

    def _use_openat2(self) -> bool:
        return have_openat2() if self._openat2 is None else self._openat2

    def _open_dir(self, root_fd: int, parts: list[str], *, create: bool = False) -> int:
        """A new descriptor of the folder ``parts`` beneath ``root_fd``, no symlink followed."""
        if not parts:
            return os.dup(root_fd)
        if self._use_openat2() and not create:
            return _openat2(root_fd, "/".join(parts), _DIR)
        fd = os.dup(root_fd)
        try:
            for part in parts:
                try:
                    nxt = os.open(part, _DIR | os.O_NOFOLLOW, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    try:
                        os.mkdir(part, 0o777, dir_fd=fd)
                    except FileExistsError:
                        pass  # made meanwhile: opened (and checked) just below
                    nxt = os.open(part, _DIR | os.O_NOFOLLOW, dir_fd=fd)
                os.close(fd)
                fd = nxt
                if not stat.S_ISDIR(os.fstat(fd).st_mode):  # O_PATH|O_NOFOLLOW can open a link
                    raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), part)
        except BaseException:
            os.close(fd)
            raise
        return fd

    # -- the two operations --------------------------------------------------------------
    def _read(self, path: str, line: int | None, limit: int | None) -> str:
        parts = self._parts(path)
        if not parts:
            raise Refused(f"{path!r} is the session's folder, not a file")
        try:
            with self._root_fd() as root_fd:
                dir_fd = self._open_dir(root_fd, parts[:-1])
            try:
                fd = os.open(parts[-1], _READ, dir_fd=dir_fd)
                try:
                    data = self._read_fd(fd, dir_fd, parts[-1], path)
                finally:
                    os.close(fd)
            finally:
                os.close(dir_fd)
        except FileNotFoundError:
            raise RpcError(RESOURCE_NOT_FOUND, f"no file {path!r}") from None
        except (OSError, UnicodeError) as exc:
            raise Refused(_why(path, "read", exc)) from None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise Refused(f"{path!r} is not UTF-8 text") from None
        if line is None and limit is None:
            return text
        lines = text.splitlines(keepends=True)
        start = (line or 1) - 1
        end = None if limit is None else start + limit
        return "".join(lines[start:end])

    def _read_fd(self, fd: int, dir_fd: int, name: str, path: str) -> bytes:
        """The bytes of the opened ``fd`` if it is, all along, a regular file within the limit
        whose one name is ``name`` in ``dir_fd``.

        One link at ``fstat`` is not enough: a link from outside can be removed between the open
        and the ``fstat`` (and made again after), and a name lookup can still see a rename's old
        target until the kernel finishes the rename. So after the read the folder's pending
        renames are waited out (``_quiesce``), the name must still lead to the inode, and the
        inode's change time and link count must be as before: a link made or removed, or a write,
        changes the change time (notes/hardening.md, "Issue 25: ACP files", says where not).
        """
        before = os.fstat(fd)
        if not stat.S_ISREG(before.st_mode):
            raise Refused(f"{path!r} is not a regular file")
        if before.st_nlink != 1:
            raise Refused(f"{path!r} has {before.st_nlink} hard links (one could be a file outside the folder)")
        if before.st_size > self.limit:
            raise Refused(f"{path!r} is {before.st_size} bytes; the limit is {self.limit}")
        chunks: list[bytes] = []
        got = 0
        while got <= self.limit:  # a file grown since fstat is caught by its limit + 1st byte
            chunk = os.read(fd, self.limit + 1 - got)
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        if got > self.limit:
            raise Refused(f"{path!r} grew past the limit of {self.limit} bytes while it was read")
        _quiesce(dir_fd, name)
        named = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if (named.st_dev, named.st_ino) != (before.st_dev, before.st_ino):
            raise Refused(f"{path!r} was replaced while it was read; try again")
        after = os.fstat(fd)
        if after.st_nlink != 1 or after.st_ctime_ns != before.st_ctime_ns:
            raise Refused(f"{path!r} changed while it was read (written to, or a link made or removed); try again")
        return b"".join(chunks)

    def _write(self, path: str, content: str) -> None:
        parts = self._parts(path)
        if not parts:
            raise Refused(f"{path!r} is the session's folder")
        try:
            data = content.encode("utf-8")
        except UnicodeEncodeError:
            raise Refused("the content is not valid Unicode (a lone surrogate)") from None
        if len(data) > self.limit:
            raise Refused(f"{len(data)} bytes to write; the limit is {self.limit}")
        try:
            with self._root_fd() as root_fd:
                dir_fd = self._open_dir(root_fd, parts[:-1], create=True)
            try:
                _replace(dir_fd, parts[-1], data, path)
            finally:
                os.close(dir_fd)
        except (OSError, UnicodeError) as exc:
            raise Refused(_why(path, "write", exc)) from None

    async def read(self, path: str, line: int | None = None, limit: int | None = None) -> str:
        return await asyncio.to_thread(self._read, path, line, limit)

    async def write(self, path: str, content: str) -> None:
        await asyncio.to_thread(self._write, path, content)


def _replace(dir_fd: int, name: str, data: bytes, path: str) -> None:
    """Write ``data`` beside ``name`` in ``dir_fd`` and rename it over: a reader never sees half
    a file, and nothing is resolved by name again."""
    try:
        old = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        mode = 0o644  # a new file gets the usual mode, not the temporary's 0600
    else:
        if stat.S_ISDIR(old.st_mode):
            raise Refused(f"{path!r} is a folder")
        if not stat.S_ISREG(old.st_mode):
            raise Refused(f"{path!r} is not a regular file (symlinks are not followed)")
        mode = old.st_mode & 0o7777
    for _ in range(8):
        tmp = f".panewatch-{secrets.token_hex(8)}.tmp"
        try:
            fd = os.open(tmp, _TEMP, 0o600, dir_fd=dir_fd)
            break
        except FileExistsError:
            continue
    else:
        raise Refused(f"cannot write {path!r}: no free temporary name")
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        raise


def _quiesce(dir_fd: int, name: str) -> None:
    """Wait until no rename, link or unlink is under way in ``dir_fd``.

    ``linkat(".", name)`` takes the folder's lock before it looks ``name`` up, as every change
    of the folder holds it until the name cache is updated; it then fails (``EEXIST``, or
    ``EPERM``: a folder cannot be hard linked), so it never makes a link.
    """
    try:
        os.link(".", name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return
    raise Refused("the kernel hard-linked a folder")  # unreachable on Linux; never continue


def _why(path: str, verb: str, exc: OSError | UnicodeError) -> str:
    """One sentence for a refused open: what the agent did wrong, not a traceback."""
    if isinstance(exc, UnicodeError):
        return f"cannot {verb} {path!r}: the path is not valid Unicode"
    if exc.errno == errno.ELOOP:
        return (
            f"{path!r} goes through a symlink; symlinks are not followed (they could lead outside the session's folder)"
        )
    if exc.errno == errno.EXDEV:
        return f"{path!r} is outside the session's folder"
    if exc.errno == errno.ENOTDIR:
        return f"cannot {verb} {path!r}: a part of it is not a folder (symlinks are not followed)"
    return f"cannot {verb} {path!r}: {exc.strerror or exc}"
