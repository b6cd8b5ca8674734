"""Folders that reach every node: a checkpoint the driver has goes to the actors through Ray's object store.

On a cluster without a filesystem every node sees, a PRM checkpoint trained or cached on the head is not on the
node whose actor scores with it. `ship(path)` (on the driver) packs the folder once per process into Ray's
object store with a digest of its content; `receive(shipped)` (in the actor) uses the path itself on the driver's
node, and on any other node unpacks the object into that node's cache_dir()/shipped/<digest>, once per node (a
file lock keeps the actors of one node from unpacking it twice): a path that happens to exist elsewhere is not
trusted to hold the same files. A URI (s3://, gs://, ...) is not shipped:
every node reads it itself (pcr_ray.paths.local_path).
"""

from __future__ import annotations

import hashlib
import io
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray

from pcr_ray.paths import build_once, cache_dir, is_uri, local_path

_SHIPPED: dict[tuple[str, str], ShippedFolder] = {}


@dataclass(frozen=True)
class ShippedFolder:
    """A folder as the driver names it, the digest of its content, and its packed bytes in the object store."""

    path: str
    digest: str = ""
    blob: Any = None  # an ObjectRef of a tar of the folder; None for a URI
    node: str = ""  # the Ray node the driver packed it on: there the path itself is used


def folder_digest(path: str | Path) -> str:
    """A digest of the files under `path`: their relative names and contents."""
    root = Path(path)
    h = hashlib.sha256()
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        h.update(f.relative_to(root).as_posix().encode() + b"\0")
        with f.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()[:24]


def ship(path: str | Path) -> ShippedFolder:
    """On the driver: `path` packed into the object store (once per process and content); a URI as it is."""
    text = str(path)
    if is_uri(text) or not Path(text).is_dir():  # a URI, or a hub name (an off-the-shelf PRM): every node reads it
        return ShippedFolder(text)
    digest = folder_digest(text)
    key = (str(Path(text).resolve()), digest)
    if key not in _SHIPPED:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            tar.add(text, arcname=".")
        _SHIPPED[key] = ShippedFolder(text, digest, ray.put(buf.getvalue()), ray.get_runtime_context().get_node_id())
    return _SHIPPED[key]


def receive(shipped: ShippedFolder | str) -> Path:
    """In an actor: a local folder with the shipped content (the driver's path on the driver's node); a URI copied
    into this node's cache; a hub name as it is."""
    if isinstance(shipped, str) or shipped.blob is None:
        text = shipped if isinstance(shipped, str) else shipped.path
        return local_path(text) if is_uri(text) or Path(text).exists() else Path(text)
    here = Path(shipped.path)
    if shipped.node == ray.get_runtime_context().get_node_id() and here.is_dir():
        return here

    def unpack(tmp: Path) -> None:
        data = ray.get(shipped.blob)
        with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
            tar.extractall(tmp, filter="data")

    return build_once(cache_dir() / "shipped" / shipped.digest, lambda f: f.is_dir() and any(f.iterdir()), unpack)
