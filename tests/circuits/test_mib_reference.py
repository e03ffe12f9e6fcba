"""heurlens beside the field's own code: ``tests/fixtures/mib_reference`` holds what hannamw/EAP-IG (the commit
MIB-circuit-track pins) and MIB-circuit-track's evaluation computed on TransformerLens 2 for two tiny models (a GPT-2
and a grouped-query Llama, their state dicts kept beside), written by ``make_reference.py`` there. The same state
dicts are loaded here into TransformerLens 4 bridges, and heurlens' EAP and EAP-IG scores, its MIB export and its
CPR/CMD must be theirs:

- scores: EAP-IG's ``Graph.to_json`` holds -delta_m / b (its loss is -m averaged over each batch of b = 4, and the
  sum over batches is divided by the 8 prompts again); heurlens' export holds -delta_m, the mean over prompts;
- CPR as MIB's print_results.py reports it: ``area_under`` of MIB's ``absolute=False`` evaluation (the file ranked
  by score), CMD its ``area_from_1`` of the ``absolute=True`` one (ranked by |score|), f at every size of both."""

import json
from pathlib import Path

import pytest
import torch
from conftest import word_level_tokenizer
from safetensors.torch import load_file

import heurlens
from heurlens.circuits.attribution import attribution_ranking
from heurlens.circuits.faithfulness import ranking_curve
from heurlens.circuits.mib_files import mib_document, read_mib_file, write_mib_file
from heurlens.circuits.mib_graph import MibGraph
from heurlens.data.prompt_tasks import PromptExample, logit_difference, tokenize_prompt_task
from heurlens.interventions.graph import edge_layout
from heurlens.models.ungrouped import ungrouped_copy

FIXTURE = Path(__file__).parents[1] / "fixtures" / "mib_reference"
REFERENCE = json.loads((FIXTURE / "reference.json").read_text())


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def case(request, tmp_path_factory):
    """(name, the model on MIB's graph (the Llama's ungrouped copy), the model itself, the task, the fixture's
    entry) for one of the fixture's models, loaded from its state dict."""
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    name = request.param
    config = REFERENCE["configs"][name]
    hf = (GPT2LMHeadModel(GPT2Config(**config)) if name == "gpt2" else
          LlamaForCausalLM(LlamaConfig(**config, architectures=["LlamaForCausalLM"])))
    hf.load_state_dict(load_file(str(FIXTURE / f"{name}.safetensors")), strict=True)
    out = tmp_path_factory.mktemp(f"mib-reference-{name}")
    hf.eval().save_pretrained(out)
    word_level_tokenizer().save_pretrained(out)
    assert word_level_tokenizer().convert_ids_to_tokens(list(range(11))) == REFERENCE["words"]
    model = heurlens.load_model(out)
    examples = [PromptExample(f"<eos>{clean}", answer, (distractor,), f"<eos>{corrupted}")  # EAP-IG's prepend_bos
                for clean, corrupted, answer, distractor in REFERENCE["prompts"]]
    task = tokenize_prompt_task("mib-reference", examples, word_level_tokenizer(), n_ctx=32,
                                batch_size=REFERENCE["batch_size"], add_special_tokens=False)
    on_mib = ungrouped_copy(model) if name == "llama" else model
    return name, on_mib, model, task, REFERENCE["models"][name]


def test_the_graph_is_eap_igs_edge_for_edge(case):
    _, on_mib, _, _, reference = case
    assert MibGraph(edge_layout(on_mib)).edge_names == reference["edges"]  # 110 edges, in EAP-IG's order


@pytest.mark.parametrize("method", ["EAP", "EAP-IG-inputs"])
def test_the_export_is_eap_igs_file_times_its_batch_size(case, method):
    """heurlens' exported score of every edge is EAP-IG's ``Graph.to_json`` score times its batch size (the
    convention docs/cli.md states): the same sign, the mean over prompts. Changing the export's sign or writing the
    sum over prompts fails here."""
    _, on_mib, _, task, reference = case
    ranking = attribution_ranking(on_mib, task, logit_difference, level="edge",
                                  ig_steps=REFERENCE["ig_steps"] if method == "EAP-IG-inputs" else None)
    edges = mib_document(on_mib, ranking)["edges"]
    ours = torch.tensor([edges[name]["score"] for name in reference["edges"]])
    theirs = torch.tensor(reference[method]) * REFERENCE["batch_size"]
    assert theirs.abs().max() > 0.05 and (theirs.abs() > 1e-3).sum() > 50  # many edges carry something
    torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-5)


def test_cpr_and_cmd_are_mibs_as_its_scripts_report_them(case, tmp_path):
    """EAP-IG's scores exported, read back and scored: f at each size of the ranking by score is MIB's
    ``absolute=False`` evaluation's, by |score| its ``absolute=True`` one's; CPR is the first's area_under and CMD
    the second's area_from_1. (On |score| alone, heurlens' CPR before 2026-12-02, the GPT-2's CPR would be 1.208
    against MIB's 1.661.)"""
    _, on_mib, model, task, reference = case
    ranking = attribution_ranking(on_mib, task, logit_difference, level="edge", ig_steps=REFERENCE["ig_steps"])
    write_mib_file(tmp_path / "importances.json", on_mib, ranking)
    file = read_mib_file(tmp_path / "importances.json", model, graph="mib")
    assert file.ranking is not None and file.ranking.signed
    curve = ranking_curve(on_mib, file.ranking, task, cache=False)
    by_score, by_size = (reference[f"evaluation_absolute_{absolute}"] for absolute in (False, True))
    for ranked_by, theirs in (("score", by_score), ("|score|", by_size)):
        ours = curve.points_of(ranked_by)["faithfulness"].tolist()
        assert ours == pytest.approx(theirs["faithfulnesses"], abs=1e-4), ranked_by
    assert curve.cpr == pytest.approx(by_score["area_under"], abs=1e-4)
    assert curve.cmd == pytest.approx(by_size["area_from_1"], abs=1e-4)
    assert abs(by_score["area_under"] - by_size["area_under"]) > 0.05  # the two orders differ on these models
