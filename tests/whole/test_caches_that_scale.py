"""What keeps memory and disk bounded on large vocabularies and many ablations: the KL computed over chunks of
rows, ablation tables and faithfulness curves holding one chunk of groups' scores at a time, and cache entries in
the narrowest precision that holds them exactly."""

import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from test_activation_cache import padded_set

import heurlens
import heurlens.evaluate as evaluate
import heurlens.interventions.ablation as ablation
import heurlens.interventions.scoring as scoring
from heurlens.circuits.faithfulness import faithfulness_curve
from heurlens.evaluate import mean_kl, predict_logits
from heurlens.interventions.activation_cache import exact_narrowest, full_model_logits, residual_streams
from heurlens.interventions.means import compute_means
from heurlens.interventions.units import Unit
from heurlens.models import load_model
from heurlens.runtime.call_context import call_context


def models_per_call(monkeypatch) -> list[int]:
    """The one scoring loop (``masked_scores``, as ``heurlens.interventions.scoring`` calls it) wrapped to record how
    many masked models (its masks) each call scores; the list it fills."""
    sizes: list[int] = []
    real = scoring.masked_scores

    def counted(model, hooks, masks, *rest, **named):
        sizes.append(len(masks))
        return real(model, hooks, masks, *rest, **named)

    monkeypatch.setattr(scoring, "masked_scores", counted)
    return sizes


def test_the_kl_over_chunks_of_rows_is_torchs_kl_div(monkeypatch):
    generator = torch.Generator().manual_seed(0)
    reference, other = torch.randn(7, 11, generator=generator) * 3, torch.randn(7, 11, generator=generator) * 3
    expected = F.kl_div(F.log_softmax(other, -1), F.log_softmax(reference, -1), log_target=True,
                        reduction="batchmean").item()
    whole = mean_kl(reference, other)
    monkeypatch.setattr(evaluate, "KL_CHUNK_ELEMENTS", 22)  # two rows a chunk, the last chunk one row
    assert mean_kl(reference, other) == pytest.approx(expected, rel=1e-6) == pytest.approx(whole, rel=1e-6)


def test_exact_narrowest_keeps_every_value():
    bfloat16_values = torch.tensor([1.0, -0.0, 3.0 * 2.0**-7, 2.0**100, float("inf")])
    float16_values = torch.tensor([1.0 + 2.0**-10, 0.5])  # 11 significant bits: float16 holds them, bfloat16 not
    float32_values = torch.tensor([1.0 + 2.0**-20])
    for values, dtype in ((bfloat16_values, torch.bfloat16), (float16_values, torch.float16),
                          (float32_values, torch.float32)):
        narrow = exact_narrowest(values)
        assert narrow.dtype == dtype and torch.equal(narrow.float(), values)
    assert torch.equal(exact_narrowest(bfloat16_values).float().signbit(), bfloat16_values.signbit())


def test_a_bfloat16_models_cache_entry_is_bfloat16_and_reads_back_bit_for_bit(tiny_decoder_dirs, tmp_path,
                                                                             monkeypatch):
    """Its logits and residual streams are bfloat16 as computed: stored so (half the bytes), read back equal."""
    from safetensors.torch import load_file

    monkeypatch.setenv("HEURLENS_CACHE", str(tmp_path))
    model = load_model(tiny_decoder_dirs["llama"], dtype="bfloat16")
    texts = ["the man sees the dog", "a dog sleeps", "the cat runs ."]
    task = heurlens.tokenize_texts(model, texts)
    computed = residual_streams(model, task, [1], call_context(model))[1].batches
    logits = full_model_logits(model, task, call_context(model))
    folder = next(tmp_path.glob("activations/*"))
    stored_logits = load_file(folder / "logits.safetensors")["logits"]
    stored_stream = load_file(folder / "residual-1.safetensors")["residual"]
    assert stored_logits.dtype == stored_stream.dtype == torch.bfloat16
    again = full_model_logits(model, task, call_context(model))
    assert torch.equal(stored_logits.float(), predict_logits(model, task)) and torch.equal(again, logits)
    read = residual_streams(model, task, [1], call_context(model))[1].batches
    for fresh, again, batch in zip(computed, read, task.batches):
        real = batch["attention_mask"].bool()
        assert fresh.dtype == again.dtype == torch.bfloat16 and torch.equal(fresh[real], again[real])


def test_tables_and_curves_in_chunks_of_groups_equal_one_chunk(random_bert_dir, tmp_path, monkeypatch):
    """With room for the scores of three groups, eight groups are ablated three, three and two at a time (never
    more held at once), and the table and the faithfulness curve are those of all eight at once, number for
    number."""
    monkeypatch.setenv("HEURLENS_CACHE", str(tmp_path))
    model = load_model(random_bert_dir(4, 2, seed=5))
    data = padded_set(0)
    means = compute_means(model, padded_set(1))
    groups = [[Unit(layer, layer % 2)] for layer in range(4)] + [[Unit(layer)] for layer in range(4)]
    circuits = {f"keep L{layer}": [Unit(layer, 0), Unit(layer)] for layer in range(4)}

    def mean_top_score(scores, task) -> float:
        return float(scores.max(-1).values.mean())

    def computed():
        table = ablation.ablate_groups(model, groups, [data], means=means)
        curve = faithfulness_curve(model, circuits, data, metric=mean_top_score, means=means)
        return table, curve

    whole_table, whole_curve = computed()
    sizes = models_per_call(monkeypatch)
    monkeypatch.setattr(scoring, "SCORES_IN_MEMORY_BYTES", 3 * len(data) * 3 * 4)  # 3 groups of 12 rows x 3 labels
    table, curve = computed()
    assert sizes == [3, 3, 2, 3, 2]  # the table's eight groups, then the curve's four circuits and the empty one
    pd.testing.assert_frame_equal(table, whole_table, check_exact=True)
    pd.testing.assert_frame_equal(curve.circuits, whole_curve.circuits, check_exact=True)
    assert curve.empty == whole_curve.empty


def test_edge_circuits_in_chunks_equal_one_chunk(tiny_decoder_dirs, monkeypatch):
    """Edge circuits' table and faithfulness curve with room for one circuit's scores at a time: one circuit a
    pass, the same numbers as all at once."""
    from conftest import word_level_tokenizer
    from test_corruption import EXAMPLES

    from heurlens.data.prompt_tasks import tokenize_prompt_task
    from heurlens.interventions.graph import edge_layout
    from heurlens.pruning.circuit import EdgeCircuit, nodes_of
    from heurlens.runtime.call_context import call_context

    model = load_model(tiny_decoder_dirs["llama"])
    task = tokenize_prompt_task("toy", EXAMPLES, word_level_tokenizer(), n_ctx=32, add_special_tokens=False)
    layout = edge_layout(model)
    kept = [layout.edges_between(units) for units in ([Unit(0, 1), Unit(1, 3)], [Unit(0), Unit(1, 0)], [])]
    circuits = [EdgeCircuit(nodes_of(edges), model.n_layers, model.n_heads, 0.5, 1 - len(edges) / layout.n_edges, 0.0,
                            seed, model.model_id, model.fingerprint(), "toy", edges=edges, n_kv_heads=layout.n_kv_heads)
                for seed, edges in enumerate(kept)]
    context = call_context(model, cache=False)
    full = {task.name: predict_logits(model, task)}
    metrics = {"top": lambda scores, task: float(scores.max(-1).values.mean())}

    def computed():
        return (scoring.masked_table(model, "edge", [c.keep_mask() for c in circuits], [c.label for c in circuits],
                                     [task], "corrupt", None, full, context, metrics=metrics),
                faithfulness_curve(model, circuits, task, cache=False).circuits)

    whole_table, whole_curve = computed()
    sizes = models_per_call(monkeypatch)
    monkeypatch.setattr(scoring, "SCORES_IN_MEMORY_BYTES", 1)
    table, curve = computed()
    assert sizes == [1] * 3 + [1] * 4  # the table's three circuits, then the curve's three and the empty one
    pd.testing.assert_frame_equal(table, whole_table, check_exact=True)
    pd.testing.assert_frame_equal(curve, whole_curve, check_exact=True)
