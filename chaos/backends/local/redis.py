"""The external Redis that holds the GCS state (Debian's redis-server, append-only file on)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

from chaos.backends.local import procs
from chaos.base.errors import SetupError


def redis_binary() -> str:
    path = shutil.which("redis-server") or ("/usr/bin/redis-server" if Path("/usr/bin/redis-server").exists() else None)
    if not path:
        raise SetupError("redis-server not found: install it (Debian: apt-get install -y redis-server)")
    return path


def start(host: str, port: int, data_dir: Path, prefix: list[str] | None = None,
          env: dict[str, str] | None = None) -> int:
    """Start redis-server in a session of its own; return its PID once it answers PING.

    ``prefix`` runs it through another program first (``ip netns exec NS``, which execs it: the
    PID stays redis-server's). ``env``: its environment (the cluster's, without secrets), else
    this process's."""
    data_dir.mkdir(parents=True, exist_ok=True)
    log = open(data_dir / "redis.log", "ab")
    proc = subprocess.Popen(
        (prefix or []) + [
            redis_binary(),
            "--bind", host,
            "--port", str(port),
            "--dir", str(data_dir),
            "--appendonly", "yes",
            "--appendfsync", "everysec",
            "--save", "",
            "--protected-mode", "no",
            "--daemonize", "no",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        env=env,
    )
    log.close()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = (data_dir / "redis.log").read_text(errors="replace").strip().splitlines()[-1:]
            raise SetupError(f"redis-server exited with {proc.returncode}: {' '.join(tail)}")
        if ping(host, port):
            return proc.pid
        time.sleep(0.05)
    procs.stop_pid(proc.pid)
    raise SetupError(f"redis-server did not answer on {host}:{port} within 20 s")


def command(host: str, port: int, *args: str, timeout: float = 1.0) -> bytes | None:
    """Send one RESP command and return the raw reply, or None when Redis does not answer."""
    payload = f"*{len(args)}\r\n".encode() + b"".join(
        f"${len(a.encode())}\r\n".encode() + a.encode() + b"\r\n" for a in args
    )
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(payload)
            chunks = []
            while True:
                data = s.recv(65536)
                if not data:
                    break
                chunks.append(data)
                if _complete(b"".join(chunks)):
                    break
            return b"".join(chunks)
    except OSError:
        return None


def _complete(reply: bytes) -> bool:
    if reply[:1] in (b"+", b"-", b":"):
        return reply.endswith(b"\r\n")
    if reply[:1] == b"$":
        head, _, rest = reply.partition(b"\r\n")
        n = int(head[1:])
        return n < 0 or len(rest) >= n + 2
    return reply.endswith(b"\r\n")


def ping(host: str, port: int) -> bool:
    return command(host, port, "PING") == b"+PONG\r\n"


def info(host: str, port: int) -> dict[str, str]:
    """A few fields of INFO (keys, memory, persistence), or {} when unreachable."""
    raw = command(host, port, "INFO")
    if not raw:
        return {}
    fields = {}
    for line in raw.decode(errors="replace").splitlines():
        if ":" in line and not line.startswith("#"):
            k, _, v = line.partition(":")
            fields[k.strip()] = v.strip()
    dbsize = command(host, port, "DBSIZE") or b""
    if dbsize.startswith(b":"):
        fields["dbsize"] = dbsize[1:].strip().decode()
    return fields
