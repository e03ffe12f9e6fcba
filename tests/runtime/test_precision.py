"""One precision setting (``heurlens.runtime.precision``): ``--dtype`` on ablate, prune and evaluate, ``--bf16`` its
shorthand; masks keep training in float32 while the model's products run in bfloat16, and a subnetwork records
the precision it was found in."""

import json
from dataclasses import replace

import torch
from cli_run import assert_refused, heurlens_in_process
from planted import PLANTED, build_planted_model

import heurlens
from heurlens.tasks import token_batches


def test_pruning_in_bfloat16_keeps_the_planted_units_and_records_its_precision():
    model = build_planted_model()
    data = token_batches(torch.randint(0, 4, (128, 6), generator=torch.Generator().manual_seed(0)), batch_size=16)
    config = heurlens.PruneSettings(dtype="bfloat16")
    [subnetwork] = heurlens.prune(model, data, sparsity=2 / 3, seeds=[0], config=config, progress=False)
    assert {str(unit) for unit in subnetwork.kept} == set(PLANTED)
    assert subnetwork.hyperparameters["dtype"] == "bfloat16" and subnetwork.log_alpha_heads.dtype == torch.float32
    assert "dtype" not in heurlens.PruneSettings().to_dict()  # float32 runs written before --dtype still match
    float32 = heurlens.prune(model, data, sparsity=2 / 3, seeds=[0], config=replace(config, dtype="float32"),
                             progress=False)[0]
    assert not torch.equal(float32.log_alpha_heads, subnetwork.log_alpha_heads)  # the products did run in bf16


def test_dtype_options_and_the_bf16_shorthand(tiny_bert_dir, pairs_file, capsys, tmp_path):
    args = ["--heads", "L1.H0", "--model", str(tiny_bert_dir), "--data", str(pairs_file), "--subcases", "SO-Swap",
            "--per-subcase", "10", "--reference-examples", "40"]
    assert_refused(capsys, "--bf16 means --dtype bfloat16; it cannot go with --dtype float16",
                   "ablate", *args, "--bf16", "--dtype", "float16")
    status, short, _ = heurlens_in_process(capsys, "ablate", *args, "--bf16")
    status_long, long, _ = heurlens_in_process(capsys, "ablate", *args, "--dtype", "bfloat16")
    assert status == status_long == 0 and short == long
    assert short.startswith(f"model {tiny_bert_dir} (bfloat16), mean-ablated L1.H0")
    out = tmp_path / "run"
    status, pruned, err = heurlens_in_process(
        capsys, "prune", "--sparsity", "0.3", "--seeds", "2", "--out", str(out), "--model", str(tiny_bert_dir),
        "--train-examples", "64", "--steps", "3", "--log-alpha-init", "0", "--log-alpha-init-std", "3",
        "--dtype", "float16", "--stack-seeds", "--in-domain-examples", "20", "--per-subcase", "10",
        "--subcases", "SO-Swap")
    assert status == 0, err
    assert pruned.startswith(f"accuracy (%) of model {tiny_bert_dir} (float16) and its subnetworks")
    assert json.loads((out / "sparsity-0.30" / "seed-01.json").read_text())["hyperparameters"]["dtype"] == "float16"
    status, evaluated, err = heurlens_in_process(capsys, "evaluate", str(out), "--dtype", "float16",
                                                 "--in-domain-examples", "20", "--per-subcase", "10",
                                                 "--subcases", "SO-Swap")
    assert status == 0 and evaluated == pruned, err

