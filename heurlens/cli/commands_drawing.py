"""The drawing command: a circuit's strongest edges as a file for a paper (``heurlens.circuits.circuit_files``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from heurlens.cli.group import cli
from heurlens.cli.options import device_option, weights_dtype_option

if TYPE_CHECKING:
    from heurlens.circuits.drawn_edges import DrawnCircuit
    from heurlens.interventions.graph import EdgeLayout


@cli.command()
@click.argument("source", type=click.Path(exists=True))
@click.option("--out", required=True, type=click.Path(dir_okay=False),
              help="The drawing: a .svg, .png or .pdf file (written atomically).")
@click.option("--top", type=click.IntRange(min=1), default=50, show_default=True,
              help="Edges drawn, the circuit's strongest: by |score| for attribution scores, by log_alpha for a mask "
                   "run; the rest are counted under the title.")
@click.option("--size", type=float, default=None,
              help="The circuit as the ranking's top share of edges (0.05: 5%, MIB's cut). Default: a prune "
                   "record's kept edges, a MIB circuit file's in_graph edges, or the whole ranking.")
@click.option("--record", default=None,
              help="Of a prune run: the record drawn, its path under SOURCE (e.g. sparsity-0.95/seed-00); default "
                   "the first.")
@click.option("--model", default=None,
              help="Model (attribution runs: default the one the run scored; a MIB file names none: required).")
@weights_dtype_option
@device_option
def draw(source: str, out: str, top: int, size: float | None, record: str | None, model: str | None,
         weights_dtype: str | None, device: str | None) -> None:
    """Draw a circuit's --top strongest edges as a file for a paper. SOURCE is an attribution run (its scores), an
    edge prune run (a record's circuit) or a circuit or importance file in MIB's format (.json, with --model). Only
    the nodes the edges touch, a row per layer they use (key-value heads, query heads, the MLP in a column of its
    own), the embeddings at the bottom and the logits on top; width |score|, colour the sign, line the input entered
    (heurlens.circuits.circuit_files)."""
    from heurlens.circuits.circuit_files import circuit_drawing, write_drawing
    from heurlens.runtime.run_folders import check_writable_file

    check_writable_file(Path(out), "--out")
    drawn, layout, what = _circuit_to_draw(Path(source), top, size, record, model, weights_dtype, device)
    write_drawing(circuit_drawing(drawn, layout.n_heads, layout.n_kv_heads), Path(out))
    rest = f" ({drawn.not_drawn:,} more in the circuit, not drawn)" if drawn.not_drawn else ""
    click.echo(f"drew {len(drawn.edges)} edges of {what} into {out}{rest}")


def _circuit_to_draw(source: Path, top: int, size: float | None, record: str | None, model: str | None,
                     weights_dtype: str | None, device: str | None) -> tuple[DrawnCircuit, EdgeLayout, str]:
    """(the drawn circuit, the model's EdgeLayout, a name) of what SOURCE holds (``circuit_to_draw``: its ``top``
    strongest edges of the circuit it holds, or of the ranking's top ``size``), refused by name when it holds no
    edges."""
    import heurlens
    from heurlens.circuits.attribution_runs import holds_scores, load_attribution, scored_model
    from heurlens.circuits.drawn_edges import circuit_to_draw, record_to_draw, uniform_ranking
    from heurlens.circuits.mib_files import read_mib_file
    from heurlens.errors import HeurlensError
    from heurlens.interventions.graph import EdgeLayout
    from heurlens.interventions.layouts import layout_of
    from heurlens.pruning.circuit import EdgeCircuit
    from heurlens.pruning.records import load_record
    from heurlens.pruning.run_folder import find_subnetworks

    not_edges = (f"{source} ranks heads and MLPs, not edges: heurlens report shows a node run's subnetworks; draw "
                 "takes edge runs (attribute or prune with --level edge) and edge files")
    if source.is_file():
        if source.suffix != ".json":
            raise HeurlensError(f"{source}: draw takes a run folder or a circuit file in MIB's format (.json)")
        if model is None:
            raise HeurlensError(f"{source} is a MIB file, which names no model: give the one it scores with --model")
        loaded = heurlens.load_model(model, device=device, dtype=weights_dtype)
        mib = read_mib_file(source, loaded)
        scored = layout_of(loaded, mib.level)
        if not isinstance(scored, EdgeLayout):
            raise HeurlensError(not_edges)
        ranking = mib.ranking or uniform_ranking(scored, source.stem)
        keep = None if size is not None else mib.keep
        return circuit_to_draw(ranking, scored, top, size=size, keep=keep, label=source.stem), scored, source.stem
    if holds_scores(source):
        run = load_attribution(source)
        loaded = heurlens.load_model(model or run.model_id, device=device, dtype=weights_dtype)
        run.check_model(loaded)
        scored = layout_of(scored_model(loaded, run.level, run.graph), run.level)
        if not isinstance(scored, EdgeLayout):
            raise HeurlensError(not_edges)
        what = f"{run.ranking.label} of {run.model_id}"
        return circuit_to_draw(run.ranking, scored, top, size=size, label=what), scored, what
    paths = find_subnetworks(source)
    chosen = [path for path in paths if record is None or path.with_suffix("") == source / record]
    if not chosen:
        raise HeurlensError(f"{source} holds no record {record or '(sparsity-*/seed-*.json)'}; give --record as "
                            f"one of {', '.join(str(p.relative_to(source).with_suffix('')) for p in paths[:4])}"
                            if paths else f"{source} holds no prune records and no attribution scores")
    circuit = load_record(chosen[0])
    if not isinstance(circuit, EdgeCircuit):
        raise HeurlensError(not_edges)
    what = f"{circuit.label} of {circuit.model_id}"
    return record_to_draw(circuit, top, size=size, label=what), circuit.layout, what
