"""The client's file capability: text reads and writes, confined to the session's folder.

An agent asks the *client* to read and write files (``fs/read_text_file``,
``fs/write_text_file``) so that an editor can serve unsaved buffers; Panewatch serves the disk,
and only inside the folder the session was started in. Paths are resolved with every symlink
followed before the check, so ``cwd/link -> /etc`` is as refused as ``/etc`` itself.
The work runs in a thread: a large or slow file never holds up the event loop.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path

from .jsonrpc import INVALID_PARAMS, RpcError

#: Largest file served or written (bytes).
MAX_FILE = 8 * 1024 * 1024
#: ACP's "resource not found" error code.
RESOURCE_NOT_FOUND = -32002


class Refused(RpcError):
    """A path the session may not touch, or a file that is not text."""

    def __init__(self, message: str) -> None:
        super().__init__(INVALID_PARAMS, message)


class FileAccess:
    """Reads and writes under one root folder (the session's ``cwd``)."""

    def __init__(self, root: str) -> None:
        self.root = os.path.realpath(root)

    def confine(self, path: str) -> str:
        """The real path of ``path`` when it lies inside the root; else ``Refused``."""
        if "\x00" in path:
            raise Refused("a path with a NUL byte")
        if not os.path.isabs(path):
            raise Refused(f"{path!r} is not absolute (ACP paths are absolute)")
        real = os.path.realpath(path)
        if real != self.root and os.path.commonpath([self.root, real]) != self.root:
            raise Refused(f"{path!r} is outside the session's folder {self.root}")
        return real

    def _read(self, path: str, line: int | None, limit: int | None) -> str:
        real = self.confine(path)
        try:
            size = os.stat(real).st_size
        except FileNotFoundError:
            raise RpcError(RESOURCE_NOT_FOUND, f"no file {path!r}") from None
        except OSError as exc:
            raise Refused(f"cannot read {path!r}: {exc.strerror}") from None
        if not os.path.isfile(real):
            raise Refused(f"{path!r} is not a regular file")
        if size > MAX_FILE:
            raise Refused(f"{path!r} is {size} bytes; the limit is {MAX_FILE}")
        try:
            text = Path(real).read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            raise Refused(f"{path!r} is not UTF-8 text") from None
        except OSError as exc:
            raise Refused(f"cannot read {path!r}: {exc.strerror}") from None
        if line is None and limit is None:
            return text
        lines = text.splitlines(keepends=True)
        start = (line or 1) - 1
        end = None if limit is None else start + limit
        return "".join(lines[start:end])

    def _write(self, path: str, content: str) -> None:
        real = self.confine(path)
        data = content.encode("utf-8")
        if len(data) > MAX_FILE:
            raise Refused(f"{len(data)} bytes to write; the limit is {MAX_FILE}")
        if os.path.isdir(real):
            raise Refused(f"{path!r} is a folder")
        parent = os.path.dirname(real)
        try:
            os.makedirs(parent, exist_ok=True)
            # write beside the target and rename: a reader never sees half a file
            fd, tmp = tempfile.mkstemp(dir=parent, prefix=".panewatch-")
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
                # keep an existing file's mode; a new one gets the usual 0644, not mkstemp's 0600
                os.chmod(tmp, os.stat(real).st_mode & 0o7777 if os.path.exists(real) else 0o644)
                os.replace(tmp, real)
            except BaseException:
                with_suppress_unlink(tmp)
                raise
        except OSError as exc:
            raise Refused(f"cannot write {path!r}: {exc.strerror}") from None

    async def read(self, path: str, line: int | None = None, limit: int | None = None) -> str:
        return await asyncio.to_thread(self._read, path, line, limit)

    async def write(self, path: str, content: str) -> None:
        await asyncio.to_thread(self._write, path, content)


def with_suppress_unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
