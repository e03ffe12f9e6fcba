"""Analyses of subnetworks from The Heuristic Core (Bhaskar et al. 2024), Sections 3 to 5."""

from heurlens.analysis.ablation_studies import (
                                       group_superadditivity,
                                       scan_table,
                                       single_unit_scan,
)
from heurlens.analysis.effective_size import (
                                       effective_size_figure,
                                       effective_size_of,
                                       effective_sizes,
)
from heurlens.analysis.head_detector import head_detector_scores
from heurlens.analysis.ioi_heads import ioi_head_scores
from heurlens.analysis.overlap import (
                                       analysed_core,
                                       cooccurrence_counts,
                                       cooccurrence_figure,
                                       expected_random_intersection,
                                       frequency_agreement,
                                       frequency_figure,
                                       head_frequencies,
                                       heuristic_core,
                                       intersection_summary,
                                       overlap_report,
                                       random_intersection_distribution,
)
from heurlens.analysis.patterns import attention_plot, pattern_scores
from heurlens.analysis.report import Report

__all__ = ["Report", "analysed_core", "attention_plot", "cooccurrence_counts", "cooccurrence_figure",
           "effective_size_figure", "effective_size_of", "effective_sizes", "expected_random_intersection",
           "frequency_agreement", "frequency_figure", "group_superadditivity", "head_detector_scores", "head_frequencies",
           "heuristic_core", "intersection_summary", "ioi_head_scores", "overlap_report", "pattern_scores",
           "random_intersection_distribution", "scan_table", "single_unit_scan"]
