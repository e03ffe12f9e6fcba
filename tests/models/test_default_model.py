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


def test_the_first_use_of_the_default_model_says_it_fine_tunes_once_unless_quiet(tmp_path, monkeypatch, capsys):
    """The fine-tune (minutes) is announced on stderr with where the model will be cached, before it starts; quiet
    turns the line off with the bars."""
    import heurlens.models.default as default
    from heurlens.models.settings import FinetuneSettings
    from heurlens.runtime.progress import set_quiet

    monkeypatch.setenv("HEURLENS_CACHE", str(tmp_path))
    started = []
    monkeypatch.setattr(default, "finetune_nli", lambda out, settings, wait: started.append((out, capsys.readouterr())))
    out = default.default_model_dir()
    assert out == tmp_path / "models" / FinetuneSettings().slug() and len(started) == 1
    assert "fine-tuning MiniLM-L6 on SNLI once (1 epoch(s) of 8,000 pairs" in started[0][1].err
    assert f"later runs load it from {out}" in started[0][1].err  # said before the fine-tune began
    set_quiet(True)
    try:
        default.default_model_dir()
    finally:
        set_quiet(False)
    assert len(started) == 2 and started[1][1].err == ""
