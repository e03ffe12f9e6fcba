"""The one resumable checkpoint (heurlens.runtime.checkpoints): written atomically with its training's identity, read
back on the CPU; a file cut short reads as none; a fine-tune state written before it (identity under "run")
still resumes."""

import json

import torch

from heurlens.runtime.checkpoints import load_checkpoint, save_checkpoint


def test_a_checkpoint_comes_back_with_its_identity_and_a_damaged_one_as_none(tmp_path):
    path = tmp_path / "resume.pt"
    assert load_checkpoint(path) is None
    save_checkpoint(path, "run A", {"step": 3, "weights": torch.arange(4.0), "rng": torch.get_rng_state()})
    identity, state = load_checkpoint(path)
    assert identity == "run A" and state["step"] == 3 and torch.equal(state["weights"], torch.arange(4.0))
    assert [p.name for p in tmp_path.iterdir()] == ["resume.pt"]  # no temporary file left beside it
    path.write_bytes(path.read_bytes()[:40])  # a kill in the middle of a write by another program
    assert load_checkpoint(path) is None


def test_a_fine_tune_state_written_before_the_one_checkpoint_still_resumes(tmp_path):
    run = {"settings": {"lr": 2e-5}, "checkpoint_every": None}
    torch.save({"run": json.dumps(run, sort_keys=True), "step": 500, "seconds": 12.5}, tmp_path / "resume.pt")
    identity, state = load_checkpoint(tmp_path / "resume.pt")
    assert identity == json.dumps(run, sort_keys=True) and state == {"step": 500, "seconds": 12.5}
