"""The drawing command: a circuit's strongest edges as a file for a paper (``heurlens.circuits.circuit_files``)."""

from __future__ import annotations

from pathlib import Path

import click

from heurlens.cli.group import cli
from heurlens.cli.options import device_option, weights_dtype_option


@cli.command()
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--out", required=True, type=click.Path(dir_okay=False),
              help="The drawing: a .svg, .png or .pdf file (written atomically).")
@click.option("--top", type=click.IntRange(min=1), default=50, show_default=True,
              help="Edges drawn, the strongest: by |score| for attribution scores, by log_alpha for a mask run.")
@click.option("--record", default=None,
              help="Of a prune run: the record drawn, its path under RUN_DIR (e.g. sparsity-0.95/seed-00); default "
                   "the first.")
@click.option("--model", default=None, help="Model (attribution runs: default the one the run scored).")
@weights_dtype_option
@device_option
def draw(run_dir: str, out: str, top: int, record: str | None, model: str | None, weights_dtype: str | None,
         device: str | None) -> None:
    """Draw the --top strongest edges of RUN_DIR (an attribution run's scores, or an edge prune run's record) as a
    file for a paper: only the nodes they touch, a row per layer they use (key-value heads, query heads, the MLP in a
    column of its own), the embeddings at the bottom and the logits on top; width |score|, colour the sign, line
    the input entered (heurlens.circuits.circuit_files)."""
    import heurlens
    from heurlens.circuits.attribution_runs import holds_scores, load_attribution, scored_model
    from heurlens.circuits.circuit_files import circuit_drawing, strongest_edges, write_drawing
    from heurlens.errors import HeurlensError
    from heurlens.interventions.graph import EdgeLayout
    from heurlens.interventions.layouts import layout_of
    from heurlens.interventions.rankings import ranking_of
    from heurlens.pruning.circuit import EdgeCircuit
    from heurlens.pruning.records import load_record
    from heurlens.pruning.run_folder import find_subnetworks
    from heurlens.runtime.run_folders import check_writable_file

    check_writable_file(Path(out), "--out")
    if holds_scores(run_dir):
        run = load_attribution(run_dir)
        loaded = heurlens.load_model(model or run.model_id, device=device, dtype=weights_dtype)
        run.check_model(loaded)
        ranking, what = run.ranking, f"{run.ranking.label} of {run.model_id}"
        scored = layout_of(scored_model(loaded, run.level, run.graph), run.level)
        layout = scored if isinstance(scored, EdgeLayout) else None
    else:
        paths = find_subnetworks(Path(run_dir))
        chosen = [path for path in paths if record is None or path.with_suffix("") == Path(run_dir) / record]
        if not chosen:
            raise HeurlensError(f"{run_dir} holds no record {record or '(sparsity-*/seed-*.json)'}; give --record as "
                                f"one of {', '.join(str(p.relative_to(run_dir).with_suffix('')) for p in paths[:4])}"
                                if paths else f"{run_dir} holds no prune records and no attribution scores")
        circuit = load_record(chosen[0])
        ranking, what = ranking_of(circuit), f"{circuit.label} of {circuit.model_id}"
        layout = circuit.layout if isinstance(circuit, EdgeCircuit) else None
    if layout is None:
        raise HeurlensError(f"{run_dir} ranks heads and MLPs, not edges: heurlens report shows a node run's "
                            "subnetworks; draw takes edge runs (attribute or prune with --level edge)")
    drawn = strongest_edges(ranking, layout, min(top, ranking.n_items))
    title = f"{what}: the {len(drawn)} strongest of {ranking.n_items} edges"
    write_drawing(circuit_drawing(drawn, layout.n_heads, layout.n_kv_heads, title), Path(out))
    click.echo(f"drew {len(drawn)} edges of {what} into {out}")
