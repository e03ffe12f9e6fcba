"""SmolLM2-135M on IOI as a circuit benchmark: mask optimisation (heurlens prune) against attribution patching, with
mean and with interchange ablation, scored by faithfulness over circuit sizes (CPR, CMD; MIB's definitions).

For each ablation (mean: the units' means over the training prompts; interchange: each unit's activation on the
prompt's ABC corruption) the script prunes SmolLM2 on --examples IOI prompts (seed 0) at --sparsities with --seeds
seeds (resumable: finished subnetworks in --out/<ablation> are reused), ranks the units by attribution patching on
the same prompts, and scores both kinds of circuit on as many other prompts (seed 1): f(k) = (m(circuit) -
m(empty)) / (m(full) - m(empty)), m the logit difference. It writes the tables, the top units of each method and
the run times to --docs, and the curves beside it. With --edge-sparsities (by default), Edge Pruning's circuits
(heurlens prune --level edge) on the same prompts, scored over the fraction of edges kept beside the interchange node
circuits and attribution's (each as the edges between its units), and the sparsest circuit that keeps the task
(f >= 0.8) drawn.

Run: OMP_NUM_THREADS=1 .venv/bin/python analyses/circuits_ioi_smollm2.py [--sparsities 0.5 0.7 0.8 0.9 0.95]
(one prune step of 32 prompts takes about 4.4 s on this CPU at one thread with mean ablation, 6-7 s with interchange:
300 steps a subnetwork, 30 subnetworks with the defaults, about 13 hours, and 15 edge circuits at about 2.3x a node
step's cost as many again: a GPU's job; one seed with --ablations mean and --ablations interchange in two processes
took 2 h 21 min on two cores, 2026-11-27; on an H200 the 15 edge circuits (five 3-seed runs side by side, one
process each, seeds stacked) took 5.6 min, 2026-11-27, and the node circuits' seeds 1-2 (8 processes side by side)
102-138 s a process, 2026-11-28;
the model goes where heurlens.load_model puts it, a CUDA GPU when there is one, or $HEURLENS_DEVICE)
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

import heurlens
from heurlens.analysis.attribution import attribution_circuits, attribution_scores
from heurlens.analysis.circuit_graph import circuit_figure
from heurlens.analysis.faithfulness import faithfulness_curve, faithfulness_figure
from heurlens.analysis.ioi_heads import ioi_head_scores
from heurlens.data.prompt_tasks import logit_difference
from heurlens.data.run_data import PromptTaskData
from heurlens.pruning.circuit import EdgeCircuit
from heurlens.pruning.subnetwork import Subnetwork
from heurlens.runtime.cache import atomic_write_bytes
from heurlens.runtime.devices import describe_device, device_of
from heurlens.runtime.run_folders import RunFolder

MIB_SIZES = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5)  # MIB's fractions of components above one unit of SmolLM2's 300


def minutes_by_machine(records: Iterable[Subnetwork | EdgeCircuit]) -> str:
    """Mask-training minutes summed per machine each record says it trained on (``metrics["trained_on"]``, recorded
    since 2026-11-27: a run folder resumed elsewhere mixes machines, e.g. "52.3 (cpu, 1 thread); 4.6 (cuda, NVIDIA
    H200)")."""
    minutes: defaultdict[str, float] = defaultdict(float)
    for record in records:
        minutes[record.metrics.get("trained_on", "machine not recorded")] += record.metrics["train_seconds"] / 60
    return "; ".join(f"{total:.1f} ({machine})" for machine, total in sorted(minutes.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/ioi-smollm2"))
    parser.add_argument("--examples", type=int, default=200)
    parser.add_argument("--sparsities", type=float, nargs="+", default=[0.5, 0.7, 0.8, 0.9, 0.95])
    parser.add_argument("--edge-sparsities", type=float, nargs="*", default=[0.9, 0.95, 0.98, 0.99, 0.995],
                        help="Edge pruning's sparsities (none: node circuits only).")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--edge-seeds", type=int, default=None,
                        help="Edge Pruning's seeds (default: --seeds), e.g. more where the edge circuits came from a GPU.")
    parser.add_argument("--ablations", nargs="+", choices=("mean", "interchange"), default=["mean", "interchange"],
                        help="The node circuits' ablations (one each: two processes can prune them side by side).")
    parser.add_argument("--steps", type=int, default=None, help="Pruning steps (default: heurlens prune's schedule).")
    parser.add_argument("--penalty", choices=("lagrangian", "quadratic"), default="lagrangian",
                        help="The node masks' sparsity penalty (heurlens prune --penalty).")
    parser.add_argument("--extend-steps", type=int, default=0,
                        help="Up to this many more steps for node masks still off target (heurlens prune --extend-steps).")
    parser.add_argument("--docs", type=Path, default=Path("docs/results/circuits-ioi-smollm2.md"))
    args = parser.parse_args()
    edge_seeds = args.seeds if args.edge_seeds is None else args.edge_seeds
    folder = RunFolder(args.out, "IOI circuits run", ("*/unit-means.safetensors",))
    folder.opened()
    model = heurlens.load_model("smollm2")
    data = PromptTaskData("ioi", args.examples, seed=0)
    train, means = data.train(model), data.means(model)
    [evaluation] = data.eval_sets(model)
    rows, curves, tops, named = [], {}, {}, set()
    for ablation in args.ablations:
        subnetworks = heurlens.prune(model, train, sparsity=args.sparsities, seeds=range(args.seeds),
                                     out=args.out / ablation, means=means,
                                     config=heurlens.PruneSettings(ablation=ablation, total_steps=args.steps,
                                                                   penalty=args.penalty,
                                                                   extend_steps=args.extend_steps))
        pruning_minutes = minutes_by_machine(subnetworks)
        pruned = faithfulness_curve(model, subnetworks, evaluation, method=ablation, means=means)
        start = time.time()
        ranking = attribution_scores(model, train, logit_difference, method=ablation, means=means)
        attribution_minutes = f"{(time.time() - start) / 60:.1f} ({describe_device(device_of(model))})"
        sizes = sorted(set(pruned.circuits["kept_fraction"]) | set(MIB_SIZES))
        attributed = faithfulness_curve(model, attribution_circuits(ranking, sizes, model.n_layers, model.n_heads),
                                        evaluation, method=ablation, means=means)
        for method, curve, minutes in (("mask optimisation", pruned, pruning_minutes),
                                       ("attribution", attributed, attribution_minutes)):
            curves[f"{method}, {ablation}"] = curve
            rows.append({"method": method, "ablation": ablation, "circuits": len(curve.circuits),
                         "CPR": round(curve.cpr, 3), "CMD": round(curve.cmd, 3),
                         "full m": round(curve.full, 2), "empty m": round(curve.empty, 2),
                         "discovery (min, where)": minutes})
        top = ranking.assign(size=ranking["score"].abs()).nlargest(15, "size")
        tops[f"attribution, {ablation}"] = ", ".join(f"{u} ({s:+.2f})" for u, s in zip(top["unit"], top["score"]))
        highest = max(args.sparsities)
        core = set.intersection(*(set(sub.kept) for sub in subnetworks if sub.target_sparsity == highest))
        tops[f"kept by every {highest:.0%} subnetwork, {ablation}"] = ", ".join(map(str, sorted(core))) or "(none)"
        named |= {unit for unit in core if not unit.is_mlp}
        named |= {unit for unit in heurlens.parse_units(",".join(top["unit"]), model.n_layers, model.n_heads)
                  if not unit.is_mlp}
    eager = heurlens.load_model("smollm2", attn_implementation="eager")  # fires hook_pattern
    signatures = ioi_head_scores(eager, evaluation, heads=sorted(named)) if named else None
    del eager
    edge_rows, edge_curves = [], {}
    if args.edge_sparsities:  # Edge Pruning's circuits, beside the interchange node circuits on the edge axis
        circuits = heurlens.prune(model, train, sparsity=args.edge_sparsities, seeds=range(edge_seeds),
                                  out=args.out / "edge", means=means, config=heurlens.PruneSettings(
                                      ablation="corrupt", level="edge", total_steps=args.steps))
        edge_minutes = minutes_by_machine(circuits)
        node_interchange = heurlens.prune(model, train, sparsity=args.sparsities, seeds=range(args.seeds),
                                          out=args.out / "interchange", means=means,
                                          config=heurlens.PruneSettings(
                                              ablation="corrupt", total_steps=args.steps, penalty=args.penalty,
                                              extend_steps=args.extend_steps))  # from the folder
        ranking = attribution_scores(model, train, logit_difference, method="interchange", means=means)
        sizes = sorted({len(c.kept) / (model.n_layers * (model.n_heads + 1)) for c in circuits} | set(MIB_SIZES))
        edge_curves = {
            "edge pruning": faithfulness_curve(model, circuits, evaluation),
            "mask optimisation (nodes)": faithfulness_curve(model, node_interchange, evaluation, edges=True),
            "attribution (nodes)": faithfulness_curve(
                model, attribution_circuits(ranking, sizes, model.n_layers, model.n_heads), evaluation, edges=True)}
        for name, curve in edge_curves.items():
            edge_rows.append({"method": name, "circuits": len(curve.circuits), "CPR": round(curve.cpr, 3),
                              "CMD": round(curve.cmd, 3)})
        edge_rows[0]["discovery (min, where)"] = edge_minutes
        faithful = edge_curves["edge pruning"].circuits.set_index("circuit")["faithfulness"]
        drawn = max([c for c in circuits if faithful[c.label] >= 0.8] or circuits,
                    key=lambda c: (c.target_sparsity, -c.seed))  # the sparsest that keeps the task (f >= 0.8)
        assert isinstance(drawn, EdgeCircuit)  # prune at level="edge" returns edge circuits
        atomic_write_bytes(args.docs.with_name(args.docs.stem + "-circuit.html"),
                           circuit_figure(drawn).to_html(include_plotlyjs="cdn").encode())
        atomic_write_bytes(args.docs.with_name(args.docs.stem + "-edges.html"),
                           faithfulness_figure(edge_curves, "IOI (SmolLM2-135M), edges").to_html(
                               include_plotlyjs="cdn").encode())
    atomic_write_bytes(args.docs.with_suffix(".html"),
                       faithfulness_figure(curves, "IOI (SmolLM2-135M)").to_html(include_plotlyjs="cdn").encode())
    lines = ["# IOI circuits of SmolLM2-135M: mask optimisation against attribution patching\n",
             f"Produced by `analyses/circuits_ioi_smollm2.py` on this project's 2-core CPU (the masks trained where "
             f"each table's discovery column says): {args.examples} IOI "
             "prompts (seed 0) to prune, rank and take means on, as many others (seed 1) to score; m the logit "
             f"difference; sparsities {', '.join(f'{s:g}' for s in args.sparsities)}, "
             f"{args.seeds} seed{'s' * (args.seeds > 1)}; node masks with the {args.penalty} penalty"
             f"{f' and up to {args.extend_steps:,} steps more off target' if args.extend_steps else ''}; "
             "attribution cut at those sizes and at MIB's 1-50%. Curves: "
             f"[{args.docs.with_suffix('.html').name}]({args.docs.with_suffix('.html').name}).\n",
             pd.DataFrame(rows).to_markdown(index=False), "",
             "## Circuits, one row each\n",
             pd.concat([curve.circuits.assign(method=name) for name, curve in curves.items()])
             .round(3).to_markdown(index=False), "",
             "## The units each method puts first\n",
             *(f"- **{name}**: {units}" for name, units in tops.items()), ""]
    if signatures is not None:
        lines += ["## Those heads' attention, read as the IOI circuit's classes (Wang et al. 2022)\n",
                  "`heurlens.analysis.ioi_head_scores` on the scoring prompts: the share of attention from the last "
                  "token (END) on the indirect object (name mover), from END on the subject's second mention S2 "
                  "(S-inhibition), from S2 on S1 (duplicate token) and on the token after S1 (induction), the first "
                  f"position left out; over {int(signatures['prompts'].iloc[0])} prompts. Attention alone: Wang "
                  "et al. assign classes by path patching.\n",
                  signatures.drop(columns=["layer", "head", "prompts"]).round(3).to_markdown(index=False), ""]
    if edge_rows:
        lines += ["## On the edge axis: Edge Pruning's circuits beside node circuits\n",
                  f"Edge sparsities {', '.join(f'{s:g}' for s in args.edge_sparsities)}, {edge_seeds} seed"
                  f"{'s' * (edge_seeds > 1)}; f over the fraction of edges kept, every other edge carrying the "
                  "corrupted prompt's outputs; a node circuit counted as the edges "
                  f"between its units. Curves: [{args.docs.stem}-edges.html]({args.docs.stem}-edges.html); the "
                  f"sparsest circuit with f >= 0.8 drawn: [{args.docs.stem}-circuit.html]({args.docs.stem}-circuit.html).\n",
                  pd.DataFrame(edge_rows).to_markdown(index=False), "",
                  pd.concat([curve.circuits.assign(method=name) for name, curve in edge_curves.items()])
                  .round(4).to_markdown(index=False), ""]
    folder.write_results_page(args.docs, "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
