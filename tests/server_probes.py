"""What the real-server tests look at from outside a server: the sockets listening on a port and
the processes left behind (read from /proc)."""

from __future__ import annotations

import os
from pathlib import Path


def listening_addresses(port: int) -> set[str]:
    """Local addresses (hex, as in /proc/net/tcp*) with a socket listening on `port`."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            address, hex_port = fields[1].rsplit(":", 1)
            if int(hex_port, 16) == port and fields[3] == "0A":  # 0A: LISTEN
                found.add(address)
    return found


def all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def cmdline(pid: int) -> str:
    """The command line of `pid`, arguments joined by spaces ("" once it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""
