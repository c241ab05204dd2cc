"""The stream target's "weights": a small file each replica reads whole at its start, as a vLLM replica reads its
checkpoint, and refuses to start without (``restart-fails``, issue 48: a replacement that cannot load its weights).

It holds no model (the stream target computes nothing): a magic line, a JSON line saying its payload's length and
sha256, then that payload (deterministic bytes, the same on every node). :func:`load` reads it and raises
:class:`WeightsUnreadable` when it is missing, not this format, or truncated (fewer bytes than its header says: what
a vLLM start meets in a truncated safetensors file), or its bytes do not hash to the header's.

Provisioning: the file is the rig's, written by the first replica that starts on a node where it is absent
(:func:`provision`, atomically: a temporary file renamed into place; every writer writes the same bytes), at
:func:`default_path` unless the deployment's ``weights_path`` argument names another. So every existing experiment
starts as before: the file exists and reads. The fault (``restart-fails``, :mod:`serve_apps.weights_swap`) never
leaves the path absent: it swaps a truncated copy in atomically, which a start reads as truncated and refuses.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

MAGIC = b"availproof-stream-weights v1\n"
PAYLOAD_BYTES = 64 * 1024


class WeightsUnreadable(RuntimeError):
    """The weights cannot be loaded: the replica refuses to start (its constructor raises, as vLLM's does)."""


def default_path() -> str:
    """Where the rig's weights file is on a node: under ``$AVAILPROOF_HOME`` (default ``~/.availproof``)."""
    home = Path(os.environ.get("AVAILPROOF_HOME", Path.home() / ".availproof"))
    return str(home / "stream-weights" / "weights.bin")


def payload() -> bytes:
    """The payload: deterministic bytes (a sha256 chain), the same on every node."""
    out, block = bytearray(), b"availproof"
    while len(out) < PAYLOAD_BYTES:
        block = hashlib.sha256(block).digest()
        out += block
    return bytes(out[:PAYLOAD_BYTES])


def content() -> bytes:
    """The whole file as the rig writes it."""
    body = payload()
    header = json.dumps({"bytes": len(body), "sha256": hashlib.sha256(body).hexdigest()}).encode() + b"\n"
    return MAGIC + header + body


def provision(path: str) -> bool:
    """Write the rig's weights file at ``path`` where none is (atomically); True when it wrote one."""
    p = Path(path)
    if p.exists():
        return False
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    tmp.write_bytes(content())
    os.replace(tmp, p)
    return True


def load(path: str) -> str:
    """Read the weights whole; their sha256. Raises :class:`WeightsUnreadable` with the reason when they cannot
    be loaded (missing, unreadable, not this format, truncated, corrupted)."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise WeightsUnreadable(f"weights {path}: cannot be read ({type(e).__name__}: {e})") from e
    if not data.startswith(MAGIC):
        raise WeightsUnreadable(f"weights {path}: not a weights file ({len(data)} bytes, no header)")
    line_end = data.find(b"\n", len(MAGIC))
    try:
        header = json.loads(data[len(MAGIC):line_end]) if line_end > 0 else None
        want, digest = int(header["bytes"]), str(header["sha256"])
    except (ValueError, TypeError, KeyError) as e:
        raise WeightsUnreadable(f"weights {path}: truncated or corrupted header ({len(data)} bytes)") from e
    body = data[line_end + 1:]
    if len(body) < want:
        raise WeightsUnreadable(f"weights {path}: truncated ({len(body)} of {want} payload bytes)")
    if hashlib.sha256(body[:want]).hexdigest() != digest:
        raise WeightsUnreadable(f"weights {path}: corrupted (its payload does not hash to its header's sha256)")
    return digest
