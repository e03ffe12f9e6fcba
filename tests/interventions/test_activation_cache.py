"""The activation cache: ablation tables equal whole passes' with the residual streams read from disk, damaged
entries are computed again, the cache stays under its size cap (least recently used evicted), and
``heurlens cache`` lists and clears it."""

import json

import pandas as pd
import pytest
import torch
from cli_run import assert_refused, heurlens_in_process

from heurlens.errors import HeurlensError
from heurlens.evaluate import EvalSet, mean_kl, predict_logits
from heurlens.interventions.ablation import ablate_groups, ablation_hooks
from heurlens.interventions.activation_cache import entry_dir, full_model_logits, residual_streams
from heurlens.interventions.means import compute_means
from heurlens.interventions.units import Unit
from heurlens.models import load_model
from heurlens.runtime.cache_contents import COMPUTED_KINDS, cache_limit, entries
from heurlens.runtime.call_context import call_context


@pytest.fixture(scope="module")
def four_layer_bert(random_bert_dir):
    return load_model(random_bert_dir(4, 2, seed=3))


def padded_set(seed: int, sizes=((4, 9), (3, 6), (5, 12)), name: str = "random") -> EvalSet:
    """Right-padded batches of random tokens and labels; the uneven lengths are the same for every seed (so every
    set's activations take the same room)."""
    lengths = torch.Generator().manual_seed(0)
    generator = torch.Generator().manual_seed(seed)
    batches = []
    for size, length in sizes:
        mask = (torch.arange(length) < torch.randint(2, length + 1, (size, 1), generator=lengths)).long()
        batches.append({"input_ids": torch.randint(1000, 30000, (size, length), generator=generator) * mask,
                        "attention_mask": mask, "token_type_ids": torch.zeros(size, length, dtype=torch.long)})
    total = sum(size for size, _ in sizes)
    return EvalSet(name, batches, torch.randint(0, 3, (total,), generator=generator),
                   ("entailment", "neutral", "contradiction"))


def computed_bytes(root) -> int:
    return sum(e.size for e in entries(root) if e.kind in COMPUTED_KINDS)


def test_tables_equal_whole_passes_at_every_layer_first_and_second_time(four_layer_bert, tmp_path, monkeypatch):
    """A head and the MLP of every layer, mean-ablated: the table computed on a cold cache and the one read from
    it equal a table built from whole ablated passes (predict_logits with the hooks), number for number."""
    monkeypatch.setenv("HEURLENS_CACHE", str(tmp_path))
    model = four_layer_bert
    data = padded_set(0)
    means = compute_means(model, padded_set(1))
    groups = [[Unit(layer, layer % 2)] for layer in range(4)] + [[Unit(layer)] for layer in range(4)]
    cold = ablate_groups(model, groups, [data], method="mean", means=means)
    assert sorted(p.name for p in tmp_path.glob("activations/*/*")) == [
        "logits.safetensors", "residual-1.safetensors", "residual-2.safetensors", "residual-3.safetensors"]
    warm = ablate_groups(model, groups, [data], method="mean", means=means)
    pd.testing.assert_frame_equal(cold, warm, check_exact=True)
    full = predict_logits(model, data)
    for group, row in zip(groups, warm.itertuples()):
        whole = predict_logits(model, data, fwd_hooks=ablation_hooks(model, group, method="mean", means=means))
        assert row.ablated_accuracy == data.accuracy(whole, model.labels)
        assert row.kl == pytest.approx(mean_kl(full, whole), abs=1e-7)


def test_stored_residual_drops_padding_and_puts_it_back(four_layer_bert, tmp_path, monkeypatch):
    """On disk: the real tokens only, float32; read back: the computed stream at every real position, zeros at
    padding."""
    from safetensors.torch import load_file

    monkeypatch.setenv("HEURLENS_CACHE", str(tmp_path))
    data = padded_set(2)
    computed = residual_streams(four_layer_bert, data, [2], call_context(four_layer_bert))[2].batches
    stored = load_file(next(tmp_path.glob("activations/*/residual-2.safetensors")))["residual"]
    real_tokens = sum(int(b["attention_mask"].sum()) for b in data.batches)
    assert stored.dtype == torch.float32 and stored.shape == (real_tokens, 32)
    read = residual_streams(four_layer_bert, data, [2], call_context(four_layer_bert))[2].batches
    for fresh, again, batch in zip(computed, read, data.batches):
        real = batch["attention_mask"].bool()
        assert torch.equal(fresh[real], again[real]) and not again[~real].any()


def test_a_damaged_or_foreign_entry_is_computed_again(four_layer_bert, tmp_path, monkeypatch):
    monkeypatch.setenv("HEURLENS_CACHE", str(tmp_path))
    model = four_layer_bert
    data = padded_set(3)
    first = residual_streams(model, data, [3], call_context(model))[3].batches
    path = next(tmp_path.glob("activations/*/residual-3.safetensors"))
    runs = []
    handle = model.bridge.blocks[0].register_forward_pre_hook(lambda *_: runs.append(1))
    try:
        path.write_bytes(path.read_bytes()[:100])  # cut short
        streams = residual_streams(model, data, [3], call_context(model))[3].batches
        assert all(torch.equal(a, b) for a, b in zip(streams, first)) and runs
        from safetensors.torch import save_file
        save_file({"residual": torch.zeros(5, 32)}, str(path))  # another set's tokens
        runs.clear()
        streams = residual_streams(model, data, [3], call_context(model))[3].batches
        assert all(torch.equal(a, b) for a, b in zip(streams, first)) and runs
        runs.clear()
        residual_streams(model, data, [3], call_context(model))  # now whole again: read, nothing run
        assert not runs
    finally:
        handle.remove()
    with pytest.raises(HeurlensError, match="enter blocks 1..3"):
        residual_streams(model, data, [0], call_context(model))


def test_nan_in_a_cached_entry_is_computed_again_and_never_read_as_a_result(four_layer_bert, tmp_path, monkeypatch):
    """NaN written into the cached residual stream and logits (a damaged disk, another program) was used as it
    was: the full accuracy fell and the KL read 0.0000. Now such an entry is computed again, and a NaN the
    model itself gives is refused by name instead of shown as a number."""
    from safetensors.torch import load_file, save_file

    monkeypatch.setenv("HEURLENS_CACHE", str(tmp_path))
    model = four_layer_bert
    data, means = padded_set(6), compute_means(model, padded_set(7))
    clean = ablate_groups(model, [[Unit(2, 0)]], [data], method="mean", means=means)
    for path in tmp_path.glob("activations/*/*.safetensors"):
        tensors = load_file(str(path))
        for tensor in tensors.values():
            tensor.view(-1)[::7] = float("nan")
        save_file(tensors, str(path), metadata={"block_output": "tensor"} if "residual" in path.name else None)
    again = ablate_groups(model, [[Unit(2, 0)]], [data], method="mean", means=means)
    pd.testing.assert_frame_equal(clean, again, check_exact=True)
    assert all(t.isfinite().all() for p in tmp_path.glob("activations/*/*.safetensors") for t in load_file(str(p)).values())
    assert torch.isnan(torch.tensor(mean_kl(torch.tensor([[float("nan"), 0.0]]), torch.zeros(1, 2))))
    broken = compute_means(model, padded_set(7))
    broken.heads[1][0, 0] = float("nan")
    with pytest.raises(HeurlensError, match="hold NaN or inf values"):
        ablate_groups(model, [[Unit(2, 0)]], [data], method="mean", means=broken)
    with torch.no_grad():
        nan_model = load_model(model.model_id)
        next(nan_model.head.parameters()).fill_(float("nan"))
    with pytest.raises(HeurlensError, match="gives NaN or inf scores on random"):
        ablate_groups(nan_model, [[Unit(2, 0)]], [data], method="mean", means=means)


def test_cache_false_leaves_the_cache_folder_untouched_and_gives_the_same_tables(four_layer_bert, tmp_path,
                                                                                  monkeypatch):
    """cache=False on every library call that reads or writes the activation cache, or a disk_cache(False) block
    around calls that leave cache= unsaid: the folder is never even made, and each table equals the one computed
    with the cache."""
    import heurlens
    from heurlens.analysis import group_superadditivity, single_unit_scan
    from heurlens.runtime.cache import disk_cache

    cache = tmp_path / "cache"
    monkeypatch.setenv("HEURLENS_CACHE", str(cache))
    model, data = four_layer_bert, padded_set(8)
    means = compute_means(model, padded_set(9))
    config = heurlens.PruneSettings(total_steps=4, warmup_steps=1)

    def every_call(cache_flag: bool | None) -> list:
        subnetworks = heurlens.prune(model, data, sparsity=0.3, seeds=[0], config=config, means=means, progress=False,
                                     cache=cache_flag)
        return [heurlens.ablate(model, "L2.H1", [data], method="mean", means=means, cache=cache_flag),
                ablate_groups(model, [[Unit(3, 0)], [Unit(1)]], [data], method="mean", means=means, cache=cache_flag),
                single_unit_scan(model, "L2.*", [data], means=means, progress=False, cache=cache_flag),
                group_superadditivity(model, "L1.H0,L2.H1,L3.MLP", [data], means=means, progress=False,
                                      cache=cache_flag)[0],
                heurlens.evaluate_subnetworks(model, subnetworks, [data], means=means, cache=cache_flag),
                subnetworks[0].log_alpha_heads]

    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 4 steps miss the target: not what this test is about
        without = every_call(False)
        assert not cache.exists()
        with disk_cache(False):
            around = every_call(None)
        assert not cache.exists()
        with_cache = every_call(None)
    assert any(cache.glob("activations/*/residual-*.safetensors"))
    for table, in_block, cached in zip(without[:-1], around[:-1], with_cache[:-1]):
        pd.testing.assert_frame_equal(table, cached, check_exact=True)
        pd.testing.assert_frame_equal(in_block, cached, check_exact=True)
    assert torch.equal(without[-1], with_cache[-1]) and torch.equal(around[-1], with_cache[-1])


def test_the_cache_never_grows_past_its_cap_and_evicts_the_least_recently_used(four_layer_bert, tmp_path,
                                                                                monkeypatch):
    """A cap of 3.5 entries; six sets of two entries each, set-0's first entry read after each set: the cache
    never passes the cap, set-0's entry (always recently used) survives, the others' first entries do not."""
    monkeypatch.setenv("HEURLENS_CACHE", str(tmp_path))
    model = four_layer_bert
    fingerprint = model.fingerprint()
    sets = [padded_set(10 + i, name=f"set-{i}") for i in range(6)]
    residual_streams(model, sets[0], [1], call_context(model))
    one_entry = computed_bytes(tmp_path)  # every entry takes this room (same tokens, same width)
    monkeypatch.setenv("HEURLENS_CACHE_LIMIT_GB", str(3.5 * one_entry / 2**30))
    expected = {}
    for data in sets:
        expected[data.name] = residual_streams(model, data, [1, 2], call_context(model))[2].batches
        residual_streams(model, sets[0], [1], call_context(model))
        assert computed_bytes(tmp_path) <= cache_limit()
    assert (entry_dir(fingerprint, sets[0]) / "residual-1.safetensors").exists()
    assert not any((entry_dir(fingerprint, data) / "residual-1.safetensors").exists() for data in sets[1:-1])
    assert len(entries(tmp_path)) == 3
    for data in sets:  # evicted or not, what is read is right
        streams = residual_streams(model, data, [2], call_context(model))[2].batches
        assert all(torch.equal(a, b) for a, b in zip(streams, expected[data.name]))
        assert computed_bytes(tmp_path) <= cache_limit()
    monkeypatch.setenv("HEURLENS_CACHE_LIMIT_GB", "0")  # nothing fits: computed, returned, not stored
    before = computed_bytes(tmp_path)
    logits = full_model_logits(model, padded_set(99), call_context(model))
    assert torch.equal(logits, predict_logits(model, padded_set(99))) and computed_bytes(tmp_path) == before
    monkeypatch.setenv("HEURLENS_CACHE_LIMIT_GB", "lots")
    with pytest.raises(HeurlensError, match="HEURLENS_CACHE_LIMIT_GB='lots' is not a size"):
        cache_limit()


def test_cache_command_lists_and_clears(four_layer_bert, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HEURLENS_CACHE", str(tmp_path))
    model = four_layer_bert
    data = padded_set(4, name="listed-set")
    residual_streams(model, data, [2], call_context(model))
    full_model_logits(model, data, call_context(model))
    (tmp_path / "models" / "some-model").mkdir(parents=True)
    (tmp_path / "models" / "some-model" / "weights.bin").write_bytes(b"x" * 1000)
    status, out, _ = heurlens_in_process(capsys, "cache", "list", "--json")
    rows = json.loads(out)
    assert status == 0 and {(r["kind"], r["evictable"]) for r in rows} == {("activations", True), ("models", False)}
    assert {r["what"] for r in rows if r["kind"] == "activations"} == {
        f"{held} of {model.model_id} on listed-set (12 examples)" for held in ("logits", "residual entering block 2")}
    assert {r["model"] for r in rows if r["kind"] == "activations"} == {model.fingerprint()}
    assert heurlens_in_process(capsys, "cache", "list")[1].count("listed-set") == 2
    assert_refused(capsys, "say what to clear", "cache", "clear")
    assert_refused(capsys, "holds no kind sausages", "cache", "clear", "--kind", "sausages")
    # an unset shell variable ($FP) must not turn --model into --all: an empty prefix matched every entry
    assert_refused(capsys, "'' is not a model fingerprint", "cache", "clear", "--model", "")
    assert_refused(capsys, "'$fp' is not a model fingerprint", "cache", "clear", "--model", "$FP")
    assert_refused(capsys, "--all clears everything", "cache", "clear", "--all", "--unused-days", "1")
    assert len(list(tmp_path.glob("activations/*/*"))) == 2 and (tmp_path / "models" / "some-model").exists()
    assert heurlens_in_process(capsys, "cache", "clear", "--model", "0000")[1].startswith("removed 0 entries")
    assert heurlens_in_process(capsys, "cache", "clear", "--unused-days", "1")[1].startswith("removed 0 entries")
    cleared = heurlens_in_process(capsys, "cache", "clear", "--model", model.fingerprint()[:6].upper())[1]
    assert cleared.startswith("removed 2 entries")
    assert not list(tmp_path.glob("activations/*")) and (tmp_path / "models" / "some-model" / "weights.bin").exists()
    full_model_logits(model, data, call_context(model))
    # without --kind or --all only computed entries go: the model folder (never used "today") stays
    assert heurlens_in_process(capsys, "cache", "clear", "--unused-days", "0")[1].startswith("removed 1 entry,")
    assert (tmp_path / "models" / "some-model" / "weights.bin").exists()
    assert heurlens_in_process(capsys, "cache", "clear", "--kind", "models")[1].startswith("removed 1 entry,")
    (tmp_path / "models" / "another").mkdir()
    full_model_logits(model, data, call_context(model))
    assert heurlens_in_process(capsys, "cache", "clear", "--all")[1].startswith("removed 2 entries,")
    assert not (tmp_path / "models" / "another").exists() and not list(tmp_path.glob("activations/*/*"))


def test_cache_clear_never_removes_what_heurlens_did_not_write(four_layer_bert, tmp_path, monkeypatch, capsys):
    """$HEURLENS_CACHE pointed at a shared folder (~/.cache): other programs' folders and files are listed as foreign
    and left by --all and refused by --kind; --unused-days NaN (which passes every comparison) is refused."""
    from heurlens.runtime.cache_contents import clear

    monkeypatch.setenv("HEURLENS_CACHE", str(tmp_path))
    (tmp_path / "Documents").mkdir()
    (tmp_path / "Documents" / "thesis.txt").write_text("x")
    (tmp_path / "huggingface" / "hub").mkdir(parents=True)
    (tmp_path / "notes.txt").write_text("mine")
    full_model_logits(four_layer_bert, padded_set(4, name="listed-set"), call_context(four_layer_bert))
    rows = json.loads(heurlens_in_process(capsys, "cache", "list", "--json")[1])
    assert sorted(r["what"] for r in rows if r["kind"] == "foreign") == [
        "Documents (not heurlens': never removed)", "huggingface (not heurlens': never removed)",
        "notes.txt (not heurlens': never removed)"]
    assert "3 item(s) heurlens did not write, left alone" in heurlens_in_process(capsys, "cache", "list")[1]
    assert_refused(capsys, "Documents: not a kind heurlens writes", "cache", "clear", "--kind", "Documents")
    for days in ("nan", "inf", "-1"):
        assert_refused(capsys, "--unused-days", "cache", "clear", "--kind", "activations", "--unused-days", days)
    with pytest.raises(HeurlensError, match="unused_days=nan"):
        clear(tmp_path, unused_days=float("nan"))
    with pytest.raises(HeurlensError, match="huggingface: not a kind heurlens writes"):
        clear(tmp_path, kinds=["huggingface"])
    assert list(tmp_path.glob("activations/*/*"))  # nothing was removed by the refusals
    assert heurlens_in_process(capsys, "cache", "clear", "--all")[1].startswith("removed 1 entry,")
    assert (tmp_path / "Documents" / "thesis.txt").read_text() == "x" and (tmp_path / "huggingface" / "hub").is_dir()
    assert (tmp_path / "notes.txt").read_text() == "mine" and not list(tmp_path.glob("activations/*/*"))


def test_a_users_file_inside_heurlens_own_cache_folders_is_listed_and_never_removed(four_layer_bert, tmp_path,
                                                                                     monkeypatch, capsys):
    """A user's files put in models/, downloads/ and means/ (heurlens' own folders): listed as not heurlens' and left
    by ``cache clear --all`` (before: removed with the entries), while heurlens' entries beside them go."""
    monkeypatch.setenv("HEURLENS_CACHE", str(tmp_path))
    (tmp_path / "models" / "a-model").mkdir(parents=True)
    mine = [tmp_path / "models" / "notes.txt", tmp_path / "downloads" / "paper.pdf",
            tmp_path / "means" / "my-means.safetensors"]
    for path in mine:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("mine")
    full_model_logits(four_layer_bert, padded_set(4, name="listed-set"), call_context(four_layer_bert))
    rows = json.loads(heurlens_in_process(capsys, "cache", "list", "--json")[1])
    assert sorted(r["what"] for r in rows if r["kind"] == "foreign") == [
        f"{path.relative_to(tmp_path)} (not heurlens': never removed)" for path in sorted(mine)]
    assert heurlens_in_process(capsys, "cache", "clear", "--all")[1].startswith("removed 2 entries,")
    assert all(path.read_text() == "mine" for path in mine)
    assert not (tmp_path / "models" / "a-model").exists() and not list(tmp_path.glob("activations/*/*"))


def test_a_native_model_whose_blocks_return_tuples_resumes_from_the_cache(tmp_path, monkeypatch):
    """TransformerLens' native models unpack each block's output as a 1-tuple: the stored stream says so, and
    passes resumed from it (second call) equal whole passes on the hand-set model of tests/planted.py."""
    from planted import build_planted_model

    from heurlens.interventions.resumed_passes import ablated_logits
    from heurlens.tasks import token_batches

    monkeypatch.setenv("HEURLENS_CACHE", str(tmp_path))
    model = build_planted_model()
    data = token_batches(torch.randint(0, 4, (24, 6), generator=torch.Generator().manual_seed(1)), batch_size=8)
    hooks = ablation_hooks(model, "L1.MLP", method="mean", means=compute_means(model, data))
    whole = predict_logits(model, data, fwd_hooks=hooks)
    assert not torch.equal(whole, predict_logits(model, data))  # the MLP carries information
    for _ in range(2):  # computed, then read
        assert torch.equal(ablated_logits(model, [(1, hooks)], data)[0], whole)
    assert residual_streams(model, data, [1], call_context(model))[1].as_tuple
