"""The ``heurlens`` command line. Every command works on the embedded default model and data."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from heurlens.errors import HeurlensError

FOCUS = "SO-Swap,Prep,Embed-If,Embed-Verb"
MULTI_VALUE_OPTIONS = {"--sparsity"}  # options that take several values: --sparsity 0.5 0.7


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


def model_option(function):
    return click.option("--model", default="default", show_default=True,
                        help="'default' (MiniLM fine-tuned on SNLI), a local model directory, or a hub name.")(function)


def eval_options(default_subcases: str | None):
    """Options choosing the evaluation sets: the in-domain set and HANS-style subcases."""
    def decorate(function):
        options = [
            click.option("--data", default="snli", show_default=True,
                         help="In-domain set: 'snli' (SNLI test) or a .jsonl/.csv/.tsv with premise, hypothesis, label."),
            click.option("--in-domain-examples", type=int, default=2000, show_default=True,
                         help="Random subset of the in-domain set (0 = all)."),
            click.option("--per-subcase", type=int, default=200, show_default=True,
                         help="HANS-style pairs per subcase (the paper used 1000)."),
            click.option("--subcases", default=default_subcases, show_default=default_subcases is not None,
                         help="Comma-separated HANS subcases or abbreviations (SO-Swap,Prep,Embed-If,Embed-Verb)"
                              + ("; default all 30." if default_subcases is None else ".")),
            click.option("--seed", type=int, default=0, show_default=True, help="Seed of data subsets and generation."),
            click.option("--json", "as_json", is_flag=True, help="Print the table as JSON records."),
            click.option("--csv", "as_csv", is_flag=True, help="Print the table as CSV."),
        ]
        for option in reversed(options):
            function = option(function)
        return function
    return decorate


def _eval_sets(hooked, data, in_domain_examples, per_subcase, subcases, seed):
    from heurlens.nli import nli_eval_sets

    return nli_eval_sets(hooked, data, in_domain_examples or None, per_subcase,
                         subcases.split(",") if subcases else None, seed)


def _print_table(table, as_json: bool, as_csv: bool, pretty) -> None:
    if as_json and as_csv:
        raise HeurlensError("choose one of --json and --csv")
    if as_json:
        click.echo(table.to_json(orient="records", indent=2))
    elif as_csv:
        click.echo(table.to_csv(index=False), nl=False)
    else:
        click.echo(pretty(table))


@cli.command()
@click.option("--heads", "heads", required=True,
              help="Units to ablate: L4.H0, L4.H0,L2.H5, L4.* (all heads of layer 4), L4.MLP.")
@model_option
@click.option("--method", type=click.Choice(["mean", "zero"]), default="mean", show_default=True)
@click.option("--reference-examples", type=int, default=2000, show_default=True,
              help="SNLI training pairs the unit means are taken over (mean ablation).")
@eval_options(default_subcases=None)
def ablate(heads, model, method, reference_examples, data, in_domain_examples, per_subcase, subcases, seed,
           as_json, as_csv) -> None:
    """Ablate heads/MLPs; print accuracy of full vs ablated model per evaluation set, and the KL."""
    import heurlens
    from heurlens.nli import snli_reference_means

    hooked = heurlens.load_model(model)
    units = heurlens.parse_units(heads, hooked.n_layers, hooked.n_heads)
    eval_sets = _eval_sets(hooked, data, in_domain_examples, per_subcase, subcases, seed)
    means = snli_reference_means(hooked, reference_examples, seed) if method == "mean" else None
    table = heurlens.ablate(hooked, units, eval_sets, method, means)
    table.insert(0, "ablated", heurlens.format_units(units, hooked.n_heads))

    def pretty(table):
        shown = table.drop(columns="ablated")
        for column in ("full_accuracy", "ablated_accuracy", "delta"):
            shown[column] = (100 * shown[column]).map("{:.1f}".format)
        shown["kl"] = shown["kl"].map("{:.4f}".format)
        return (f"model {hooked.model_id}, {method}-ablated {table['ablated'][0]} (accuracy in %)\n"
                + shown.to_string(index=False))

    _print_table(table, as_json, as_csv, pretty)


@cli.command()
@click.option("--sparsity", type=float, multiple=True, default=[0.5], show_default=True,
              help="Target sparsities (fraction of heads and MLPs pruned); several: --sparsity 0.5 0.7.")
@click.option("--seeds", type=int, default=3, show_default=True, help="Seeds 0..N-1 per sparsity.")
@click.option("--out", type=click.Path(file_okay=False), default="runs/prune", show_default=True,
              help="Run directory; finished subnetworks there are kept and skipped (resume).")
@model_option
@click.option("--train-examples", type=int, default=2000, show_default=True,
              help="SNLI training pairs to prune on (the unit means are taken over them too).")
@click.option("--batch-size", type=int, default=16, show_default=True)
@click.option("--steps", type=int, default=None, help="Total steps (default: Appendix B's epochs for the data size).")
@click.option("--warmup-steps", type=int, default=None, help="Sparsity warm-up steps (default: Appendix B's fraction).")
@click.option("--lr-log-alpha", type=float, default=0.1, show_default=True)
@click.option("--lr-lambda", type=float, default=1.0, show_default=True)
@eval_options(default_subcases=FOCUS)
def prune(sparsity, seeds, out, model, train_examples, batch_size, steps, warmup_steps, lr_log_alpha, lr_lambda,
          data, in_domain_examples, per_subcase, subcases, seed, as_json, as_csv) -> None:
    """Prune heads and MLPs with hard-concrete masks, for several seeds; print the evaluation table."""
    import heurlens
    from heurlens.evaluate import tokenize_pairs
    from heurlens.nli import snli_reference_means
    from heurlens.pruning import PruneConfig
    from heurlens.pruning import prune as prune_model

    if seeds < 1:
        raise HeurlensError("--seeds must be at least 1")
    hooked = heurlens.load_model(model)
    config = PruneConfig(lr_log_alpha=lr_log_alpha, lr_lambda=lr_lambda, total_steps=steps, warmup_steps=warmup_steps)
    train = tokenize_pairs("snli-train", heurlens.load_snli("train", limit=train_examples, seed=0),
                           hooked.tokenizer, batch_size)
    means = snli_reference_means(hooked, train_examples, 0, batch_size)
    subnetworks = prune_model(hooked, train, sorted(set(sparsity)), range(seeds), Path(out), config, means)
    _report(hooked, subnetworks, means, data, in_domain_examples, per_subcase, subcases, seed, as_json, as_csv)


@cli.command()
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--model", default=None, help="Model to evaluate on (default: the one the subnetworks were pruned from).")
@eval_options(default_subcases=FOCUS)
def evaluate(run_dir, model, data, in_domain_examples, per_subcase, subcases, seed, as_json, as_csv) -> None:
    """Evaluate the subnetworks of a run directory next to the full model."""
    import heurlens
    from heurlens.means import UnitMeans
    from heurlens.pruning import Subnetwork
    from heurlens.pruning.runs import MEANS_FILE, find_subnetworks

    paths = find_subnetworks(Path(run_dir))
    if not paths:
        raise HeurlensError(f"{run_dir} holds no subnetworks (sparsity-*/seed-*.json); run heurlens prune --out {run_dir}")
    subnetworks = [Subnetwork.load(p) for p in paths]
    hooked = heurlens.load_model(model or subnetworks[0].model_id)
    means_path = Path(run_dir) / MEANS_FILE
    if not means_path.exists():
        raise HeurlensError(f"{means_path} is missing; it is written by heurlens prune --out {run_dir}")
    means = UnitMeans.load(means_path)
    _report(hooked, subnetworks, means, data, in_domain_examples, per_subcase, subcases, seed, as_json, as_csv)


def _report(hooked, subnetworks, means, data, in_domain_examples, per_subcase, subcases, seed, as_json, as_csv):
    from heurlens.pruning import accuracy_table, evaluate_subnetworks

    eval_sets = _eval_sets(hooked, data, in_domain_examples, per_subcase, subcases, seed)
    evaluation = evaluate_subnetworks(hooked, subnetworks, eval_sets, means)

    def pretty(evaluation):
        wide = accuracy_table(evaluation)
        wide["achieved_sparsity"] = wide["achieved_sparsity"].map("{:.2f}".format)
        return f"accuracy (%) of model {hooked.model_id} and its subnetworks\n" + wide.to_string(index=False)

    _print_table(evaluation, as_json, as_csv, pretty)


@cli.command()
@click.option("--examples", type=int, default=8000, show_default=True, help="SNLI training pairs to fine-tune on.")
@click.option("--full", is_flag=True, help="Fine-tune on all ~100k SNLI training pairs instead.")
@click.option("--epochs", type=int, default=1, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--checkpoint-every", type=int, default=None, help="Also save a checkpoint every N steps.")
@click.option("--out", type=click.Path(), default=None, help="Directory to write (default: the cache).")
def finetune(examples, full, epochs, seed, checkpoint_every, out) -> None:
    """Fine-tune the default model (MiniLM + NLI head) on SNLI and print where it was written."""
    from heurlens.cache import cache_dir
    from heurlens.models.default import FinetuneSettings, finetune_nli

    settings = FinetuneSettings(train_examples=None if full else examples, epochs=epochs, seed=seed)
    target = Path(out) if out else cache_dir() / "models" / settings.slug()
    click.echo(finetune_nli(target, settings, checkpoint_every))


def expand_multi_value_options(argv: list[str]) -> list[str]:
    """Rewrite ``--sparsity 0.5 0.7`` as ``--sparsity 0.5 --sparsity 0.7`` (click takes one value per use)."""
    expanded: list[str] = []
    current = None
    for token in argv:
        if token.startswith("-"):
            current = token if token in MULTI_VALUE_OPTIONS else None
            expanded.append(token)
        elif current is not None and expanded[-1] != current:
            expanded += [current, token]
        else:
            expanded.append(token)
    return expanded


def main(argv: list[str] | None = None) -> None:
    """Entry point: user mistakes print one line on stderr and exit 2, never a traceback."""
    try:
        cli(expand_multi_value_options(sys.argv[1:] if argv is None else argv), standalone_mode=False)
    except HeurlensError as error:
        click.echo(f"heurlens: error: {error}", err=True)
        sys.exit(2)
    except click.exceptions.Abort:
        click.echo("heurlens: aborted", err=True)
        sys.exit(130)
    except click.ClickException as error:
        error.show()
        sys.exit(error.exit_code)
