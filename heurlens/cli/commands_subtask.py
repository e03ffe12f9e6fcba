"""Subtask Induction commands: transfer and transfer-changes (arithmetic), shape-bias (vision)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from heurlens.cli.group import cli
from heurlens.cli.options import device_option, print_table, table_output_options, workers_options
from heurlens.cli.settings_options import settings_from_options, settings_options
from heurlens.subtask.settings import FIGURE3_CONDITIONS, TRANSFER_CONDITIONS, SweepSettings
from heurlens.vision.settings import ShapeBiasSettings

if TYPE_CHECKING:
    from heurlens.runtime.distributed import Workers


@cli.command()
@click.option("--out", type=click.Path(file_okay=False), default="runs/transfer", show_default=True,
              help="Run directory; finished parts found there are reused (resumable).")
@click.option("--preset", type=click.Choice(["small", "paper"]), default="small", show_default=True,
              help="Settings the options below start from: small (numbers 0..99, minutes on a CPU) or paper "
                   "(Section 4.2 and Appendix B.1 exactly: numbers 0..999, 16 sample counts 10..10^4, 5 seeds; "
                   "hours on a CPU). Each option given replaces that one setting.")
@click.option("--conditions", default=None,
              help=f"Comma-separated, from: {', '.join(TRANSFER_CONDITIONS)}. [default: {','.join(FIGURE3_CONDITIONS)}]")
@settings_options(SweepSettings, skip=("conditions",))
@device_option
@workers_options
@table_output_options
def transfer(out: str, preset: str, conditions: str | None, device: str | None, workers: Workers | None,
             as_json: bool, as_csv: bool, **given: Any) -> None:
    """Subtask Induction on modular arithmetic: train on T1, find the subtask's subnetwork, transfer it
    and train on T2 from ambiguous data plus disambiguation samples, next to the controls."""
    from heurlens.errors import HeurlensError
    from heurlens.subtask.sweep import figure3, run_sweep, summary_table

    if conditions is not None:
        chosen = tuple(c.strip() for c in conditions.split(",") if c.strip())
        unknown = [c for c in chosen if c not in TRANSFER_CONDITIONS]
        if unknown or not chosen:
            raise HeurlensError(f"unknown condition(s) {', '.join(unknown) or '(none given)'}; "
                                f"choose from {', '.join(TRANSFER_CONDITIONS)}")
        given["conditions"] = chosen
    settings = settings_from_options(SweepSettings.paper() if preset == "paper" else SweepSettings(), given)
    results = run_sweep(Path(out), settings, workers=workers, device=device)
    figure3(results).write_html(Path(out) / "figure3.html")

    def pretty(results):
        table = (100 * summary_table(results)).round(1)
        return (f"test accuracy (%) on T2 = {settings.t2} by disambiguation samples ({settings.seeds} seed(s), "
                f"{settings.filling} filling)\n" + table.to_string())

    print_table(results, as_json, as_csv, pretty)


@cli.command("transfer-changes")
@click.option("--from", "source", type=click.Path(file_okay=False), required=True,
              help="A sweep folder of heurlens transfer --architecture released (its T1 model and subnetwork).")
@click.option("--out", type=click.Path(file_okay=False), default="runs/one-change", show_default=True,
              help="Run directory; finished runs found there are reused (resumable).")
@click.option("--seeds", type=click.IntRange(min=1), default=3, show_default=True, help="Runs per row and condition.")
@click.option("--disambiguation", type=click.IntRange(min=0), default=1000, show_default=True,
              help="Disambiguation samples of every run.")
@click.option("--rows", default=None, help="Comma-separated row numbers to train (0 = as the sweep). [default: all]")
@click.option("--page", type=click.Path(dir_okay=False), default=None,
              help="Also write the table as markdown to this results page: a page heurlens wrote (what follows its "
                   "'<!-- Written by hand from here on' line is kept); any other existing file is refused.")
@device_option
@table_output_options
def transfer_changes(source: str, out: str, seeds: int, disambiguation: int, rows: str | None, page: str | None,
                     device: str | None, as_json: bool, as_csv: bool) -> None:
    """Subtask Induction's transfer one change at a time (dropout, tied embeddings, batch size, weight decay) on a
    sweep's T1 model and subnetwork, every condition at one sample count; the first row is the sweep's own."""
    from heurlens.errors import HeurlensError
    from heurlens.runtime.results_page import check_results_page
    from heurlens.subtask.one_change import one_change_folder, run_one_change

    try:
        chosen = None if rows is None else [int(row) for row in rows.split(",") if row.strip()]
    except ValueError as error:
        raise HeurlensError(f"--rows {rows}: give row numbers such as 0,3") from error
    if page is not None:
        check_results_page(Path(page))  # before hours of training, not after
    table = run_one_change(source, out, seeds=seeds, disambiguation=disambiguation, rows=chosen, device=device)
    if page is not None:
        one_change_folder(out).write_results_page(Path(page), table.to_markdown(index=False) + "\n")
    print_table(table, as_json, as_csv, lambda t: t.to_markdown(index=False))


@cli.command("shape-bias")
@click.option("--out", type=click.Path(file_okay=False), default="runs/shape-bias", show_default=True,
              help="Run directory; finished parts found there are reused (resumable).")
@settings_options(ShapeBiasSettings)
@device_option
@workers_options
@table_output_options
def shape_bias(out: str, device: str | None, workers: Workers | None, as_json: bool, as_csv: bool,
               **given: Any) -> None:
    """Subtask Induction for shape bias on textured Fashion-MNIST (Subtask Induction paper, Tables 1-2, offline):
    find a subnetwork for mean-pooled garments in a base model, transfer it, and compare with
    training from scratch, a random subnetwork, data mixture and a linear probe."""
    import pandas as pd

    from heurlens.vision import check_vision_installed

    check_vision_installed()
    from heurlens.vision.shape_bias import ShapeBiasRun, summary

    settings = settings_from_options(ShapeBiasSettings(), given)
    table1, table2 = ShapeBiasRun(settings, Path(out), device=device).run(workers=workers)
    both = pd.concat([table2.rename(columns={"model": "condition"}).assign(table="2"), table1.assign(table="1")])

    def pretty(_):
        return ("Table 2: mean-pooled garments, base model vs its shape subnetwork\n"
                + table2.round(3).to_string(index=False)
                + f"\n\nTable 1: after training on the downstream set (texture agrees with the class), "
                f"% mean ± std over {settings.downstream_seeds} seed(s)\n" + summary(table1).to_string(index=False))

    print_table(both, as_json, as_csv, pretty)
