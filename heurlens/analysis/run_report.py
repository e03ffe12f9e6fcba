"""The report of a pruning run directory: evaluation, overlap and core, core-head patterns,
effective size when the directory has it. What is expensive to recompute is cached in the run
directory (``evaluation-<key>.csv``, ``patterns-<key>.csv``, the key a hash of the data, the model
and the contents of the subnetwork and means files they cover), written atomically; a cache file
that cannot be read back whole is computed again."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from heurlens.analysis.accuracy_curve import accuracy_curve_figure, highest_faithful_sparsity
from heurlens.analysis.effective_size import EFFECTIVE_SIZE_FILE, effective_size_figure
from heurlens.analysis.head_detector import head_detector_scores
from heurlens.analysis.overlap import analysed_core, overlap_report
from heurlens.analysis.patterns import attention_plot, pattern_scores
from heurlens.analysis.report import Report
from heurlens.circuits.drawing import circuit_figure
from heurlens.errors import HeurlensError
from heurlens.interventions.activation_cache import data_fingerprint
from heurlens.protocols import PreparedModel, Task
from heurlens.pruning.circuit import EdgeCircuit
from heurlens.pruning.evaluation import accuracy_table, evaluate_subnetworks
from heurlens.pruning.run_folder import MEANS_FILE, find_subnetworks, load_run_means, subnetworks_by_sparsity
from heurlens.runtime.cache import atomic_write_csv, stored

EXAMPLE_PAIR = ("The doctor advised the president.", "The president advised the doctor.")  # Figure 7's SO-Swap pair


def cache_path(run_dir: Path, kind: str, data: Sequence[Task], model: PreparedModel) -> Path:
    """``RUN_DIR/<kind>-<key>.csv``: the key changes with the data, the model's fingerprint and the bytes
    of every subnetwork and means file in the run directory (re-pruning changes it)."""
    digest = hashlib.sha256(model.fingerprint().encode())
    for s in data:
        digest.update(f"{s.name}:{data_fingerprint(s)}".encode())
    files = [f for p in find_subnetworks(Path(run_dir)) for f in (p, p.with_suffix(".safetensors"))]
    for file in [*files, Path(run_dir) / MEANS_FILE]:
        digest.update(file.name.encode())
        digest.update(file.read_bytes() if file.exists() else b"")
    return Path(run_dir) / f"{kind}-{digest.hexdigest()[:12]}.csv"


def cached_evaluation(run_dir: Path, model: PreparedModel, eval_sets: Sequence[Task]
                      ) -> pd.DataFrame:
    """The evaluation of every subnetwork of the run directory, read from its cache file or computed."""
    subnetworks = [s for group in subnetworks_by_sparsity([run_dir]).values() for s in group]
    return cached_table(
        cache_path(run_dir, "evaluation", eval_sets, model), (1 + len(subnetworks)) * len(eval_sets),
        lambda: evaluate_subnetworks(model, subnetworks, eval_sets, means=load_run_means(Path(run_dir))))


def cached_patterns(run_dir: Path, eager_model: PreparedModel, pattern_data: Task) -> pd.DataFrame:
    """Attention-pattern scores of every head (sentence pairs: ``pattern_scores``; a prompt task: TransformerLens'
    head-detector scores), read from the run directory's cache or computed."""
    def compute() -> pd.DataFrame:
        if eager_model.labels is None:  # a next-token model: TransformerLens' head detector on its prompts
            return head_detector_scores(eager_model, pattern_data)
        return pattern_scores(eager_model, pattern_data)

    return cached_table(cache_path(run_dir, "patterns", [pattern_data], eager_model),
                        eager_model.n_layers * eager_model.n_heads, compute)


def _first_text(data: Task) -> str:
    """The first prompt of a prompt task (or of plain texts), to plot patterns on."""
    texts = getattr(data, "prompts", None) or getattr(data, "texts", None)
    if not texts:
        raise HeurlensError(f"{data.name} holds no prompt texts to plot attention on")
    return texts[0]


def cached_table(path: Path, rows: int, compute) -> pd.DataFrame:
    """The table cached at ``path`` if it reads back with ``rows`` complete rows; else ``compute()``, saved, and
    the same kind's tables of earlier contents (``<kind>-<other key>.csv``) removed: they can never be read again."""

    def load() -> pd.DataFrame:
        table = pd.read_csv(path)  # a garbled file raises pandas' ParserError, a ValueError
        if len(table) != rows or table.isna().all(axis=1).any():
            raise ValueError(f"{path} is incomplete")
        return table

    def save(table: pd.DataFrame) -> None:
        atomic_write_csv(path, table)
        kind = path.name.rsplit("-", 1)[0]
        for stale in path.parent.glob(f"{kind}-*.csv"):
            if stale != path and len(stale.name) == len(path.name):
                stale.unlink()

    return stored(path, compute, save, load)


def build_run_report(run_dir: Path, model: PreparedModel, eager_model: PreparedModel,
                     eval_sets: Sequence[Task], pattern_data: Task) -> Report:
    """Every table and figure for one run directory (``eager_model``: the same weights with
    ``hook_pattern`` live, for the attention patterns; a ``PromptSet`` for a decoder on a prompt task)."""
    run_dir = Path(run_dir)
    every = subnetworks_by_sparsity([run_dir])  # those that missed their target too: shown, never refused
    everything = [s for group in every.values() for s in group]
    groups = {sparsity: kept for sparsity, group in every.items()
              if (kept := [s for s in group if not s.missed_target])}  # what the core and the overlap pool
    names = {sparsity: f"{sparsity:.0%}" for sparsity in every}
    report = Report(f"heurlens run {run_dir.name}")
    report.text(f"model {everything[0].model_id} (fingerprint {everything[0].model_fingerprint}); "
                f"{len(everything)} subnetworks at sparsities {', '.join(names.values())}; "
                f"pruning data {everything[0].data_id}")
    missed = [s.label for s in everything if s.missed_target]
    if missed:
        report.banner(f"{len(missed)} of {len(everything)} subnetworks missed their target sparsity "
                      f"({', '.join(missed[:6])}{', ...' if len(missed) > 6 else ''}): the tables show them as "
                      "trained, marked '(missed its target)'; "
                      + ("the overlap and the core below leave them out." if groups else
                         "with none on target there is no overlap or core to show. Prune again with more steps "
                         "(--steps) or masks that start lower (--log-alpha-init 2)."))

    report.heading("Accuracy of the full model and each subnetwork (%)")
    evaluation = cached_evaluation(run_dir, model, eval_sets)
    report.table(accuracy_table(evaluation))
    if len(eval_sets) > 1:  # out-of-domain sets next to the in-domain one
        report.figure(accuracy_curve_figure(evaluation))
        report.text("Highest sparsity at which every seed stays within 3 points of the full model in-domain: "
                    f"{highest_faithful_sparsity(evaluation):.0%}")

    circuits = [s for s in everything if isinstance(s, EdgeCircuit)]
    if circuits:
        report.heading("Edge circuits")
        report.text("Each circuit's edges (prune --level edge) and the heads and MLPs they touch; an edge run has no "
                    "node core (heurlens core pools node runs).")
        report.table(pd.DataFrame([{"circuit": c.label, "edges": len(c.edges), "of": c.layout.n_edges,
                                    "components": ",".join(map(str, c.kept))} for c in circuits]))
        for circuit in circuits:
            report.figure(circuit_figure(circuit))
    if circuits or not groups:  # an edge run's circuits are its edges, not a core of the heads they touch
        core: list = []
    else:
        report.extend(overlap_report(groups))
        core, what = analysed_core(groups)

    if core:
        report.heading("Attention patterns of the core heads")
        report.text(f"Heads shown: {what}.")
        patterns = cached_patterns(run_dir, eager_model, pattern_data)
        report.table(patterns[patterns["unit"].isin([str(u) for u in core])])
        text, pair = (_first_text(pattern_data), None) if eager_model.labels is None else EXAMPLE_PAIR
        report.text(f"Core heads on: {text}" + (f" / {pair}" if pair else ""))
        report.circuitsvis(attention_plot(eager_model, text, pair, core))

    effective = run_dir / EFFECTIVE_SIZE_FILE
    if effective.exists():
        report.heading("Effective size over training")
        table = pd.read_csv(effective)
        report.figure(effective_size_figure(table))
        report.table(table)
    return report
