"""Effective size over training (Heuristic Core paper, Section 4, Figure 6), as the released script computes it
(princeton-nlp/Heuristic-Core, ``scripts/visualization/mnli-effective-size.py``).

A subnetwork is *faithful* to its model on a data set D when its accuracy on D is above the full
model's minus a margin (3 points): one-sided, so a subnetwork that beats the full model is
faithful. For each pruning seed, the effective size on D is the size of the sparsest faithful
subnetwork of that seed, 1 - (its *target* sparsity), in kept heads and MLPs (the full model when
none is faithful); the effective size is the mean of that over seeds, shown with its spread. D is
the in-domain set, the out-of-domain sets (mean accuracy over the HANS-style subcases), or all
sets together (mean over every evaluation set, the released script's "both"). Faithfulness can be judged on
another metric than accuracy (``metrics=``: the first one, with ``tolerance`` in its units; higher is better).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from heurlens.errors import HeurlensError
from heurlens.interventions.ablation import metric_names
from heurlens.interventions.means import UnitMeans
from heurlens.interventions.units import UnitLayout
from heurlens.protocols import Loss, Metrics, PreparedModel, Task
from heurlens.pruning.evaluation import evaluate_subnetworks
from heurlens.pruning.run_folder import data_id_of
from heurlens.pruning.runs import prune
from heurlens.pruning.settings import PruneSettings
from heurlens.pruning.subnetwork import SPARSITY_TOLERANCE
from heurlens.runtime.cache import atomic_write_csv
from heurlens.runtime.distributed import Workers
from heurlens.runtime.run_folders import RunFolder

SPARSITY_GRID = [round(0.05 * i, 2) for i in range(1, 20)]  # 5%, 10%, ..., 95%
EFFECTIVE_SIZE_FILE = "effective-size.csv"
DATA_KINDS = ("in_domain", "ood", "mixed")
FOLDER_MARKERS = ("settings.json", EFFECTIVE_SIZE_FILE, "*/sparsity-*", "*/unit-means.safetensors")


def accuracy_by_kind(evaluation: pd.DataFrame, column: str = "accuracy") -> pd.DataFrame:
    """Per subnetwork (and the full model) of ``evaluate_subnetworks``' table: accuracy (or another metric's
    ``column``) in-domain (its first eval set), OOD (mean over the other sets) and mixed (mean over every set)."""
    first = evaluation["eval_set"].iloc[0]
    keys = ["subnetwork", "target_sparsity", "achieved_sparsity", "seed"]
    grouped = evaluation.assign(in_domain=evaluation["eval_set"] == first).groupby(keys, sort=False, dropna=False)
    rows = []
    for key, group in grouped:
        in_domain = group.loc[group["in_domain"], column].mean()
        ood = group.loc[~group["in_domain"], column].mean()
        if pd.isna(ood):
            raise HeurlensError("effective size needs out-of-domain sets next to the in-domain one")
        rows.append(dict(zip(keys, key)) | {"in_domain": in_domain, "ood": ood, "mixed": group[column].mean()})
    return pd.DataFrame(rows)


def effective_size_per_seed(evaluation: pd.DataFrame, n_units: int, margin: float = 0.03,
                            column: str = "accuracy") -> pd.DataFrame:
    """One row per (seed, data kind): the sparsest faithful target sparsity of that seed (0 when none is:
    the full model) and its effective size, n_units x (1 - that sparsity). A subnetwork whose achieved sparsity
    missed its target (``SPARSITY_TOLERANCE``) stands for no sparsity and is never counted faithful."""
    table = accuracy_by_kind(evaluation, column)
    full = table[table["subnetwork"] == "full model"].iloc[0]
    subs = table[table["subnetwork"] != "full model"]
    rows = []
    for seed, runs in subs.groupby("seed", sort=True):
        met = runs[(runs["achieved_sparsity"] - runs["target_sparsity"]).abs() <= SPARSITY_TOLERANCE]
        for kind in DATA_KINDS:
            faithful = met[met[kind] > full[kind] - margin]
            sparsity = float(faithful["target_sparsity"].max()) if len(faithful) else 0.0
            rows.append({"seed": seed, "kind": kind, "sparsity": sparsity, "size": n_units * (1 - sparsity)})
    return pd.DataFrame(rows)


def effective_sizes(evaluation: pd.DataFrame, n_units: int, margin: float = 0.03,
                    column: str = "accuracy") -> dict[str, float]:
    """Effective size per data kind: the mean over seeds of ``effective_size_per_seed``."""
    per_seed = effective_size_per_seed(evaluation, n_units, margin, column)
    return {kind: float(per_seed.loc[per_seed["kind"] == kind, "size"].mean()) for kind in DATA_KINDS}


def effective_size_spread(evaluation: pd.DataFrame, n_units: int, margin: float = 0.03) -> dict[str, float]:
    """The standard deviation over seeds of each kind's effective size (0 for one seed)."""
    per_seed = effective_size_per_seed(evaluation, n_units, margin)
    return {kind: float(per_seed.loc[per_seed["kind"] == kind, "size"].std(ddof=0)) for kind in DATA_KINDS}


def checkpoint_step(path: Path, index: int) -> int:
    """Training step of a checkpoint directory named ``step-1200`` (``heurlens finetune``'s) or ``checkpoint-1200``
    (the Hugging Face Trainer's); any other name, whatever digits it ends in (``model-v2``), by its position."""
    match = re.fullmatch(r"(?:step|checkpoint)-(\d+)", Path(path).name)
    return int(match.group(1)) if match else index


def effective_size_of(model: PreparedModel, train: Task, eval_sets: list[Task], means: UnitMeans,
                      sparsities: Sequence[float] = SPARSITY_GRID, seeds: Sequence[int] = range(3),
                      out: Path | None = None, config: PruneSettings = PruneSettings(), tolerance: float = 0.03,
                      search: Literal["grid", "bisect"] = "grid", progress: bool = True,
                      workers: Workers | None = None, metrics: Metrics | None = None,
                      loss: Loss | None = None) -> tuple[dict[str, float], pd.DataFrame]:
    """Prune ``model`` at the sparsities (every seed), evaluate, and return (effective sizes, evaluation).

    ``search="grid"`` prunes at every sparsity (the paper), all sparsities x seeds in one ``prune`` call
    (so on Ray ``workers`` all of them at once). ``"bisect"`` assumes a seed's
    faithfulness only gets lost as sparsity grows and bisects the sorted grid for each data kind and
    seed, pruning at about log2(len(grid)) sparsities per kind instead of all of them (the seeds of one
    sparsity at once on ``workers``). ``metrics``: faithfulness is judged on the first (default accuracy);
    ``loss``: pruning's objective (default KL, see ``prune``).
    """
    column = metric_names(metrics)[0]
    grid = sorted(sparsities)
    n_units = UnitLayout(model.n_layers, model.n_heads).n_units
    evaluated: dict[float, pd.DataFrame] = {}

    def evaluation_at(sparsity: float) -> pd.DataFrame:
        if sparsity not in evaluated:
            subnetworks = prune(model, train, sparsity=sparsity, seeds=seeds, out=out, config=config, means=means,
                                progress=progress, workers=workers, loss=loss)
            evaluated[sparsity] = evaluate_subnetworks(model, subnetworks, eval_sets, means=means, metrics=metrics,
                                                       dtype=config.dtype)
        return evaluated[sparsity]

    if search == "grid":
        found = prune(model, train, sparsity=grid, seeds=seeds, out=out, config=config, means=means, progress=progress,
                      workers=workers, loss=loss)
        for sparsity in grid:
            evaluated[sparsity] = evaluate_subnetworks(
                model, [sub for sub in found if sub.target_sparsity == sparsity], eval_sets, means=means,
                metrics=metrics, dtype=config.dtype)
    elif search == "bisect":
        for kind in DATA_KINDS:
            for seed in seeds:
                low, high = -1, len(grid)  # grid[low] is faithful for this seed (or low = -1), grid[high] is not
                while high - low > 1:
                    middle = (low + high) // 2
                    at = evaluation_at(grid[middle])
                    at = at[(at["subnetwork"] == "full model") | (at["seed"] == seed)]
                    if effective_size_per_seed(at, n_units, tolerance, column).set_index("kind").loc[kind, "sparsity"] > 0:
                        low = middle
                    else:
                        high = middle
    else:
        raise HeurlensError(f"unknown search {search!r}; use grid or bisect")
    tables = [evaluated[s] for s in sorted(evaluated)]
    evaluation = pd.concat([tables[0]] + [t[t["subnetwork"] != "full model"] for t in tables[1:]], ignore_index=True)
    return effective_sizes(evaluation, n_units, tolerance, column), evaluation


def effective_size_over_checkpoints(checkpoints: Sequence[str | Path], out: Path,
                                    eval_sets_for: Callable[[PreparedModel], list[Task]],
                                    sparsities: Sequence[float] = SPARSITY_GRID, seeds: Sequence[int] = range(3),
                                    config: PruneSettings = PruneSettings(), tolerance: float = 0.03,
                                    search: Literal["grid", "bisect"] = "grid", train_examples: int = 2000,
                                    batch_size: int = 16, progress: bool = True,
                                    workers: Workers | None = None, device: str | None = None) -> pd.DataFrame:
    """Figure 6's table, one row per fine-tuning checkpoint in step order: the full model's accuracy and the
    effective size (mean and spread over seeds) per data kind. Each checkpoint is pruned on
    ``train_examples`` SNLI training pairs into ``out/<checkpoint name>`` (resumable) and evaluated on
    ``eval_sets_for(model)``; the table is rewritten to ``out/effective-size.csv`` after every checkpoint, so
    nothing finished is lost, and the figure goes to ``out/effective-size.html``. With Ray ``workers``, the
    checkpoints go one after another and each one's prune runs (sparsities x seeds) at once. ``device``: where
    each checkpoint runs (``load_model``'s).

    The table keeps the rows of checkpoints measured by earlier calls into the same ``out`` (one row per
    checkpoint folder name; a checkpoint measured again replaces its row), so checkpoints can be added one at a
    time as a fine-tune writes them, from several processes at once. ``out/settings.json`` records what makes
    rows comparable (grid, search, tolerance, seeds, pruning data and settings, evaluation sets); a call with
    other settings is refused before anything is pruned."""
    from heurlens.data.nli_setup import snli_pruning_data, snli_reference_means
    from heurlens.models.loading import load_model

    if not checkpoints:
        raise HeurlensError("give checkpoint directories; make them with "
                            "heurlens finetune --checkpoint-every 50 --out runs/ft (then runs/ft/checkpoints/*)")
    folder = effective_size_folder(out).opened()
    out = folder.path
    if folder.finished(EFFECTIVE_SIZE_FILE) and not folder.has_settings():
        raise HeurlensError(f"{out / EFFECTIVE_SIZE_FILE} was written before heurlens recorded an effective-size "
                            "run's settings, so new rows cannot be checked against it. Use another out=, or delete "
                            "that file to measure its checkpoints again (their finished prune runs are reused)")
    if folder.finished(EFFECTIVE_SIZE_FILE):
        read_effective_size_table(out / EFFECTIVE_SIZE_FILE)  # a damaged table refused before hours of pruning
    rows = []
    for index, checkpoint in enumerate(sorted(checkpoints, key=lambda c: checkpoint_step(Path(c), 0))):
        model = load_model(str(checkpoint), device=device)
        n_units = UnitLayout(model.n_layers, model.n_heads).n_units
        train, eval_sets = snli_pruning_data(model, train_examples, batch_size), eval_sets_for(model)
        folder.record_settings(
            {"sparsities": sorted(sparsities), "search": search, "tolerance": tolerance, "seeds": list(seeds),
             "train": data_id_of(train), "pruning": config.to_dict(), "eval_sets": [data_id_of(task) for task in eval_sets]})
        sizes, evaluation = effective_size_of(
            model, train, eval_sets, snli_reference_means(model), sparsities, seeds, out / Path(checkpoint).name,
            config, tolerance, search, progress, workers)
        full = accuracy_by_kind(evaluation).iloc[0]
        rows.append({"checkpoint": str(checkpoint), "step": checkpoint_step(Path(checkpoint), index)}
                    | {f"acc_{kind}": full[kind] for kind in DATA_KINDS}
                    | {f"size_{kind}": sizes[kind] for kind in DATA_KINDS}
                    | {f"size_{kind}_std": std for kind, std in
                       effective_size_spread(evaluation, n_units, tolerance).items()}
                    | {"n_units": n_units})
        table = _merge_rows(folder, pd.DataFrame(rows))
    effective_size_figure(table).write_html(out / "effective-size.html")
    return table


TABLE_COLUMNS = ("checkpoint", "step", *(f"{what}_{kind}" for kind in DATA_KINDS for what in ("acc", "size")), "n_units")


def read_effective_size_table(path: Path) -> pd.DataFrame:
    """The table an earlier call wrote at ``path``, refused in one line when it cannot be read whole (empty, not
    text, a row cut short, other columns): merging it would end in a traceback or in rows of NaN."""
    fix = (f"move {path} away or delete it; the checkpoints' finished prune runs in {path.parent} are kept, so "
           "measuring them again only evaluates")
    try:
        table = pd.read_csv(path)
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError, ValueError) as error:
        raise HeurlensError(f"{path} cannot be read as a table ({type(error).__name__}): {fix}") from error
    missing = [column for column in TABLE_COLUMNS if column not in table]
    if missing or table.empty or table[list(TABLE_COLUMNS)].isna().any().any():
        what = f"lacks the columns {', '.join(missing)}" if missing else "has empty or cut-short rows"
        raise HeurlensError(f"{path} {what}: {fix}")
    return table


def effective_size_folder(out: str | Path) -> RunFolder:
    """The folder of an effective-size run: its table, figure, settings and one prune run per checkpoint."""
    return RunFolder(Path(out), "effective-size run", FOLDER_MARKERS)


def _merge_rows(folder: RunFolder, new: pd.DataFrame) -> pd.DataFrame:
    """Write ``new`` rows into the folder's table, keeping the rows of the other checkpoints (by folder name)
    that earlier calls wrote; read, merged and written under the folder's lock, so concurrent calls lose no row."""
    out = folder.path
    with folder.writing(wait=True):
        path = out / EFFECTIVE_SIZE_FILE
        earlier = read_effective_size_table(path) if path.exists() else new.iloc[:0]
        measured_again = earlier["checkpoint"].map(lambda c: Path(c).name).isin(
            new["checkpoint"].map(lambda c: Path(c).name))
        table = pd.concat([earlier[~measured_again], new], ignore_index=True).sort_values("step", kind="stable")
        table = table.reset_index(drop=True)
        atomic_write_csv(path, table)
    return table


def effective_size_figure(table: pd.DataFrame) -> go.Figure:
    """Figure 6: accuracy and effective size against training step, per data kind.

    ``table`` has one row per checkpoint: step, full-model accuracy ``acc_<kind>`` and effective
    size ``size_<kind>`` (mean over seeds; ``size_<kind>_std`` their spread, drawn as error bars)
    for each kind."""
    figure = make_subplots(rows=1, cols=2, subplot_titles=("Accuracy of the full model", "Effective size"))
    for kind in DATA_KINDS:
        figure.add_trace(go.Scatter(x=table["step"], y=100 * table[f"acc_{kind}"], name=f"accuracy ({kind})",
                                    mode="lines+markers"), row=1, col=1)
        spread = table[f"size_{kind}_std"] if f"size_{kind}_std" in table else None
        figure.add_trace(go.Scatter(x=table["step"], y=table[f"size_{kind}"], name=f"effective size ({kind})",
                                    mode="lines+markers",
                                    error_y=None if spread is None else {"type": "data", "array": spread}),
                         row=1, col=2)
    figure.update_xaxes(title_text="training step")
    figure.update_yaxes(title_text="accuracy (%)", row=1, col=1)
    figure.update_yaxes(title_text="kept heads + MLPs", row=1, col=2)
    return figure
