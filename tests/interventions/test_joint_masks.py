"""Node masks beside edge masks (``heurlens.interventions.joint_masks``, ``PruneSettings(node_sparsity=)``,
``heurlens prune --node-sparsity``): each edge's mask in effect is its own times its writer's and reader's node masks
(checked edge by edge against the graph's names), and on the planted path the node masks keep the path's two heads and
prune the four idle units."""

import pytest
import torch
from cli_run import heurlens_in_process
from planted_edges import N_EDGES, PATH, build_planted_edges_model, planted_edges_task, planted_edges_task_file

import heurlens
from heurlens.errors import HeurlensError
from heurlens.interventions.graph import EdgeLayout, edge_layout
from heurlens.interventions.joint_masks import edge_ends, joint_edge_masks, joint_log_alpha
from heurlens.interventions.units import Unit, UnitLayout
from heurlens.pruning import PruneSettings
from heurlens.pruning.run_folder import subnetworks_by_sparsity


def _gating_units(node, n_heads: int, n_kv_heads: int) -> list[Unit]:
    """The units whose node masks gate one end of an edge, read from its node's name (not the layout's indices)."""
    if node.kind in ("embed", "logits"):
        return []
    if node.grouped:
        sharing = n_heads // n_kv_heads
        return [Unit(node.layer, node.head * sharing + i) for i in range(sharing)]
    return [node.unit]


def test_an_edge_is_on_only_while_its_writer_and_its_reader_nodes_are():
    """On a grouped-query layout (3 layers, 4 query heads on 2 key-value heads), random edge and node masks: every
    edge's joint mask is z_wr z_w max(z_r over the query heads sharing its reader) and its joint log_alpha the min of
    its own and those, each computed here from the edge's writer and reader names. Broken by gating key-value inputs
    by their first query head alone: failed."""
    layout = EdgeLayout(3, 4, 2)
    units = UnitLayout(3, 4).units()
    generator = torch.Generator().manual_seed(0)
    edges, nodes = torch.rand(2, layout.n_edges, generator=generator), torch.rand(2, len(units), generator=generator)
    joint = joint_edge_masks(edges, nodes, edge_ends(layout))
    ranks = joint_log_alpha(edges[0] * 20 - 10, nodes[0] * 20 - 10, edge_ends(layout))
    for i, edge in enumerate(layout.edges()):
        writer = [nodes[:, units.index(unit)] for unit in _gating_units(edge.writer, 4, 2)]
        reader = [nodes[:, units.index(unit)] for unit in _gating_units(edge.reader, 4, 2)]
        expected = edges[:, i] * (writer[0] if writer else 1) * (torch.stack(reader).amax(0) if reader else 1)
        assert torch.allclose(joint[:, i], expected), edge
        ends = [float(value[0] * 20 - 10) for value in writer] + (
            [float(torch.stack(reader)[:, 0].amax() * 20 - 10)] if reader else [])
        assert float(ranks[i]) == pytest.approx(min([float(edges[0, i] * 20 - 10), *ends]), abs=1e-5), edge
    assert torch.equal(joint_edge_masks(edges, torch.ones_like(nodes), edge_ends(layout)), edges)  # nodes on: edges


def test_node_masks_beside_edge_masks_keep_the_planted_heads_and_prune_the_idle_units(tmp_path, capsys):
    """The planted path (tests/planted_edges.py): only L0.H1 and L1.H0 carry the answer, the other four units (L0.H0,
    L1.H1, both MLPs) nothing. ``heurlens prune --level edge --node-sparsity 0.67`` keeps 3 edges (the path, every
    seed) and records the node target and the node masks' sparsity; the library's node masks rank the path's heads
    first. Broken by leaving the node masks out of the forward pass (the edge masks alone, the ranking still joint):
    the node masks then follow the Lagrangian only and the circuit kept L0.H0's edges instead of the path: failed."""
    model_dir = str(build_planted_edges_model(tmp_path / "planted"))
    out = tmp_path / "joint"
    status, printed, err = heurlens_in_process(
        capsys, "prune", "--model", model_dir, "--task", str(planted_edges_task_file(tmp_path / "task.jsonl")),
        "--task-examples", "16", "--batch-size", "4", "--level", "edge", "--ablation", "corrupt", "--steps", "300",
        "--sparsity", str(1 - 3 / N_EDGES), "--node-sparsity", str(4 / 6), "--seeds", "2", "--out", str(out))
    assert status == 0, err
    assert "node_sparsity=" in err  # the progress line shows the node masks' sparsity
    [records] = subnetworks_by_sparsity([out]).values()
    for record in records:
        assert sorted(map(str, record.edges)) == sorted(PATH)
        assert record.hyperparameters["node_sparsity"] == pytest.approx(4 / 6)
        assert 0.4 < record.metrics["final_node_sparsity"] < 0.75  # from 0 (log_alpha 10) towards its target

    from heurlens.interventions.activation_cache import full_model_logits
    from heurlens.pruning.train import train_edge_masks
    from heurlens.runtime.call_context import call_context

    model, data = heurlens.load_model(model_dir), planted_edges_task()
    full = full_model_logits(model, data, call_context(model, "float32", cache=False))
    config = PruneSettings(level="edge", ablation="corrupt", total_steps=300, node_sparsity=4 / 6)
    names = [str(unit) for unit in UnitLayout(2, 2).units()]
    for result in train_edge_masks(model, data, full, 1 - 3 / N_EDGES, [0, 1], config, progress=False):
        order = [names[i] for i in result.node_log_alpha.argsort(descending=True)]
        assert set(order[:2]) == {"L0.H1", "L1.H0"}, (order, result.node_log_alpha)
        assert result.log_alpha.shape == (edge_layout(model).n_edges,)  # the joint ranking, one entry per edge


def test_node_masks_beside_unit_masks_are_refused_by_name():
    with pytest.raises(HeurlensError, match="unit masks are node masks already"):
        PruneSettings(node_sparsity=0.5)
    with pytest.raises(HeurlensError, match="at most 1"):
        PruneSettings(level="edge", ablation="corrupt", node_sparsity=1.5)


def test_warm_started_node_masks_start_from_each_units_summed_edge_scores(tmp_path):
    """A joint run warm-started from EAP of the planted path's edges: its node masks start from each unit's score
    (``NodeMasksBeside.unit_scores``: the sum of its outgoing edges', here checked against EAP of the units) mapped as
    the edges' are, the path's heads near log_alpha_init and the idle units near 0 (lr 1e-9: one step moves nothing).
    Broken by leaving the node masks at log_alpha_init: failed."""
    from heurlens.circuits.attribution import attribution_ranking
    from heurlens.circuits.settings import AttributionSettings
    from heurlens.data.prompt_tasks import logit_difference
    from heurlens.interventions.activation_cache import full_model_logits
    from heurlens.interventions.joint_masks import NodeMasksBeside
    from heurlens.pruning.train import train_edge_masks
    from heurlens.pruning.warm_start import warm_start_log_alpha
    from heurlens.runtime.call_context import call_context

    model, data = heurlens.load_model(str(build_planted_edges_model(tmp_path / "planted"))), planted_edges_task()
    edges = attribution_ranking(model, data, logit_difference, AttributionSettings("edge"), progress=False)
    units = attribution_ranking(model, data, logit_difference, AttributionSettings("node"), progress=False)
    beside = NodeMasksBeside(6, edge_ends(edge_layout(model)))
    torch.testing.assert_close(beside.unit_scores(edges.scores), units.scores, atol=1e-5, rtol=1e-4)
    full = full_model_logits(model, data, call_context(model, "float32", cache=False))
    config = PruneSettings(level="edge", ablation="corrupt", total_steps=1, lr_log_alpha=1e-9, node_sparsity=0.5)
    [result] = train_edge_masks(model, data, full, 0.5, [0], config, progress=False, warm_start=edges)
    expected = warm_start_log_alpha(units.scores, config.log_alpha_init)
    torch.testing.assert_close(result.node_log_alpha, expected, atol=1e-3, rtol=1e-3)
    names = [str(unit) for unit in UnitLayout(2, 2).units()]
    assert {names[i] for i in range(6) if result.node_log_alpha[i] > 5} == {"L0.H1", "L1.H0"}
