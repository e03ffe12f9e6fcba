"""One layout protocol for both levels (``interventions.layouts``): ``layout_of`` picks a model's units or edges, and
each layout's count, names and keep mask agree with its own lists (``units()``, ``edges()``), in their one order."""

import pytest
import torch

import heurlens
from heurlens.errors import HeurlensError
from heurlens.interventions.graph import EdgeLayout
from heurlens.interventions.layouts import LAYOUTS, layout_of
from heurlens.interventions.nodes import Edge
from heurlens.interventions.units import Unit, UnitLayout


def test_the_layout_of_each_level_lists_its_items_in_one_order(tiny_decoder_dirs):
    model = heurlens.load_model(tiny_decoder_dirs["llama"])  # 2 layers, 4 query heads on 2 key-value heads
    units, edges = layout_of(model, "node"), layout_of(model, "edge")
    assert isinstance(units, UnitLayout) and isinstance(edges, EdgeLayout) and set(LAYOUTS) == {UnitLayout, EdgeLayout}
    assert (units.level, units.noun, edges.level, edges.noun) == ("node", "unit", "edge", "edge")
    assert units.n_items == 2 * (4 + 1) == len(units.item_names())
    assert units.item_names()[:5] == ["L0.H0", "L0.H1", "L0.H2", "L0.H3", "L0.MLP"]
    assert edges.n_items == edges.n_edges == len(edges.item_names()) == len(set(edges.item_names()))
    assert edges.item_names() == [str(edge) for edge in edges.edges()]
    middle = edges.edges()[7]  # a keep mask of one item in the middle: 1 there and nowhere else, for both levels
    assert torch.equal(edges.keep_mask([middle]).nonzero().flatten(), torch.tensor([7]))
    assert torch.equal(units.keep_mask([Unit(1, 2)]).nonzero().flatten(), torch.tensor([7]))
    assert Edge.parse(edges.item_names()[7]) == middle
    assert edges.ungrouped().n_kv_heads == 4 and edges.ungrouped().n_items > edges.n_items  # MIB's graph


def test_a_model_without_edges_is_refused_at_the_edge_level_only(tiny_bert_dir):
    model = heurlens.load_model(tiny_bert_dir)
    assert layout_of(model, "node").n_items == model.n_layers * (model.n_heads + 1)
    with pytest.raises(HeurlensError):
        layout_of(model, "edge")
