"""Subtask Induction commands of seed 002: transfer (arithmetic) and shape-bias (vision)."""

from __future__ import annotations

from pathlib import Path

import click

from heurlens.cli.group import cli
from heurlens.cli.options import print_table, table_output_options
from heurlens.subtask.sweep import FIGURE3_CONDITIONS, SweepSettings
from heurlens.subtask.transfer import CONDITIONS
from heurlens.vision.models import SMALL_ARCHITECTURES
from heurlens.vision.shape_bias import ShapeBiasSettings

DEFAULTS = SweepSettings()
SHAPE_DEFAULTS = ShapeBiasSettings()


@cli.command()
@click.option("--out", type=click.Path(file_okay=False), default="runs/transfer", show_default=True,
              help="Run directory; finished parts found there are reused (resumable).")
@click.option("--t1", default=DEFAULTS.t1, show_default=True, help="Computation the source model learns.")
@click.option("--subtask", default=DEFAULTS.subtask, show_default=True, help="Subtask whose subnetwork is transferred.")
@click.option("--t2", default=DEFAULTS.t2, show_default=True, help="Computation the new model is trained on.")
@click.option("--max-value", type=click.IntRange(min=2), default=DEFAULTS.max_value, show_default=True,
              help="Numbers 0..N-1, one token each (the paper: 1000).")
@click.option("--modulus", type=click.IntRange(min=2), default=DEFAULTS.modulus, show_default=True)
@click.option("--layers", "n_layers", type=click.IntRange(min=1), default=DEFAULTS.n_layers, show_default=True,
              help="Decoder layers (the paper: 2 to 12).")
@click.option("--disambiguation", type=click.IntRange(min=0), multiple=True, default=DEFAULTS.disambiguation, show_default=True,
              help="Numbers of disambiguation samples: --disambiguation 0 30 100.")
@click.option("--conditions", default=",".join(FIGURE3_CONDITIONS), show_default=True,
              help=f"Comma-separated, from: {', '.join(CONDITIONS)}.")
@click.option("--seeds", type=click.IntRange(min=1), default=DEFAULTS.seeds, show_default=True)
@click.option("--t1-epochs", type=click.IntRange(min=1), default=DEFAULTS.t1_epochs, show_default=True)
@click.option("--discovery-epochs", type=click.IntRange(min=1), default=DEFAULTS.discovery_epochs, show_default=True)
@click.option("--l0-lambda", type=click.FloatRange(min=0), default=DEFAULTS.l0_lambda, show_default=True)
@click.option("--transfer-epochs", type=click.IntRange(min=1), default=DEFAULTS.transfer_epochs, show_default=True,
              help="Epochs on T2 (the paper: 100).")
@click.option("--full-size", is_flag=True, help="The paper's sizes: numbers 0..999, 16 sample counts 10..10^4, "
                                                "100 transfer and 50 discovery epochs (hours on a CPU).")
@click.option("--json", "as_json", is_flag=True, help="Print every run as JSON records.")
@click.option("--csv", "as_csv", is_flag=True, help="Print every run as CSV.")
def transfer(out, t1, subtask, t2, max_value, modulus, n_layers, disambiguation, conditions, seeds, t1_epochs,
             discovery_epochs, l0_lambda, transfer_epochs, full_size, as_json, as_csv) -> None:
    """Subtask Induction on modular arithmetic: train on T1, find the subtask's subnetwork, transfer it
    and train on T2 from ambiguous data plus disambiguation samples, next to the controls."""
    from heurlens.errors import HeurlensError
    from heurlens.subtask.sweep import figure3, run_sweep, summary_table

    chosen = tuple(c.strip() for c in conditions.split(",") if c.strip())
    unknown = [c for c in chosen if c not in CONDITIONS]
    if unknown or not chosen:
        raise HeurlensError(f"unknown condition(s) {', '.join(unknown) or '(none given)'}; choose from {', '.join(CONDITIONS)}")
    settings = SweepSettings(t1=t1, subtask=subtask, t2=t2, max_value=max_value, modulus=modulus, n_layers=n_layers,
                             disambiguation=tuple(disambiguation), conditions=chosen, seeds=seeds,
                             t1_epochs=t1_epochs, discovery_epochs=discovery_epochs, l0_lambda=l0_lambda,
                             transfer_epochs=transfer_epochs)
    if full_size:
        counts = tuple(sorted({round(10 ** (1 + 3 * i / 15)) for i in range(16)}))
        settings = SweepSettings(**{**settings.__dict__, "max_value": 1000, "disambiguation": counts,
                                    "transfer_epochs": 100, "discovery_epochs": 50, "t1_fraction": 0.2,
                                    "subtask_fraction": 0.05})
    results = run_sweep(Path(out), settings)
    figure3(results).write_html(Path(out) / "figure3.html")

    def pretty(results):
        table = (100 * summary_table(results)).round(1)
        return f"test accuracy (%) on T2 = {settings.t2} by disambiguation samples ({seeds} seed(s))\n" + table.to_string()

    print_table(results, as_json, as_csv, pretty)


@cli.command("shape-bias")
@click.option("--out", type=click.Path(file_okay=False), default="runs/shape-bias", show_default=True,
              help="Run directory; finished parts found there are reused (resumable).")
@click.option("--arch", type=click.Choice(sorted(SMALL_ARCHITECTURES)), default=SHAPE_DEFAULTS.arch,
              show_default=True, help="The small timm model trained on 28x28 garments.")
@click.option("--seed", type=click.IntRange(min=0), default=SHAPE_DEFAULTS.seed, show_default=True)
@click.option("--pretrain-epochs", type=click.IntRange(min=1), default=SHAPE_DEFAULTS.pretrain_epochs, show_default=True)
@click.option("--discovery-epochs", type=click.IntRange(min=1), default=SHAPE_DEFAULTS.discovery_epochs, show_default=True)
@click.option("--l0-lambda", type=click.FloatRange(min=0), default=SHAPE_DEFAULTS.l0_lambda, show_default=True)
@click.option("--downstream-size", type=click.IntRange(min=1), default=SHAPE_DEFAULTS.downstream_size, show_default=True,
              help="Training garments of the downstream task (texture always agrees with the class).")
@click.option("--downstream-epochs", type=click.IntRange(min=1), default=SHAPE_DEFAULTS.downstream_epochs, show_default=True)
@table_output_options
def shape_bias(out, arch, seed, pretrain_epochs, discovery_epochs, l0_lambda, downstream_size, downstream_epochs,
               as_json, as_csv) -> None:
    """Subtask Induction for shape bias on textured Fashion-MNIST (seed 002, Tables 1-2, offline):
    find a subnetwork for mean-pooled garments in a base model, transfer it, and compare with
    training from scratch, a random subnetwork, data mixture and a linear probe."""
    import pandas as pd

    from heurlens.vision.shape_bias import ShapeBiasRun, summary

    settings = ShapeBiasSettings(arch=arch, seed=seed, pretrain_epochs=pretrain_epochs,
                                 discovery_epochs=discovery_epochs, l0_lambda=l0_lambda,
                                 downstream_size=downstream_size, downstream_epochs=downstream_epochs)
    table1, table2 = ShapeBiasRun(settings, Path(out)).run()
    both = pd.concat([table2.rename(columns={"model": "condition"}).assign(table="2"), table1.assign(table="1")])

    def pretty(_):
        return ("Table 2: mean-pooled garments, base model vs its shape subnetwork\n"
                + table2.round(3).to_string(index=False)
                + f"\n\nTable 1: after training on the downstream set (texture agrees with the class), "
                f"% mean ± std over {settings.downstream_seeds} seed(s)\n" + summary(table1).to_string(index=False))

    print_table(both, as_json, as_csv, pretty)
