"""``heurlens cache list`` and ``heurlens cache clear``: what heurlens keeps on disk, and removing it."""

from __future__ import annotations

import time
from pathlib import Path

import click

from heurlens.cli.group import cli
from heurlens.cli.options import print_table, table_output_options
from heurlens.cli.settings_options import FiniteFloatRange
from heurlens.errors import HeurlensError


@cli.group()
def cache() -> None:
    """List or clear heurlens' cache folder ($HEURLENS_CACHE, else ~/.cache/heurlens). Computed entries
    (activations, means, tokenised evaluation sets) are kept under a size cap, $HEURLENS_CACHE_LIMIT_GB (default
    4), least recently used evicted first; models, downloads and datasets are never evicted."""


@cache.command(name="list")
@table_output_options
def list_entries(as_json: bool, as_csv: bool) -> None:
    """Every entry: kind, model, what it holds, size, last use; then the total per kind and the cap."""
    import pandas as pd

    from heurlens.runtime.cache import cache_dir
    from heurlens.runtime.cache_contents import cache_limit, entries, foreign

    root = cache_dir()
    rows = [{"kind": e.kind, "model": e.model, "what": _what(root / e.kind / e.name, e.name),
             "size_mb": round(e.size / 2**20, 2), "last_use": time.strftime("%Y-%m-%d %H:%M", time.localtime(e.last_use)),
             "evictable": e.evictable} for e in entries(root)]
    rows += [{"kind": "foreign", "model": "", "what": f"{path.relative_to(root)} (not heurlens': never removed)",
              "size_mb": None, "last_use": "", "evictable": False} for path in foreign(root)]
    table = pd.DataFrame(rows, columns=["kind", "model", "what", "size_mb", "last_use", "evictable"])

    def pretty(table: pd.DataFrame) -> str:
        if table.empty:
            return f"{root}: empty"
        ours = table[table["kind"] != "foreign"]
        totals = ours.groupby("kind", sort=False)["size_mb"].sum()
        computed = ours.loc[ours["evictable"], "size_mb"].sum()
        strangers = len(table) - len(ours)
        return (table.drop(columns="evictable").to_markdown(index=False) + f"\n\n{root}: "
                + ", ".join(f"{kind} {size:,.1f} MB" for kind, size in totals.items())
                + f"; computed entries {computed:,.1f} MB of a {cache_limit() / 2**30:g} GiB cap"
                + (f"; {strangers} item(s) heurlens did not write, left alone" if strangers else ""))

    print_table(table, as_json, as_csv, pretty)


@cache.command()
@click.option("--kind", "kinds", multiple=True,
              help="Only this kind (activations, means, models...); repeatable. Default: the computed kinds "
                   "(activations, means, eval_sets, mean-pooled images); models and downloads only when named, or "
                   "with --all.")
@click.option("--model", "models", multiple=True,
              help="Only entries of this model: a fingerprint (or its start) as `cache list` shows; repeatable.")
@click.option("--unused-days", type=FiniteFloatRange(min=0), default=None,
              help="Only entries not used for this many days.")
@click.option("--all", "everything", is_flag=True, help="Everything in the cache (models and downloads too); alone.")
def clear(kinds: tuple[str, ...], models: tuple[str, ...], unused_days: float | None, everything: bool) -> None:
    """Remove cache entries: the computed ones matching every option given (models and downloads too when --kind
    names them), or everything with --all. Each is rebuilt when next needed."""
    from heurlens.runtime.cache import cache_dir
    from heurlens.runtime.cache_contents import COMPUTED_KINDS, HEURLENS_KINDS, kind_folders
    from heurlens.runtime.cache_contents import clear as clear_entries

    if not (kinds or models or unused_days is not None or everything):
        raise HeurlensError("say what to clear: --kind activations, --model FINGERPRINT, --unused-days N, or --all "
                            "(heurlens cache list shows what is stored)")
    if everything and (kinds or models or unused_days is not None):
        raise HeurlensError("--all clears everything, models and downloads included: give it alone, or leave it "
                            "out to clear what --kind / --model / --unused-days select")
    root = cache_dir()
    known = {folder.name for folder in kind_folders(root)}
    unknown = sorted(set(kinds) - known)
    if unknown:
        strangers = [kind for kind in unknown if kind not in HEURLENS_KINDS]
        raise HeurlensError(f"the cache holds no kind {', '.join(unknown)}; it holds "
                            f"{', '.join(sorted(known)) or 'nothing'}"
                            + (f" ({', '.join(strangers)}: not a kind heurlens writes, and heurlens never removes "
                               "what it did not write)" if strangers else ""))
    chosen = known if everything else kinds or COMPUTED_KINDS
    removed = clear_entries(root, chosen, models, unused_days)
    freed = sum(e.size for e in removed) / 2**20
    click.echo(f"removed {len(removed)} {'entry' if len(removed) == 1 else 'entries'}, {freed:,.1f} MB, from {root}")


def _what(path: Path, name: str) -> str:
    """What an entry holds, from its safetensors metadata where heurlens wrote some (the name otherwise)."""
    from safetensors import safe_open

    if path.suffix != ".safetensors":
        return name
    try:
        with safe_open(str(path), "pt") as handle:
            about = handle.metadata() or {}
    except Exception:  # a damaged or vanished entry: listed by name, recomputed when next read
        return name
    if "sets" in about:  # heurlens.data.tokenised_sets
        import json

        names = [entry["name"] for entry in json.loads(about["sets"])]
        more = f" and {len(names) - 1} more" if len(names) > 1 else ""
        return f"tokenised evaluation sets: {names[0] if names else 'none'}{more}"
    if "eval_set" not in about:
        return name
    held = f"residual entering block {about['layer']}" if "layer" in about else "logits"
    return f"{held} of {about.get('model') or 'a model'} on {about['eval_set']} ({about.get('examples', '?')} examples)"
