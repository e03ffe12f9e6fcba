"""Nothing lost, nothing corrupt trusted: what heurlens refuses, and that it deletes nothing it did not make."""

import json
import shutil

import pytest
from cli_run import assert_one_line_error, heurlens

from heurlens.errors import HeurlensError
from heurlens.models import load_model
from heurlens.models.default import FINETUNE_RECORD, FinetuneSettings, default_model_dir, finetune_nli

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json")


@pytest.fixture(scope="module")
def tiny_finetuned(tmp_path_factory):
    """A default-model fine-tuning run on 32 pairs (a real ``heurlens finetune`` output folder)."""
    return finetune_nli(tmp_path_factory.mktemp("ft") / "model", FinetuneSettings(train_examples=32, batch_size=16))


def test_finetune_never_deletes_an_existing_folder(tmp_path):
    out = tmp_path / "runs" / "x"
    out.mkdir(parents=True)
    (out / "NOTES.txt").write_text("notes")
    assert_one_line_error(heurlens("finetune", "--examples", "32", "--out", str(out)), "is not empty")
    assert (out / "NOTES.txt").read_text() == "notes" and sorted(p.name for p in out.iterdir()) == ["NOTES.txt"]
    assert not (tmp_path / "runs" / "x.partial").exists()


def test_finetune_into_a_file_is_refused_before_training(tmp_path):
    target = tmp_path / "model.bin"
    target.write_text("keep me")
    assert_one_line_error(heurlens("finetune", "--examples", "32", "--out", str(target)), "is a file")
    assert target.read_text() == "keep me" and not (tmp_path / "model.bin.partial").exists()


def test_finetune_again_returns_the_finished_folder_and_refuses_other_settings(tiny_finetuned):
    record = (tiny_finetuned / FINETUNE_RECORD).read_text()
    assert finetune_nli(tiny_finetuned, FinetuneSettings(train_examples=32, batch_size=16)) == tiny_finetuned
    assert (tiny_finetuned / FINETUNE_RECORD).read_text() == record  # not trained again
    with pytest.raises(HeurlensError, match="fine-tuned with other settings; nothing was changed"):
        finetune_nli(tiny_finetuned, FinetuneSettings(train_examples=48, batch_size=16))


def test_finetune_into_an_empty_folder(tmp_path):
    out = tmp_path / "empty"
    out.mkdir()
    assert finetune_nli(out, FinetuneSettings(train_examples=16, batch_size=16)) == out
    assert (out / FINETUNE_RECORD).exists() and (out / "model.safetensors").exists()


def test_model_without_its_tokenizer_is_refused(tiny_bert_dir, tmp_path):
    bare = tmp_path / "bare"
    shutil.copytree(tiny_bert_dir, bare)
    for name in TOKENIZER_FILES:
        (bare / name).unlink(missing_ok=True)
    with pytest.raises(HeurlensError, match="no usable tokenizer .* tokenizer files are missing"):
        load_model(bare)
    assert_one_line_error(heurlens("ablate", "--heads", "L0.H0", "--model", str(bare)), "no usable tokenizer")


def test_damaged_finetuned_model_is_named_with_its_fix(tiny_finetuned, tmp_path):
    for name, damage in (("tokenizer.json", lambda p: p.unlink()),
                         ("model.safetensors", lambda p: p.write_bytes(p.read_bytes()[:1000]))):
        copy = tmp_path / name
        shutil.copytree(tiny_finetuned, copy)
        damage(copy / name)
        with pytest.raises(HeurlensError, match=f"{copy / name} is (missing|damaged).*Delete {copy}"):
            load_model(copy)


def test_damaged_cached_default_model_says_to_delete_it(tmp_path, monkeypatch):
    monkeypatch.setenv("HEURLENS_CACHE", str(tmp_path))
    damaged = tmp_path / "models" / FinetuneSettings().slug()
    damaged.mkdir(parents=True)
    (damaged / "config.json").write_text("{}")
    with pytest.raises(HeurlensError, match=f"cached default model {damaged} is damaged.*delete that folder"):
        default_model_dir()
    assert (damaged / "config.json").exists()


def test_fingerprint_is_the_content_not_the_path(tiny_bert_dir, tmp_path):
    copy = tmp_path / "elsewhere"
    shutil.copytree(tiny_bert_dir, copy)
    assert load_model(copy).fingerprint() == load_model(tiny_bert_dir).fingerprint()
    tokenizer = json.loads((copy / "tokenizer.json").read_text())
    tokenizer["model"]["vocab"]["thee"] = tokenizer["model"]["vocab"].pop("the")  # one word renamed
    (copy / "tokenizer.json").write_text(json.dumps(tokenizer))
    assert load_model(copy).fingerprint() != load_model(tiny_bert_dir).fingerprint()
