"""The fine-tune survives kill -9: killed and resumed, it ends with the same weights, checkpoints and
evaluation curve as a run never killed."""

import signal
import subprocess
import sys
import textwrap

import pandas as pd
import torch
from safetensors.torch import load_file

from heurlens.models.nli_finetune import RESUME_STATE, epoch_batches, finetune_nli
from heurlens.models.settings import FinetuneSettings

SETTINGS = FinetuneSettings(train_examples=64, batch_size=8, epochs=2, length_batches=True, warmup_ratio=0.0)


def _weights(folder):
    return load_file(folder / "model.safetensors")


def test_killed_and_resumed_finetune_ends_with_the_weights_of_an_uninterrupted_one(tmp_path, tiny_bert_dir):
    whole = finetune_nli(tmp_path / "whole", SETTINGS, checkpoint_every=4, evaluate=True, base=tiny_bert_dir,
                         per_subcase=4, in_domain_examples=16)
    # a real SIGKILL in the middle of step 5, after the state of step 4 was written (16 steps in all)
    script = textwrap.dedent(f"""
        import os, signal, torch
        from heurlens.models.nli_finetune import finetune_nli
        from heurlens.models.settings import FinetuneSettings
        steps = []
        original = torch.optim.AdamW.step
        def step(self, *args, **kwargs):
            steps.append(1)
            if len(steps) == 5:
                os.kill(os.getpid(), signal.SIGKILL)
            return original(self, *args, **kwargs)
        torch.optim.AdamW.step = step
        finetune_nli({str(tmp_path / "resumed")!r}, FinetuneSettings(**{SETTINGS.__dict__!r}), checkpoint_every=4,
                     evaluate=True, base={str(tiny_bert_dir)!r}, per_subcase=4, in_domain_examples=16)
    """)
    killed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    work = tmp_path / "resumed.partial"
    assert (work / RESUME_STATE).exists() and not (tmp_path / "resumed" / "model.safetensors").exists()
    assert torch.load(work / RESUME_STATE, weights_only=True)["step"] == 4
    (work / ".model.safetensors.k9x2.tmp").write_bytes(b"x" * 100)  # what a kill in the middle of a write leaves
    (work / "checkpoints" / ".curve.csv.k9x2.tmp").write_bytes(b"x")

    resumed = finetune_nli(tmp_path / "resumed", SETTINGS, checkpoint_every=4, evaluate=True, base=tiny_bert_dir,
                           per_subcase=4, in_domain_examples=16)
    a, b = _weights(whole), _weights(resumed)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["classifier.weight"], _weights(whole / "checkpoints" / "step-0")["classifier.weight"])
    assert not list(resumed.rglob("*.tmp"))  # the finished model holds no half-written file
    steps = sorted(int(p.name.split("-")[1]) for p in (resumed / "checkpoints").iterdir())
    assert steps == [0, 4, 8, 12, 16] and not work.exists() and not (resumed / RESUME_STATE).exists()
    curve_whole, curve_resumed = pd.read_csv(whole / "curve.csv"), pd.read_csv(resumed / "curve.csv")
    pd.testing.assert_frame_equal(curve_whole, curve_resumed)
    assert sorted(curve_whole["step"].unique()) == steps and curve_whole["eval_set"].nunique() == 31


def test_epoch_batches_cover_every_pair_once_and_sort_by_length_within_chunks():
    lengths = [(7 * i) % 23 for i in range(1000)]
    for length_batches in (False, True):
        batches = epoch_batches(lengths, 10, seed=1, epoch=2, length_batches=length_batches)
        assert sorted(i for batch in batches for i in batch) == list(range(1000))
        assert batches == epoch_batches(lengths, 10, seed=1, epoch=2, length_batches=length_batches)
        assert batches != epoch_batches(lengths, 10, seed=1, epoch=3, length_batches=length_batches)
    sorted_batches = epoch_batches(lengths, 10, seed=1, epoch=2, length_batches=True)
    spread = sum(max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in sorted_batches) / len(sorted_batches)
    plain = epoch_batches(lengths, 10, seed=1, epoch=2, length_batches=False)
    assert spread < 1 < sum(max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in plain) / len(plain)


def test_a_second_process_on_first_use_waits_for_the_first_and_loads_its_model(tmp_path, tiny_bert_dir):
    """Two processes fine-tune into one folder at once (as two first uses of the default model do): the
    second waits for the first and returns its model; nothing crashes and no work folder is left."""
    script = textwrap.dedent(f"""
        from heurlens.models.nli_finetune import finetune_nli
        from heurlens.models.settings import FinetuneSettings
        print(finetune_nli({str(tmp_path / "model")!r}, FinetuneSettings(train_examples=64, batch_size=8),
                           base={str(tiny_bert_dir)!r}, wait=True))
    """)
    first, second = (subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True) for _ in range(2))
    outputs = [process.communicate(timeout=300) for process in (first, second)]
    assert first.returncode == second.returncode == 0, [err[-1500:] for _, err in outputs]
    assert {out.strip().splitlines()[-1] for out, _ in outputs} == {str(tmp_path / "model")}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]
    assert (tmp_path / "model" / "model.safetensors").exists()
