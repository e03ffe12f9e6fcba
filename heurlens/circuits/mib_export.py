"""``heurlens export-mib``'s folder: each ranking's importance file (and, asked for, its circuit at every size of
MIB's grid) under ``--out``, written only where heurlens may write.

The folder is new, empty, or one export-mib wrote: it then holds ``mib-export.json``, which lists every file an
export planned there. A non-empty folder without it is the user's and is refused, as is a planned path that holds a
file the list does not name (a user's file is never overwritten, even one that looks like MIB's format)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from torch import Tensor

from heurlens.circuits.faithfulness_areas import MIB_GRID, grid_count
from heurlens.circuits.mib_files import write_mib_file
from heurlens.errors import HeurlensError
from heurlens.interventions.rankings import Ranking
from heurlens.protocols import PreparedModel
from heurlens.runtime.cache import atomic_write_json
from heurlens.runtime.run_folders import check_writable_dir, refuse_foreign_dir

EXPORT_LIST = "mib-export.json"  # the files export-mib planned in a folder: its mark that heurlens wrote there

ExportPlan = dict[Path, tuple[Ranking, "Tensor | None"]]  # file -> (its ranking, the circuit's keep mask or None)


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
