"""Which local process is at the other end of a loopback TCP connection, from ``/proc``.

A Unix socket names its caller (``SO_PEERCRED``); TCP does not. But on one machine the kernel
still knows: ``/proc/net/tcp`` lists each socket with its two addresses and its inode, and a
process holding that socket has a ``socket:[inode]`` link in ``/proc/<pid>/fd``. So a report that
arrives over loopback TCP (Claude Code's native ``http`` hooks cannot use a Unix socket) is taken
only if a process of the session it names holds the connecting socket: a process cannot put its
socket into another pane's process, so the guarantee of the report socket holds.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable


def _hex_address(host: str, port: int) -> str:
    """``/proc/net/tcp``'s form of an IPv4 address: the address as the kernel stores it, then the port."""
    return f"{int.from_bytes(socket.inet_aton(host), 'little'):08X}:{port:04X}"


def socket_inode(client: tuple[str, int], server: tuple[str, int], table: str = "/proc/net/tcp") -> int | None:
    """The inode of the client's end of the connection ``client`` → ``server`` (IPv4), if listed."""
    local, remote = _hex_address(*client), _hex_address(*server)
    try:
        with open(table) as f:
            next(f, None)  # the header line
            for line in f:
                fields = line.split()
                if len(fields) > 9 and fields[1] == local and fields[2] == remote:
                    inode = int(fields[9])
                    return inode or None
    except OSError:
        return None
    return None


def holders(inode: int, pids: Iterable[int]) -> list[int]:
    """Those of ``pids`` with ``socket:[inode]`` among their open files (unreadable ones: not)."""
    link = f"socket:[{inode}]"
    found = []
    for pid in pids:
        folder = f"/proc/{pid}/fd"
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            try:
                if os.readlink(f"{folder}/{name}") == link:
                    found.append(pid)
                    break
            except OSError:
                continue
    return found
