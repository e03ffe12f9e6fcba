import pytest
import torch

from heurlens.errors import HeurlensError
from heurlens.interventions.units import Unit, UnitLayout, all_units, format_units, heads_hook_name, parse_units


def test_parse_single_list_layer_and_mlp():
    assert parse_units("L4.H0", 6, 12) == [Unit(4, 0)]
    assert parse_units("L4.H0,L2.H5", 6, 12) == [Unit(4, 0), Unit(2, 5)]
    assert parse_units("L1.*", 6, 3) == [Unit(1, 0), Unit(1, 1), Unit(1, 2)]
    assert parse_units("L3.MLP", 6, 12) == [Unit(3)]
    assert parse_units(" l3.mlp , L3.mlp,L0.h1 ", 6, 12) == [Unit(3), Unit(0, 1)]


def test_hook_names_are_transformerlens_hook_points():
    assert Unit(4, 0).hook_name == "blocks.4.attn.hook_z"
    assert Unit(4).hook_name == "blocks.4.hook_mlp_out"


@pytest.mark.parametrize("spec", ["L4.H0", "L4.H0,L2.H5", "L3.MLP,L0.H11", "L5.*", "L0.*,L1.MLP,L2.H3"])
def test_round_trip(spec):
    units = parse_units(spec, 6, 12)
    assert format_units(units, n_heads=12) == spec
    assert parse_units(format_units(units), 6, 12) == units


def test_all_units_sorted_heads_before_mlp():
    units = all_units(2, 2)
    assert [str(u) for u in units] == ["L0.H0", "L0.H1", "L0.MLP", "L1.H0", "L1.H1", "L1.MLP"]
    assert sorted(reversed(units)) == units


@pytest.mark.parametrize("spec, fragment", [
    ("L99.H0", "layer 99 is out of range; this model has layers L0-L5 and heads H0-H11"),
    ("L4.H12", "head 12 is out of range"),
    ("L4", "cannot read 'L4'"),
    ("4.0", "cannot read '4.0'"),
    ("L4.H0,", "empty unit"),
    ("", "empty unit"),
    ("L-1.H0", "cannot read"),
])
def test_bad_specs_name_the_valid_range(spec, fragment):
    with pytest.raises(HeurlensError) as error:
        parse_units(spec, 6, 12)
    assert fragment in str(error.value)
    assert "L0-L5" in str(error.value)


def test_unit_layout_orders_heads_then_mlp_per_layer():
    layout = UnitLayout(2, 2)
    assert layout.n_units == 6
    assert [str(u) for u in layout.units()] == ["L0.H0", "L0.H1", "L0.MLP", "L1.H0", "L1.H1", "L1.MLP"]
    flat = torch.arange(6.0)
    heads, mlps = layout.split(flat)
    assert heads.tolist() == [[0.0, 1.0], [3.0, 4.0]] and mlps.tolist() == [2.0, 5.0]
    assert torch.equal(layout.join(heads, mlps), flat)
    assert [str(u) for u in layout.units_where(flat % 3 == 0)] == ["L0.H0", "L1.H0"]
    heads, mlps = layout.mask([Unit(1, 0), Unit(0)])
    assert heads.tolist() == [[1.0, 1.0], [0.0, 1.0]] and mlps.tolist() == [0.0, 1.0]
    assert layout.units() == all_units(2, 2) and Unit(1, 1).hook_name == heads_hook_name(1) == "blocks.1.attn.hook_z"
