"""Checkpoints that reach every node: URIs read through pyarrow.fs, folders shipped through Ray's object store."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pcr_ray.paths import is_uri, local_path, put_folder


def _folder(root: Path) -> Path:
    (root / "encoder").mkdir(parents=True)
    (root / "prm.json").write_text('{"kind": "csp"}')
    (root / "encoder" / "weights.bin").write_bytes(bytes(range(256)) * 64)
    return root


def test_a_uri_is_copied_into_the_cache_once_and_a_path_is_itself(tmp_path, monkeypatch):
    monkeypatch.setenv("PCR_RAY_CACHE", str(tmp_path / "cache"))
    src = _folder(tmp_path / "ckpt")
    assert not is_uri(src) and local_path(src) == src
    uri = f"file://{src}"
    assert is_uri(uri) and is_uri("s3://bucket/prm/csp")
    got = local_path(uri)  # pyarrow.fs: the same code path as s3:// or gs://
    assert got.parent == tmp_path / "cache" / "remote"
    assert (got / "encoder" / "weights.bin").read_bytes() == (src / "encoder" / "weights.bin").read_bytes()
    stamp = (got / "prm.json").stat().st_mtime_ns
    assert local_path(uri) == got and (got / "prm.json").stat().st_mtime_ns == stamp  # once
    dest = put_folder(src, f"file://{tmp_path / 'out' / 'ckpt'}")
    assert dest.startswith("file://") and (tmp_path / "out" / "ckpt" / "prm.json").read_text() == '{"kind": "csp"}'
    assert put_folder(src, tmp_path / "plain") == str(tmp_path / "plain") and (tmp_path / "plain" / "encoder").is_dir()


def test_a_missing_checkpoint_uri_is_a_clear_error(tmp_path, monkeypatch):
    from pcr_ray.prm.build import MissingCheckpointError, require_checkpoint

    monkeypatch.setenv("PCR_RAY_CACHE", str(tmp_path / "cache"))
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "x").write_text("not a checkpoint")
    with pytest.raises(MissingCheckpointError, match="no prm.json"):
        require_checkpoint(f"file://{tmp_path / 'empty'}")


@pytest.mark.ray
def test_a_shipped_folder_reaches_an_actor_whose_node_lacks_it(ray_session, tmp_path):
    """The driver packs the folder into the object store; an actor that cannot see the driver's path unpacks it into
    its own cache, once; one that sees the same content uses the path itself."""
    import ray

    from pcr_ray.pipeline.shipping import folder_digest, receive, ship

    src = _folder(tmp_path / "driver_ckpt")
    shipped = ship(src)
    assert shipped.digest == folder_digest(src) and ship(src) is shipped  # packed once per process and content
    assert receive(shipped) == src  # this node has it, unchanged

    @ray.remote
    def on_a_node_without_it(sf, cache: str):
        import os

        os.environ["PCR_RAY_CACHE"] = cache
        got = receive(sf)
        return str(got), (got / "encoder" / "weights.bin").read_bytes() == bytes(range(256)) * 64

    moved = ship(src)
    shutil.move(src, tmp_path / "gone")  # as on another node: the driver's path does not exist there
    where, same = ray.get(on_a_node_without_it.remote(moved, str(tmp_path / "node_cache")))
    assert same and Path(where) == tmp_path / "node_cache" / "shipped" / shipped.digest
    assert ray.get(on_a_node_without_it.remote(moved, str(tmp_path / "node_cache")))[0] == where  # unpacked once
    uri = ship(f"file://{tmp_path / 'gone'}")
    assert uri.blob is None and uri.path.startswith("file://")  # a URI: every node reads it itself
