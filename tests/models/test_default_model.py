"""Fine-tuning the default model is deterministic for a seed and can save checkpoints."""

import torch
from safetensors.torch import load_file

from heurlens.models import load_model
from heurlens.models.nli_finetune import finetune_nli
from heurlens.models.settings import FinetuneSettings


def test_finetune_is_deterministic_and_checkpoints(tmp_path):
    settings = FinetuneSettings(train_examples=48, batch_size=16, seed=3)
    a = finetune_nli(tmp_path / "a", settings, checkpoint_every=2)
    b = finetune_nli(tmp_path / "b", settings)
    wa, wb = load_file(a / "model.safetensors"), load_file(b / "model.safetensors")
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    assert sorted(p.name for p in (a / "checkpoints").iterdir()) == ["step-0", "step-2"]
    start = load_file(a / "checkpoints" / "step-0" / "model.safetensors")
    assert not torch.equal(start["classifier.weight"], wa["classifier.weight"])  # training moved the head
    assert not (tmp_path / "a.partial").exists()
    model = load_model(a)
    assert model.labels == ("entailment", "neutral", "contradiction") and model.n_heads == 12
