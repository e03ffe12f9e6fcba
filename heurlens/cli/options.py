"""Options and output helpers shared by the commands."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import sys
from typing import TextIO

import click

from heurlens.cli.settings_options import FiniteFloatRange
from heurlens.errors import HeurlensError
from heurlens.runtime.precision import PRECISIONS

FOCUS = "SO-Swap,Prep,Embed-If,Embed-Verb"


def model_option(function):
    function = weights_dtype_option(device_option(function))
    return click.option("--model", default="default", show_default=True,
                        help="'default' (MiniLM fine-tuned on SNLI), a local model directory, or a hub name.")(function)


def _checked_device(context, parameter, value: str | None) -> str | None:
    """--device checked before anything loads (an unknown device, or CUDA on a machine without it)."""
    if value is not None:
        from heurlens.runtime.devices import resolve_device

        resolve_device(value)
    return value


def device_option(function):
    """--device: where the model runs (``heurlens.runtime.devices.resolve_device``)."""
    return click.option("--device", default=None, callback=_checked_device, is_eager=True,
                        help="Where the model runs: cpu, cuda, cuda:1, mps. Default: $HEURLENS_DEVICE, else cuda "
                             "when torch sees a GPU (TransformerLens' choice), else cpu.")(function)


def weights_dtype_option(function):
    """--weights-dtype: the precision the model's weights are loaded in (``load_model(dtype=)``)."""
    return click.option("--weights-dtype", type=click.Choice(PRECISIONS), default=None,
                        help="Load the model's weights in this precision (as TransformerLens' boot_transformers "
                             "dtype=; a 1B model takes half the memory in bfloat16). Default: as saved (float32 "
                             "for the default model). Means, KL and stored logits stay float32.")(function)


def dtype_option(function):
    """--dtype float32|bfloat16|float16 (the matrix products' precision, ``heurlens.runtime.precision``) and --bf16, its
    shorthand for bfloat16, passed on as one ``dtype`` argument; --bf16 with another --dtype is refused."""
    @functools.wraps(function)
    def with_dtype(*args, dtype: str | None, bf16: bool, **kwargs):
        if bf16 and dtype not in (None, "bfloat16"):
            raise HeurlensError(f"--bf16 means --dtype bfloat16; it cannot go with --dtype {dtype}: give one of them")
        return function(*args, dtype="bfloat16" if bf16 else dtype or "float32", **kwargs)

    with_dtype = click.option(
        "--bf16", is_flag=True, help="Shorthand for --dtype bfloat16.")(with_dtype)
    return click.option(
        "--dtype", type=click.Choice(PRECISIONS), default=None,
        help="Precision of the matrix products (torch.autocast; masks, KL and stored logits stay float32): "
             "bfloat16 is about 2x faster on a CPU with AVX-512 BF16 and the predicted label of about 0.2% of "
             "pairs changes (docs/cli.md); on a GPU bfloat16 or float16. Default: float32.")(with_dtype)


def replacement_label(means) -> str:
    """What ablated units are replaced by, in a table's header (no means: corrupt ablation)."""
    if means is None:
        return "their activations on each example's corrupted prompt"
    return "zero" if means.source == "zeros" else f"the unit means over {means.source}"


def model_label(model, dtype: str) -> str:
    """A model's name in a table's header, with the weights' precision and the products' (``dtype``) when they
    are not float32: ``default``, ``default (bfloat16)``, ``smollm2 (bfloat16 weights)``."""
    from heurlens.runtime.devices import weights_dtype_of
    from heurlens.runtime.precision import precision_name

    weights = precision_name(weights_dtype_of(model))
    notes = ([] if weights == "float32" else [f"{weights} weights"]) + ([] if dtype == "float32" else [dtype])
    return f"{model.model_id} ({', '.join(notes)})" if notes else model.model_id


def workers_options(function):
    """--workers N / --ray-address A: the command's independent runs as Ray tasks (``heurlens.runtime.distributed``),
    passed on as one ``workers`` argument (None without --workers: everything in this process, no Ray)."""
    @functools.wraps(function)
    def with_workers(*args, workers: int | None, ray_address: str | None, gpus_per_worker: float | None, **kwargs):
        from heurlens.runtime.distributed import workers_from_options

        return function(*args, workers=workers_from_options(workers, ray_address, gpus_per_worker,
                                                            kwargs.get("device")), **kwargs)

    with_workers = click.option(
        "--gpus-per-worker", type=FiniteFloatRange(min=0), default=None,
        help="GPUs each Ray task asks for (fractions share one GPU). Default: 1 when --device is cuda (a GPU "
             "machine's default), else 0.")(with_workers)
    with_workers = click.option(
        "--ray-address", default=None,
        help="Run on the Ray cluster at this address ('auto': the cluster this machine is a node of, or the head's "
             "HOST:6379; Ray also reads RAY_ADDRESS); checked before anything runs; "
             "the run directory must be on a file system every node sees.")(with_workers)
    return click.option(
        "--workers", type=click.IntRange(min=1), default=None,
        help="Run up to N of the independent runs at once as Ray tasks (Ray started on this machine unless "
             "--ray-address or RAY_ADDRESS names a cluster), each with cores/N threads. Default: one after "
             "another in this process.")(with_workers)


# Where ``print_table`` writes: the command's stdout, kept while a --json / --csv command runs with stdout on stderr
_TABLE_STREAM: contextvars.ContextVar[TextIO | None] = contextvars.ContextVar("table_stream", default=None)


def table_output_options(function):
    """--json / --csv: print the command's table machine-readably (see ``print_table``); both together are
    refused before the command does any work. Meanwhile everything else printed on stdout (by heurlens, a library,
    or Ray's driver threads, which print a dead worker's news there at any time) goes to stderr, so that stdout
    carries the table alone for the program reading it."""
    @functools.wraps(function)
    def checked(*args, as_json: bool, as_csv: bool, **kwargs):
        if as_json and as_csv:
            raise HeurlensError("choose one of --json and --csv")
        if not (as_json or as_csv):
            return function(*args, as_json=as_json, as_csv=as_csv, **kwargs)
        token = _TABLE_STREAM.set(sys.stdout)
        try:
            with contextlib.redirect_stdout(sys.stderr):
                return function(*args, as_json=as_json, as_csv=as_csv, **kwargs)
        finally:
            _TABLE_STREAM.reset(token)

    checked = click.option("--csv", "as_csv", is_flag=True, help="Print the table as CSV.")(checked)
    return click.option("--json", "as_json", is_flag=True, help="Print the table as JSON records.")(checked)


def eval_options(default_subcases: str | None, table_output: bool = True):
    """Options choosing the evaluation sets: the in-domain set and HANS-style subcases (and, with
    ``table_output``, --json / --csv)."""
    def decorate(function):
        if table_output:
            function = table_output_options(function)
        options = [
            click.option("--data", default="snli", show_default=True,
                         help="In-domain set: 'snli' (SNLI test) or a .jsonl/.csv/.tsv with premise, hypothesis, label."),
            click.option("--in-domain-examples", type=click.IntRange(min=0), default=2000, show_default=True,
                         help="Random subset of the in-domain set (0 = all)."),
            click.option("--per-subcase", type=click.IntRange(min=1), default=200, show_default=True,
                         help="HANS-style pairs per subcase (the paper used 1000)."),
            click.option("--subcases", default=default_subcases, show_default=default_subcases is not None,
                         help="Comma-separated HANS subcases or abbreviations (SO-Swap,Prep,Embed-If,Embed-Verb)"
                              + ("; default all 30." if default_subcases is None else ".")),
            click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
                         help="Seed of data subsets and generation."),
        ]
        for option in reversed(options):
            function = option(function)
        return function
    return decorate


def nli_data(data: str = "snli", in_domain_examples: int = 2000, per_subcase: int = 200, subcases: str | None = None,
             seed: int = 0, **choices):
    """The library's ``NliData`` for the evaluation options (``--in-domain-examples 0``: all pairs)."""
    from heurlens.data.run_data import NliData

    return NliData(in_domain=data, in_domain_examples=in_domain_examples or None, per_subcase=per_subcase,
                   subcases=tuple(subcases.split(",")) if subcases else None, seed=seed, **choices)


def print_table(table, as_json: bool, as_csv: bool, pretty) -> None:
    """A command's table on its stdout: JSON records, CSV, or ``pretty(table)`` for a reader."""
    if as_json:
        click.echo(table.to_json(orient="records", indent=2), file=_TABLE_STREAM.get())
    elif as_csv:
        click.echo(table.to_csv(index=False), nl=False, file=_TABLE_STREAM.get())
    else:
        click.echo(pretty(table))


def pruning_settings_options(function):
    """``--recipe`` and one option per ``PruneSettings`` field: the pruning options of prune and effective-size."""
    from heurlens.cli.settings_options import settings_options
    from heurlens.pruning.settings import PruneSettings

    function = settings_options(PruneSettings)(function)
    return click.option("--recipe", type=click.Choice(["heurlens", "released"]), default="heurlens", show_default=True,
                        help="Settings the pruning options below start from: heurlens' defaults, or the released "
                             "code's recipe (docs/pruning.md); each option given replaces that one setting.")(function)


def pruning_settings(recipe: str, given: dict):
    """The ``PruneSettings`` of ``--recipe`` with the pruning options the user gave put in."""
    from heurlens.cli.settings_options import settings_from_options
    from heurlens.pruning.settings import PruneSettings

    return settings_from_options(PruneSettings.released() if recipe == "released" else PruneSettings(), given)


def task_options(function):
    """--task / --task-examples: a prompt task for decoder LMs instead of the NLI evaluation sets."""
    function = click.option("--task-examples", type=click.IntRange(min=1), default=200, show_default=True,
                            help="Prompts of --task to evaluate on (drawn with --seed + 1; the unit means, and for "
                                 "prune the training prompts, are as many drawn with --seed).")(function)
    return click.option("--task", default=None,
                        help="A prompt task for decoder LMs instead of the NLI sets: 'ioi' (indirect-object "
                             "identification, Wang et al. 2022), 'greater-than' (Hanna et al. 2023), 'induction' "
                             "(repeated random words) or a .jsonl/.csv file (prompt, answer, distractors, "
                             "other_answers). Accuracy: the best correct answer's logit above every distractor's; KL "
                             "at the answer position.")(function)


def run_data(task: str | None, task_examples: int, data: str = "snli", in_domain_examples: int = 2000,
             per_subcase: int = 200, subcases: str | None = None, seed: int = 0, batch_size: int | None = None,
             **nli_choices):
    """The library's ``PromptTaskData`` for ``--task`` (its seed convention: ``seed`` for training prompts and
    means, ``seed + 1`` for evaluation), else its ``NliData`` for the evaluation options."""
    from heurlens.data.run_data import PromptTaskData

    if task:
        return PromptTaskData(task, task_examples, seed, batch_size or 32)
    return nli_data(data, in_domain_examples, per_subcase, subcases, seed,
                    **nli_choices, **({"batch_size": batch_size} if batch_size else {}))
