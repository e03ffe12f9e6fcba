"""Weights in bfloat16 or float16 (``load_model(dtype=)``, ``--weights-dtype``, a folder saved that way, or a bridge
the user booted that way), accepted everywhere: the float32 results within bfloat16's tolerance, means kept in
float32, and pruning keeping the planted units (tests/planted.py: its weights are small integers, exact in bfloat16).
"""

import pytest
import torch
from cli_run import heurlens_in_process
from planted import PLANTED, build_planted_model

import heurlens
from heurlens.analysis import group_superadditivity, head_detector_scores, single_unit_scan
from heurlens.tasks import token_batches

BF16 = torch.bfloat16
SETTINGS = heurlens.PruneSettings()  # the default schedule


def squared_norm(scores, task) -> float:
    """A metric with no labels and not linear in the scores (a mean ablation keeps linear ones' means): the mean
    squared norm of the scores."""
    return float(scores.pow(2).sum(-1).mean())


@pytest.fixture(scope="module")
def planted_in_both():
    data = token_batches(torch.randint(0, 4, (128, 6), generator=torch.Generator().manual_seed(0)), batch_size=16)
    return build_planted_model(), build_planted_model().to(BF16), data


def test_means_are_summed_in_float32_and_match_the_float32_models(planted_in_both):
    float32, bfloat16, data = planted_in_both
    assert next(bfloat16.parameters()).dtype == BF16
    means32, means16 = heurlens.compute_means(float32, data), heurlens.compute_means(bfloat16, data)
    for layer in range(2):
        assert means16.heads[layer].dtype == means16.mlps[layer].dtype == torch.float32
        torch.testing.assert_close(means16.heads[layer], means32.heads[layer], atol=2e-2, rtol=1e-2)
        torch.testing.assert_close(means16.mlps[layer], means32.mlps[layer], atol=2e-2, rtol=1e-2)


def test_ablations_and_scans_give_the_float32_results_within_bfloat16_tolerance(planted_in_both):
    float32, bfloat16, data = planted_in_both
    means = heurlens.compute_means(float32, data)
    for unit in ("L0.H1", "L1.H0"):  # units whose output is 0 everywhere: nothing changes, exactly
        assert heurlens.ablate(bfloat16, unit, [data], means=means, metrics={})["kl"].item() == 0
    metrics = {"squared_norm": squared_norm}
    scans = [single_unit_scan(model, "L0.H0,L1.MLP,L1.H1", [data], means=means, progress=False, metrics=metrics)
             for model in (float32, bfloat16)]
    assert (scans[1]["delta"].abs() > 0.1).tolist() == [True, True, False]  # the planted units move the metric
    torch.testing.assert_close(torch.tensor(scans[1]["delta"].to_numpy()), torch.tensor(scans[0]["delta"].to_numpy()),
                               atol=5e-2, rtol=2e-2)
    torch.testing.assert_close(torch.tensor(scans[1]["kl"].to_numpy()), torch.tensor(scans[0]["kl"].to_numpy()),
                               atol=5e-3, rtol=5e-2)
    summaries = [group_superadditivity(model, list(PLANTED), [data], means=means, progress=False, metrics=metrics)[0]
                 for model in (float32, bfloat16)]
    assert summaries[1]["group_drop"].item() == pytest.approx(summaries[0]["group_drop"].item(), rel=2e-2, abs=5e-2)


def test_pruning_bfloat16_weights_keeps_the_planted_units_and_evaluates(planted_in_both):
    _, bfloat16, data = planted_in_both
    subnetworks = heurlens.prune(bfloat16, data, sparsity=2 / 3, seeds=[0, 1], config=SETTINGS, progress=False)
    assert all({str(unit) for unit in s.kept} == set(PLANTED) for s in subnetworks)
    assert subnetworks[0].log_alpha_heads.dtype == torch.float32
    means = heurlens.compute_means(bfloat16, data)
    table = heurlens.evaluate_subnetworks(bfloat16, subnetworks, [data], means=means, metrics={"squared_norm": squared_norm})
    full, pruned = table["squared_norm"].iloc[0], table["squared_norm"].iloc[1]
    assert pruned == pytest.approx(full, abs=1e-6) and table["kl"].iloc[1] < 1e-4  # faithful: only dead units gone


def test_a_bridge_booted_in_bfloat16_and_load_model_dtype(tiny_decoder_dirs):
    from transformer_lens.model_bridge import TransformerBridge

    folder = tiny_decoder_dirs["llama"]
    texts = ["the man sees the dog", "a dog sleeps", "the cat runs ."]
    float32 = heurlens.load_model(folder)
    bridge = TransformerBridge.boot_transformers(str(folder), dtype=BF16, device="cpu")
    loaded = heurlens.load_model(folder, dtype="bfloat16")
    assert next(loaded.parameters()).dtype == BF16 and loaded.fingerprint() != float32.fingerprint()
    means = heurlens.compute_means(float32, texts)
    tables = [heurlens.ablate(model, "L1.H2", [texts], means=means, metrics={"squared_norm": squared_norm})
              for model in (float32, bridge, loaded)]
    for table in tables[1:]:  # layer 1: the ablated pass resumes from the cached residual stream, in bfloat16
        assert table["full_squared_norm"].item() == pytest.approx(tables[0]["full_squared_norm"].item(), abs=3e-2)
        assert table["ablated_squared_norm"].item() == pytest.approx(tables[0]["ablated_squared_norm"].item(), abs=3e-2)
    scores = head_detector_scores(bridge, texts)
    torch.testing.assert_close(torch.tensor(scores["previous_token"].to_numpy()),
                               torch.tensor(head_detector_scores(float32, texts)["previous_token"].to_numpy()),
                               atol=2e-2, rtol=0)
    with pytest.raises(heurlens.HeurlensError, match="unknown weights precision 'int8'"):
        heurlens.load_model(folder, dtype="int8")


def test_the_cli_names_the_weights_precision_and_loads_in_the_one_asked_for(tiny_bert_dir, pairs_file, capsys,
                                                                             tmp_path):
    args = ["--heads", "L1.H0", "--data", str(pairs_file), "--subcases", "SO-Swap", "--per-subcase", "10",
            "--reference-examples", "40"]
    status, float32, err = heurlens_in_process(capsys, "ablate", "--model", str(tiny_bert_dir), *args)
    assert status == 0, err
    status, bfloat16, err = heurlens_in_process(capsys, "ablate", "--model", str(tiny_bert_dir), *args,
                                                "--weights-dtype", "bfloat16")
    assert status == 0, err
    assert float32.startswith(f"model {tiny_bert_dir}, mean-ablated L1.H0")
    assert bfloat16.startswith(f"model {tiny_bert_dir} (bfloat16 weights), mean-ablated L1.H0")
    saved = tmp_path / "saved-in-bf16"  # a folder saved in bfloat16, as models on the hub often are
    from transformers import AutoTokenizer, BertForSequenceClassification

    BertForSequenceClassification.from_pretrained(str(tiny_bert_dir), dtype=BF16).save_pretrained(saved)
    AutoTokenizer.from_pretrained(str(tiny_bert_dir)).save_pretrained(saved)
    status, from_folder, err = heurlens_in_process(capsys, "ablate", "--model", str(saved), *args, "--bf16")
    assert status == 0, err
    assert from_folder.startswith(f"model {saved} (bfloat16 weights, bfloat16), mean-ablated L1.H0")
    assert from_folder.splitlines()[1:] == bfloat16.splitlines()[1:]  # the same weights, the same table
    out = tmp_path / "run"
    prune_args = ["--sparsity", "0.3", "--seeds", "1", "--train-examples", "32", "--steps", "3", "--in-domain-examples",
                  "20", "--per-subcase", "10", "--subcases", "SO-Swap", "--data", str(pairs_file)]
    status, pruned, err = heurlens_in_process(capsys, "prune", "--model", str(tiny_bert_dir), "--out", str(out),
                                              "--weights-dtype", "bfloat16", *prune_args)
    assert status == 0, err
    assert pruned.startswith(f"accuracy (%) of model {tiny_bert_dir} (bfloat16 weights) and its subnetworks")
    status, evaluated, err = heurlens_in_process(capsys, "evaluate", str(out), "--weights-dtype", "bfloat16",
                                                 "--in-domain-examples", "20", "--per-subcase", "10", "--subcases",
                                                 "SO-Swap", "--data", str(pairs_file))
    assert status == 0 and evaluated == pruned, err
    status, _, err = heurlens_in_process(capsys, "evaluate", str(out), "--in-domain-examples", "20")  # float32 now
    assert status == 2 and "loaded in another precision" in err  # another fingerprint: the bfloat16 weights' one
