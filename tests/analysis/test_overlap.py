"""Overlap analyses on synthetic subnetworks with a planted core, and the random-choice null
checked against simulation."""

from collections import Counter

import numpy as np
import pytest

from heurlens.analysis.overlap import (
    analysed_core,
    cooccurrence_counts,
    expected_random_intersection,
    frequency_agreement,
    head_frequencies,
    heuristic_core,
    intersection_summary,
    overlap_report,
    random_intersection_distribution,
)
from heurlens.errors import HeurlensError
from heurlens.interventions.units import Unit, all_units
from heurlens.pruning.subnetwork import Subnetwork

N_LAYERS, N_HEADS = 4, 6
HEADS = all_units(N_LAYERS, N_HEADS, include_mlps=False)
CORE = [Unit(0, 1), Unit(2, 3), Unit(3, 0)]


def subnetwork(kept, sparsity=0.5, seed=0, fingerprint="f"):
    return Subnetwork(kept=sorted(kept), n_layers=N_LAYERS, n_heads=N_HEADS, target_sparsity=sparsity,
                      achieved_sparsity=sparsity, threshold=0.5, seed=seed, model_id="m", model_fingerprint=fingerprint,
                      data_id="d")


def planted(k, stride, sparsity):
    """k subnetworks that all keep CORE; subnetwork i keeps a non-core head j iff (j + i) % stride != 0,
    so every non-core head is dropped by at least one of them."""
    others = [u for u in HEADS if u not in CORE]
    return [subnetwork(CORE + [u for j, u in enumerate(others) if (j + i) % stride != 0], sparsity, i)
            for i in range(k)]


def test_planted_core_is_recovered():
    fifty, seventy = planted(6, 3, 0.5), planted(6, 2, 0.7)
    assert heuristic_core(fifty) == CORE
    assert heuristic_core(fifty + seventy) == CORE


def test_head_frequencies_count_subnetworks():
    subs = planted(6, 3, 0.5)
    frequencies = head_frequencies(subs).set_index("unit")
    for unit in HEADS:
        assert frequencies.loc[str(unit), "count"] == sum(unit in s.kept for s in subs)
    assert (frequencies.loc[[str(u) for u in CORE], "frequency"] == 1.0).all()
    assert frequencies.loc["L0.H0", "frequency"] == pytest.approx(4 / 6)  # j = 0 dropped when i % 3 == 0


def test_cooccurrence_counts_match_a_direct_count():
    a, b = planted(6, 3, 0.5), planted(4, 2, 0.7)
    counts = cooccurrence_counts(a, b)
    direct = Counter((sum(u in s.kept for s in a), sum(u in s.kept for s in b)) for u in HEADS)
    assert counts.to_numpy().sum() == len(HEADS)
    for (i, j), n in direct.items():
        assert counts.loc[i, j] == n
    assert counts.loc[6, 4] == len(CORE)


def test_spearman_matches_ranks_computed_by_hand():
    a, b = planted(6, 3, 0.5), planted(4, 2, 0.7)
    rho, p = frequency_agreement(a, b)
    ranks_a = head_frequencies(a)["frequency"].rank().to_numpy()
    ranks_b = head_frequencies(b)["frequency"].rank().to_numpy()
    assert rho == pytest.approx(np.corrcoef(ranks_a, ranks_b)[0, 1])
    assert frequency_agreement(a, a)[0] == pytest.approx(1.0)
    assert 0 <= p <= 1


def test_random_null_matches_simulation():
    n, sizes = 24, [12, 10, 8]
    exact = random_intersection_distribution(n, sizes)
    assert exact.sum() == pytest.approx(1.0)
    assert (exact * np.arange(n + 1)).sum() == pytest.approx(expected_random_intersection(n, sizes))
    rng = np.random.default_rng(0)
    trials = 40_000
    observed = np.zeros(n + 1)
    for _ in range(trials):
        alive = np.ones(n, dtype=bool)
        for m in sizes:
            chosen = np.zeros(n, dtype=bool)
            chosen[rng.choice(n, m, replace=False)] = True
            alive &= chosen
        observed[alive.sum()] += 1
    assert np.abs(observed / trials - exact).max() < 0.01
    assert expected_random_intersection(144, [43.2] * 12) == pytest.approx(7.7e-5, rel=0.01)  # the paper's number


def test_intersection_summary_reports_observed_and_null():
    groups = {"50%": planted(6, 3, 0.5), "70%": planted(6, 2, 0.7)}
    summary = intersection_summary(groups).set_index("group")
    assert summary.loc["all", "observed_intersection"] == len(CORE)
    assert summary.loc["all", "subnetworks"] == 12
    assert summary.loc["all", "expected_random"] < 0.2  # 24 * (17/24)^6 * (13.5/24)^6, about 0.1
    assert summary.loc["all", "p_random_at_least_observed"] < 0.01


def test_subnetworks_of_different_models_are_refused():
    with pytest.raises(HeurlensError, match="different models"):
        heuristic_core([subnetwork(CORE), subnetwork(CORE, fingerprint="other")])
    with pytest.raises(HeurlensError, match="no subnetworks"):
        head_frequencies([])


def test_analysed_core_falls_back_to_the_lowest_sparsity():
    fifty, seventy = planted(6, 3, 0.5), planted(6, 2, 0.7)
    core, what = analysed_core({0.5: fifty, 0.7: seventy})
    assert core == CORE and what.startswith("the core")
    without = [subnetwork([u for u in s.kept if u not in CORE], 0.7, s.seed) for s in seventy]
    core, what = analysed_core({0.5: fifty, 0.7: without})
    assert core == CORE and "no head is in all 12 subnetworks" in what and "at 50%" in what


def test_overlap_report_is_one_summary_in_three_renderings():
    """The CLI text, the results markdown and the HTML page carry the same core, rho and Figure 5 counts;
    figures only in HTML."""
    fifty, seventy = planted(6, 3, 0.5), planted(6, 2, 0.7)
    report = overlap_report({0.5: fifty, 0.7: seventy})
    rho, p = frequency_agreement(fifty, seventy)
    core_line = "3 of 24 heads kept by every subnetwork (the core): L0.H1,L2.H3,L3.H0"
    rho_line = f"Spearman rho between head frequencies at 50% and 70%: {rho:.3f} (p = {p:.2g})"
    text, markdown, page = report.to_text(), report.to_markdown(level=2), report.to_html()
    for rendering in (text, markdown, page):
        assert core_line in rendering and rho_line in rendering
    assert markdown.startswith("## Overlap of the subnetworks")
    counts = cooccurrence_counts(fifty, seventy)
    assert counts.loc[6, 6] == 3  # the core, in all 6 + 6
    assert "main-svg" not in text and "plotly" not in markdown and page.count('class="plotly-graph-div"') == 3
    first_row = next(line for line in text.splitlines() if line.strip().startswith("L0.H1"))
    assert first_row.split() == ["L0.H1", "6", "6"]  # per-head counts at 50% and 70%
