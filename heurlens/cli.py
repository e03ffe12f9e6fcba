"""The ``heurlens`` command line. Every command works on the embedded default model and data."""

from __future__ import annotations

import sys

import click

from heurlens.errors import HeurlensError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """heurlens: find, compare, ablate and transfer subnetworks of trained models."""
    import datasets
    import huggingface_hub
    import transformers

    # heurlens shows its own progress bars and errors; the libraries' per-file bars and retry
    # warnings are noise here (an unreachable hub ends in one heurlens error line).
    datasets.disable_progress_bars()
    transformers.utils.logging.disable_progress_bar()
    huggingface_hub.utils.logging.set_verbosity_error()


@cli.command()
@click.option("--heads", "heads", required=True,
              help="Units to ablate: L4.H0, L4.H0,L2.H5, L4.* (all heads of layer 4), L4.MLP.")
@click.option("--model", default="default", show_default=True,
              help="'default' (MiniLM fine-tuned on SNLI), a local model directory, or a hub name.")
@click.option("--data", default="snli", show_default=True,
              help="In-domain set: 'snli' (SNLI test) or a .jsonl/.csv/.tsv file with premise, hypothesis, label.")
@click.option("--method", type=click.Choice(["mean", "zero"]), default="mean", show_default=True)
@click.option("--in-domain-examples", type=int, default=2000, show_default=True,
              help="Random subset of the in-domain set (0 = all).")
@click.option("--per-subcase", type=int, default=200, show_default=True,
              help="HANS-style pairs per subcase (the paper used 1000).")
@click.option("--subcases", default=None,
              help="Comma-separated HANS subcases or abbreviations (SO-Swap,Prep,Embed-If,Embed-Verb); default all 30.")
@click.option("--reference-examples", type=int, default=2000, show_default=True,
              help="SNLI training pairs the unit means are taken over (mean ablation).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of data subsets and generation.")
@click.option("--json", "as_json", is_flag=True, help="Print the table as JSON records.")
@click.option("--csv", "as_csv", is_flag=True, help="Print the table as CSV.")
def ablate(heads, model, data, method, in_domain_examples, per_subcase, subcases, reference_examples, seed,
           as_json, as_csv) -> None:
    """Ablate heads/MLPs; print accuracy of full vs ablated model per evaluation set, and the KL."""
    import heurlens
    from heurlens.nli import nli_eval_sets, snli_reference_means

    if as_json and as_csv:
        raise HeurlensError("choose one of --json and --csv")
    hooked = heurlens.load_model(model)
    units = heurlens.parse_units(heads, hooked.n_layers, hooked.n_heads)
    eval_sets = nli_eval_sets(hooked, data, in_domain_examples or None, per_subcase,
                              subcases.split(",") if subcases else None, seed)
    means = snli_reference_means(hooked, reference_examples, seed) if method == "mean" else None
    table = heurlens.ablate(hooked, units, eval_sets, method, means)
    table.insert(0, "ablated", heurlens.format_units(units, hooked.n_heads))
    if as_json:
        click.echo(table.to_json(orient="records", indent=2))
    elif as_csv:
        click.echo(table.to_csv(index=False), nl=False)
    else:
        shown = table.drop(columns="ablated")
        for column in ("full_accuracy", "ablated_accuracy", "delta"):
            shown[column] = (100 * shown[column]).map("{:.1f}".format)
        shown["kl"] = shown["kl"].map("{:.4f}".format)
        click.echo(f"model {hooked.model_id}, {method}-ablated {table['ablated'][0]} (accuracy in %)")
        click.echo(shown.to_string(index=False))


@cli.command()
@click.option("--examples", type=int, default=8000, show_default=True, help="SNLI training pairs to fine-tune on.")
@click.option("--full", is_flag=True, help="Fine-tune on all ~100k SNLI training pairs instead.")
@click.option("--epochs", type=int, default=1, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--checkpoint-every", type=int, default=None, help="Also save a checkpoint every N steps.")
@click.option("--out", type=click.Path(), default=None, help="Directory to write (default: the cache).")
def finetune(examples, full, epochs, seed, checkpoint_every, out) -> None:
    """Fine-tune the default model (MiniLM + NLI head) on SNLI and print where it was written."""
    from pathlib import Path

    from heurlens.cache import cache_dir
    from heurlens.models.default import FinetuneSettings, finetune_nli

    settings = FinetuneSettings(train_examples=None if full else examples, epochs=epochs, seed=seed)
    target = Path(out) if out else cache_dir() / "models" / settings.slug()
    click.echo(finetune_nli(target, settings, checkpoint_every))


def main() -> None:
    """Entry point: user mistakes print one line on stderr and exit 2, never a traceback."""
    try:
        cli(standalone_mode=False)
    except HeurlensError as error:
        click.echo(f"heurlens: error: {error}", err=True)
        sys.exit(2)
    except click.exceptions.Abort:
        click.echo("heurlens: aborted", err=True)
        sys.exit(130)
    except click.ClickException as error:
        error.show()
        sys.exit(error.exit_code)
