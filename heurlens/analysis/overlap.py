"""Overlap of subnetworks (Heuristic Core paper, Section 4, Figure 5): head frequencies, the heuristic core,
rank agreement between sparsities, and the intersection expected under random choice.

Null model: each of k subnetworks keeps m_i of the N heads, chosen uniformly at random and
independently. A head survives in all of them with probability prod_i m_i / N, so the expected
intersection is N * prod_i (m_i / N). Its full distribution follows exactly from a chain of
hypergeometric draws: intersecting a current intersection of size x with a random m-subset
leaves Hypergeometric(N, x, m) heads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from scipy.stats import hypergeom, spearmanr

from heurlens.analysis.report import Report
from heurlens.errors import HeurlensError
from heurlens.interventions.units import Unit, all_units, format_units
from heurlens.pruning.subnetwork import Subnetwork


def _check_same_model(subnetworks: Sequence[Subnetwork]) -> tuple[int, int]:
    if not subnetworks:
        raise HeurlensError("no subnetworks given; pass the run directories written by heurlens prune")
    shapes = {(s.n_layers, s.n_heads, s.model_fingerprint) for s in subnetworks}
    if len(shapes) > 1:
        raise HeurlensError("the subnetworks come from different models; compare subnetworks of one model only")
    return subnetworks[0].n_layers, subnetworks[0].n_heads


def head_frequencies(subnetworks: Sequence[Subnetwork]) -> pd.DataFrame:
    """How many of the subnetworks keep each head: columns unit, layer, head, count, frequency."""
    n_layers, n_heads = _check_same_model(subnetworks)
    kept = [set(s.kept_heads) for s in subnetworks]
    rows = [{"unit": str(u), "layer": u.layer, "head": u.head, "count": sum(u in k for k in kept),
             "frequency": sum(u in k for k in kept) / len(kept)}
            for u in all_units(n_layers, n_heads, include_mlps=False)]
    return pd.DataFrame(rows)


def heuristic_core(subnetworks: Sequence[Subnetwork]) -> list[Unit]:
    """The heads kept by every given subnetwork (of every sparsity): the heuristic core."""
    _check_same_model(subnetworks)
    common = set.intersection(*(set(s.kept_heads) for s in subnetworks))
    return sorted(common)


def core_from(spec: str, n_layers: int, n_heads: int) -> tuple[list[Unit], list[Subnetwork]]:
    """A core given as a run directory of ``heurlens prune`` (its heads kept by every subnetwork) or as a
    list of heads (``L2.H5,L4.H1``); returns (core heads, the run's subnetworks or [])."""
    from heurlens.interventions.units import parse_units
    from heurlens.pruning.run_folder import find_subnetworks

    if Path(spec).is_dir():
        paths = find_subnetworks(Path(spec))
        if not paths:
            raise HeurlensError(f"--core {spec}: the directory holds no subnetworks (sparsity-*/seed-*.json)")
        subnetworks = [Subnetwork.load(p) for p in paths]
        return heuristic_core(subnetworks), subnetworks
    if "/" in spec or spec.startswith("."):
        raise HeurlensError(f"--core {spec}: no such run directory; give a run directory of heurlens prune or heads "
                            "such as L2.H5,L4.H1")
    return parse_units(spec, n_layers, n_heads), []


def analysed_core(groups: Mapping[float, Sequence[Subnetwork]]) -> tuple[list[Unit], str]:
    """The heads to study as the core, and what they are: the heads in every subnetwork, or, when no
    head is in all of them, the heads in every subnetwork of the lowest sparsity (said so)."""
    everything = [s for group in groups.values() for s in group]
    core = heuristic_core(everything)
    if core:
        return core, f"the core: heads in all {len(everything)} subnetworks"
    lowest = min(groups)
    return (heuristic_core(groups[lowest]),
            f"no head is in all {len(everything)} subnetworks; used instead: the heads in all "
            f"{len(groups[lowest])} subnetworks at {lowest:.0%}")


def frequency_agreement(a: Sequence[Subnetwork], b: Sequence[Subnetwork]) -> tuple[float, float]:
    """Spearman's rho (and its p-value) between the head frequencies of two groups of subnetworks."""
    _check_same_model([*a, *b])
    result = spearmanr(head_frequencies(a)["frequency"], head_frequencies(b)["frequency"])
    return float(result.statistic), float(result.pvalue)


def random_intersection_distribution(n_units: int, sizes: Sequence[int]) -> np.ndarray:
    """P(|S_1 ∩ ... ∩ S_k| = x) for x = 0..n_units, each S_i a uniform random subset of size sizes[i]."""
    if any(not 0 <= m <= n_units for m in sizes) or not sizes:
        raise HeurlensError(f"subset sizes {list(sizes)} must lie in [0, {n_units}] (and at least one given)")
    distribution = np.zeros(n_units + 1)
    distribution[sizes[0]] = 1.0
    for m in sizes[1:]:
        following = np.zeros(n_units + 1)
        for current in np.nonzero(distribution)[0]:
            survivors = np.arange(0, min(int(current), m) + 1)
            following[survivors] += distribution[current] * hypergeom.pmf(survivors, n_units, current, m)
        distribution = following
    return distribution


def expected_random_intersection(n_units: int, sizes: Sequence[int]) -> float:
    """E|S_1 ∩ ... ∩ S_k| = N * prod_i (m_i / N) under independent uniform random subsets."""
    return float(n_units * np.prod([m / n_units for m in sizes]))


def intersection_summary(groups: dict[str, Sequence[Subnetwork]]) -> pd.DataFrame:
    """Per group (e.g. one sparsity), and for all groups together: observed intersection of the kept
    heads next to the expected one under random choice and P(random >= observed)."""
    everything = [s for group in groups.values() for s in group]
    n_layers, n_heads = _check_same_model(everything)
    n = n_layers * n_heads
    rows = []
    for name, group in {**groups, "all": everything}.items():
        sizes = [len(s.kept_heads) for s in group]
        observed = len(heuristic_core(group))
        tail = random_intersection_distribution(n, sizes)[observed:].sum()
        rows.append({"group": name, "subnetworks": len(group), "mean_kept_heads": float(np.mean(sizes)),
                     "observed_intersection": observed, "expected_random": expected_random_intersection(n, sizes),
                     "p_random_at_least_observed": float(tail)})
    return pd.DataFrame(rows)


def cooccurrence_counts(a: Sequence[Subnetwork], b: Sequence[Subnetwork]) -> pd.DataFrame:
    """Figure 5's table: entry (i, j) = number of heads in exactly i of ``a`` and j of ``b``."""
    freq_a, freq_b = head_frequencies(a)["count"], head_frequencies(b)["count"]
    table = np.zeros((len(a) + 1, len(b) + 1), dtype=int)
    np.add.at(table, (freq_a.to_numpy(), freq_b.to_numpy()), 1)
    return pd.DataFrame(table, index=pd.Index(range(len(a) + 1), name="in_a"),
                        columns=pd.Index(range(len(b) + 1), name="in_b"))


def cooccurrence_figure(a: Sequence[Subnetwork], b: Sequence[Subnetwork], name_a: str = "a",
                        name_b: str = "b") -> go.Figure:
    """Heatmap of ``cooccurrence_counts`` with the counts written in the cells (the paper's Figure 5)."""
    counts = cooccurrence_counts(a, b)
    figure = go.Figure(go.Heatmap(z=counts.to_numpy(), x=[f"{j}/{len(b)}" for j in counts.columns],
                                  y=[f"{i}/{len(a)}" for i in counts.index], colorscale="Blues",
                                  text=counts.to_numpy(), texttemplate="%{text}", colorbar={"title": "heads"}))
    figure.update_layout(title=f"Heads by how many subnetworks keep them ({name_a} vs {name_b})",
                         xaxis_title=f"fraction of {name_b} subnetworks", yaxis_title=f"fraction of {name_a} subnetworks")
    return figure


def frequency_figure(frequencies: pd.DataFrame, title: str = "Head frequency") -> go.Figure:
    """Layer x head heatmap of the fraction of subnetworks that keep each head."""
    grid = frequencies.pivot(index="layer", columns="head", values="frequency")
    figure = go.Figure(go.Heatmap(z=grid.to_numpy(), x=[f"H{h}" for h in grid.columns],
                                  y=[f"L{layer}" for layer in grid.index], zmin=0, zmax=1, colorscale="Viridis"))
    figure.update_layout(title=title, yaxis_autorange="reversed")
    return figure


def overlap_report(groups: Mapping[float, Sequence[Subnetwork]]) -> Report:
    """Section 4's overlap summary of subnetworks grouped by sparsity, composed once for the CLI (text),
    the run report (HTML) and the results docs (markdown): intersections against chance, the core,
    head frequencies (figure and table), and for each pair of neighbouring sparsities Spearman's rho
    and Figure 5 (figure and counts)."""
    names = {sparsity: f"{sparsity:.0%}" for sparsity in groups}
    everything = [s for group in groups.values() for s in group]
    n_layers, n_heads = _check_same_model(everything)
    core = heuristic_core(everything)
    report = Report("Overlap of the subnetworks")
    report.table(intersection_summary({names[s]: group for s, group in groups.items()}))
    report.text(f"{len(core)} of {n_layers * n_heads} heads kept by every subnetwork (the core): "
                f"{format_units(core) or 'none'}")
    counts = pd.DataFrame({"unit": head_frequencies(everything)["unit"]})
    for sparsity, group in groups.items():
        frequencies = head_frequencies(group)
        report.figure(frequency_figure(frequencies, f"Fraction of {names[sparsity]} subnetworks keeping each head"))
        counts[f"kept at {names[sparsity]} (of {len(group)})"] = frequencies["count"].to_numpy()
    sparsities = list(groups)
    for a, b in zip(sparsities, sparsities[1:]):
        rho, p = frequency_agreement(groups[a], groups[b])
        report.text(f"Spearman rho between head frequencies at {names[a]} and {names[b]}: {rho:.3f} (p = {p:.2g})")
        report.figure(cooccurrence_figure(groups[a], groups[b], names[a], names[b]))
        report.text(f"Figure 5 as numbers: heads kept by i of the {names[a]} subnetworks (rows) and j of the "
                    f"{names[b]} subnetworks (columns)")
        table = cooccurrence_counts(groups[a], groups[b])
        table.columns = [f"j = {j}" for j in table.columns]
        report.table(table.reset_index().rename(columns={"in_a": "i"}))
    kept = counts.drop(columns="unit").max(axis=1) > 0
    report.text("Heads kept by at least one subnetwork, by sparsity:")
    report.table(counts[kept].sort_values(list(counts.columns[1:]), ascending=False))
    return report


def frequencies_by_sparsity(groups: Mapping[float, Sequence[Subnetwork]]) -> pd.DataFrame:
    """``head_frequencies`` of each sparsity's subnetworks, stacked, with a ``sparsity`` column."""
    return pd.concat([head_frequencies(group).assign(sparsity=sparsity) for sparsity, group in groups.items()],
                     ignore_index=True)


def write_overlap_files(groups: Mapping[float, Sequence[Subnetwork]], out: Path) -> None:
    """``frequencies.csv``, ``intersection.csv``, one frequency heatmap per sparsity and one Figure 5 per pair of
    neighbouring sparsities (standalone HTML) in ``out``."""
    from heurlens.runtime.cache import atomic_write_csv

    names = {sparsity: f"{sparsity:.0%}" for sparsity in groups}
    atomic_write_csv(out / "frequencies.csv", frequencies_by_sparsity(groups))
    atomic_write_csv(out / "intersection.csv", intersection_summary({names[s]: group for s, group in groups.items()}))
    for sparsity, group in groups.items():
        frequency_figure(head_frequencies(group)).write_html(out / f"frequency-{names[sparsity]}.html")
    sparsities = list(groups)
    for a, b in zip(sparsities, sparsities[1:]):
        cooccurrence_figure(groups[a], groups[b], names[a], names[b]).write_html(
            out / f"cooccurrence-{names[a]}-{names[b]}.html")
