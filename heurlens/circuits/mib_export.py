"""``heurlens export-mib``'s folder: each ranking's importance file (and, asked for, its circuit at every size of
MIB's grid) under ``--out``, written only where heurlens may write.

The folder is new, empty, or one export-mib wrote: it then holds ``mib-export.json``, which lists every file an
export planned there. A non-empty folder without it is the user's and is refused, as is a planned path that holds a
file the list does not name (a user's file is never overwritten, even one that looks like MIB's format)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path

from torch import Tensor

from heurlens.circuits.attribution_runs import holds_scores, load_attribution, scored_model
from heurlens.circuits.faithfulness_areas import MIB_GRID, grid_count
from heurlens.circuits.mib_files import write_mib_file
from heurlens.errors import HeurlensError
from heurlens.interventions.rankings import Ranking, ranking_of
from heurlens.protocols import PreparedModel
from heurlens.pruning.run_folder import find_subnetworks
from heurlens.pruning.subnetwork import Subnetwork
from heurlens.runtime.cache import atomic_write_json
from heurlens.runtime.run_folders import check_writable_dir, refuse_foreign_dir

EXPORT_LIST = "mib-export.json"  # the files export-mib planned in a folder: its mark that heurlens wrote there

ExportPlan = dict[Path, tuple[Ranking, "Tensor | None"]]  # file -> (its ranking, the circuit's keep mask or None)


def export_run(run_dir: Path, out: Path, with_circuits: bool, load_model: Callable[[str], PreparedModel]
               ) -> tuple[int, int]:
    """Export every ranking of ``run_dir`` under ``out`` (``heurlens export-mib``): an attribution run's scores, on
    the graph it scored, into ``out`` itself; each prune record's log_alpha into ``out/<record>/``. ``load_model(model
    id)`` loads the model the run names (the CLI's ``--model``, device and dtype); a run of another model is refused
    before anything is written. The numbers of files written and of rankings."""
    if holds_scores(run_dir):  # one ranking: the run's scores, on the graph it scored
        run = load_attribution(run_dir)
        rankings = {out: run.ranking}
        loaded = load_model(run.model_id)
        run.check_model(loaded)
        model = scored_model(loaded, run.level, run.graph)
    else:
        records = {path: Subnetwork.load(path) for path in find_subnetworks(run_dir)}
        if not records:
            raise HeurlensError(f"{run_dir} holds no records (sparsity-*/seed-*.json) and no attribution scores; make "
                                f"them with heurlens prune (or heurlens attribute) --out {run_dir}")
        rankings = {out / path.relative_to(run_dir).with_suffix(""): ranking_of(record)
                    for path, record in records.items()}
        model = load_model(next(iter(records.values())).model_id)
        known = model.known_fingerprints()
        for record in records.values():
            record.check_model(model, known)
    plan = export_plan(out, rankings, with_circuits)
    export_rankings(out, model, plan)
    return len(plan), len(rankings)


def export_plan(out: Path, rankings: Mapping[Path, Ranking], with_circuits: bool) -> ExportPlan:
    """The files to write: ``<folder>/importances.json`` per ranking and, ``with_circuits``, its top items at each
    size of MIB's grid (``circuit-<percent>.json``), checked against the folder's rules before anything is written."""
    plan: ExportPlan = {}
    for folder, ranking in rankings.items():
        plan[folder / "importances.json"] = (ranking, None)
        for size in MIB_GRID if with_circuits else ():
            plan[folder / f"circuit-{100 * size:g}%.json"] = (ranking, ranking.top(grid_count(size, ranking.n_items)))
    refuse_foreign_dir(out, (EXPORT_LIST,), "--out")
    listed = _listed(out)
    foreign = [path for path in plan if path.exists() and str(path.relative_to(out)) not in listed]
    if foreign:
        raise HeurlensError(f"{foreign[0]} exists and heurlens export-mib did not write it (it is not in "
                            f"{out / EXPORT_LIST}); nothing was written: give another --out")
    return plan


def export_rankings(out: Path, model: PreparedModel, plan: ExportPlan) -> None:
    """Write ``plan``'s files (``mib_files.write_mib_file``), after listing them in the folder's ``mib-export.json``
    (so a folder an export was cut short in is still recognised as heurlens')."""
    check_writable_dir(out, "--out")
    listed = _listed(out) | {str(path.relative_to(out)) for path in plan}
    atomic_write_json(out / EXPORT_LIST, {"written_by": "heurlens export-mib", "files": sorted(listed)})
    for path, (ranking, keep) in plan.items():
        check_writable_dir(path.parent, "--out")
        write_mib_file(path, model, ranking, keep)


def _listed(out: Path) -> set[str]:
    """The files ``out``'s ``mib-export.json`` lists (none when there is no list); refused when it cannot be read."""
    path = out / EXPORT_LIST
    if not path.exists():
        return set()
    try:
        files = json.loads(path.read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise HeurlensError(f"{path} cannot be read ({type(error).__name__}); it lists the files heurlens export-mib "
                            "wrote in this folder: restore it, or give another --out") from error
    return {str(name) for name in files}
