"""The typed edge graph (heurlens.interventions.graph): nodes with TransformerLens 4.3's kinds, an edge a pair of
nodes, written and read back under the names stored records use."""

import pytest

from heurlens.errors import HeurlensError
from heurlens.interventions.graph import EdgeLayout, parse_edges
from heurlens.interventions.nodes import Edge, Node
from heurlens.interventions.units import Unit
from heurlens.pruning.circuit import nodes_of


@pytest.mark.parametrize("n_heads, n_kv_heads", [(3, 3), (4, 2)])
def test_every_edge_reads_back_from_its_name_and_the_names_are_the_stored_ones(n_heads, n_kv_heads):
    layout = EdgeLayout(2, n_heads, n_kv_heads)
    edges = layout.edges()
    assert [Edge.parse(str(edge)) for edge in edges] == edges and len(set(edges)) == layout.n_edges
    names = {str(edge) for edge in edges}
    key = "L1.KV1.k" if n_kv_heads < n_heads else "L1.H1.k"
    assert {"embed->L0.H0.q", f"L0.H2->{key}", "L0.MLP->L1.MLP", "L1.MLP->logits"} <= names
    assert "L1.H0->L1.MLP" in names and "L1.H0->L1.H1.q" not in names  # a layer's heads write before its MLP only
    kinds = {node.kind for edge in edges for node in (edge.writer, edge.reader)}
    assert kinds == {"embed", "attn_head_out", "mlp_out", "q_input", "k_input", "v_input", "mlp_in", "logits"}


def test_a_node_names_its_unit_and_a_grouped_key_value_input_names_none():
    assert Node.parse("L2.H3", writer=True) == Node("attn_head_out", 2, 3)
    assert Node.parse("L2.MLP", writer=True).kind == "mlp_out" and Node.parse("L2.MLP", writer=False).kind == "mlp_in"
    assert Node("q_input", 1, 2).unit == Unit(1, 2) and Node("mlp_in", 1).unit == Unit(1)
    assert Node("k_input", 1, 0, grouped=True).unit is None and Node("logits").unit is None
    edges = parse_edges("embed->L0.H1.q, L0.H1->L1.KV0.v, L0.MLP->logits", EdgeLayout(2, 4, 2))
    assert nodes_of(edges) == [Unit(0, 1), Unit(0)]


@pytest.mark.parametrize("name, message", [("logits->L0.MLP", "is a reader, not a writer"),
                                           ("L0.H1->L0.H1", "is a writer, not a reader"),
                                           ("L0.H9->logits", "not an edge of this model"),
                                           ("L0.H1 L1.MLP", "write WRITER->READER"),
                                           ("L0.X->logits", "cannot read 'L0.X' as a writer")])
def test_a_wrong_edge_is_refused_by_name(name, message):
    with pytest.raises(HeurlensError, match=message):
        parse_edges(name, EdgeLayout(2, 3, 3))
    with pytest.raises(HeurlensError, match="takes a layer and a head"):
        Node("attn_head_out", 1)


def test_an_edge_of_two_strings_is_refused_with_the_parse_to_write():
    """heurlens 0.1.0 took Edge("L0.H1", "L1.H0.v") (deprecated before 0.2.0): an edge is a pair of Nodes now."""
    with pytest.raises(HeurlensError, match=r"an edge is a pair of Nodes; .* Edge.parse\('L0.H1->L1.H0.v'\)"):
        Edge("L0.H1", "L1.H0.v")  # type: ignore[arg-type]
    assert Edge.parse("L0.H1->L1.H0.v") == Edge(Node("attn_head_out", 0, 1), Node("v_input", 1, 0))
