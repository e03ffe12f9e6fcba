"""Edges between components (Edge Pruning, Bhaskar et al., NeurIPS 2024, Section 3): which exist, and the one order
in which a flat mask vector lists them.

A *writer* adds its output to the residual stream: the embeddings, each attention head (its W_O^h z_h), each MLP. A
*reader* takes the residual stream in: each head's query, key and value inputs, each MLP's input, and the final
residual (the logits); in a pre-norm transformer a reader's input is the sum of its upstream writers' outputs (plus
constant biases). Readers are TransformerLens 4's split inputs (``set_use_split_qkv_input``:
``blocks.L.attn.hook_q_input`` ``[batch, pos, head, d_model]``, ``hook_k_input``/``hook_v_input`` per key-value head,
so a grouped-query model's edges go into each *key-value* head; ``set_use_hook_mlp_in``: ``blocks.L.hook_mlp_in``)
and ``ln_final.hook_in``. How masks on these edges act in a forward pass: ``heurlens.interventions.edge_masks``.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar, Literal, cast

import torch
from jaxtyping import Float
from torch import Tensor

from heurlens.errors import HeurlensError
from heurlens.interventions.nodes import EMBED as EMBED  # the graph's names, where they were
from heurlens.interventions.nodes import LOGITS as LOGITS
from heurlens.interventions.nodes import Edge, Node
from heurlens.interventions.units import Unit
from heurlens.protocols import PreparedModel
from heurlens.runtime.deprecations import STILL_WORKS

FINAL_HOOK = "ln_final.hook_in"
_WRITERS = {"attn": "attention", "mlp": "MLP"}


@dataclass(frozen=True)
class ReaderGroup:
    """Readers that one hook point holds (one layer's query inputs, key inputs, value inputs, its MLP input, or the
    final residual), all reading the same writers: the first ``n_writers`` of the layout's. Their edges are the
    entries ``start : start + len(readers) * n_writers`` of the flat edge vector, reader by reader."""

    hook_name: str
    readers: tuple[Node, ...]
    n_writers: int
    start: int

    @property
    def end(self) -> int:
        """Where the group's entries of the flat edge vector end."""
        return self.start + len(self.readers) * self.n_writers


@dataclass(frozen=True)
class EdgeLayout:
    """The edges of a pre-norm transformer with ``n_layers`` layers of ``n_heads`` query heads sharing
    ``n_kv_heads`` key-value heads, and the one order in which a flat vector lists them: reader group by reader
    group (per layer its query, key and value inputs, then its MLP input; the final residual last), within a group
    reader by reader, within a reader its writers in order (the embeddings, then per layer its heads and its MLP)."""

    n_layers: int
    n_heads: int
    n_kv_heads: int
    level: ClassVar[Literal["edge"]] = "edge"  # ``layouts.ItemLayout``: what its items are
    noun: ClassVar[str] = "edge"

    @cached_property
    def writers(self) -> list[Node]:
        """Every writer in order: the embeddings, then per layer its heads and its MLP."""
        return [Node("embed")] + [node for layer in range(self.n_layers) for node in
                                  [*(Node("attn_head_out", layer, h) for h in range(self.n_heads)),
                                   Node("mlp_out", layer)]]

    @cached_property
    def groups(self) -> list[ReaderGroup]:
        """Every reader group in the flat vector's order, with its hook point and its entries."""
        groups: list[ReaderGroup] = []
        start = 0
        grouped = self.n_kv_heads != self.n_heads  # a grouped key-value head is not one query head's
        for layer in range(self.n_layers):
            before = 1 + layer * (self.n_heads + 1)  # the embeddings and every unit of the layers below
            for name, readers in (("q", [Node("q_input", layer, h) for h in range(self.n_heads)]),
                                  ("k", [Node("k_input", layer, h, grouped) for h in range(self.n_kv_heads)]),
                                  ("v", [Node("v_input", layer, h, grouped) for h in range(self.n_kv_heads)])):
                groups.append(ReaderGroup(f"blocks.{layer}.attn.hook_{name}_input", tuple(readers), before, start))
                start = groups[-1].end
            groups.append(ReaderGroup(f"blocks.{layer}.hook_mlp_in", (Node("mlp_in", layer),), before + self.n_heads,
                                      start))
            start = groups[-1].end
        groups.append(ReaderGroup(FINAL_HOOK, (Node("logits"),), len(self.writers), start))
        return groups

    @property
    def n_edges(self) -> int:
        """How many edges the model has."""
        return self.groups[-1].end

    def edges(self) -> list[Edge]:
        """Every edge, in the flat vector's order."""
        return [Edge(writer, reader) for group in self.groups for reader in group.readers
                for writer in self.writers[:group.n_writers]]

    @property
    def n_items(self) -> int:
        """``n_edges`` (``layouts.ItemLayout``)."""
        return self.n_edges

    def item_names(self) -> list[str]:
        """Every edge's name (``L0.H1->L1.H0.v``), in the flat order."""
        return [str(edge) for edge in self.edges()]

    def ungrouped(self) -> EdgeLayout:
        """The layout of the model's ungrouped copy (``models.ungrouped``: a key-value head per query head): MIB's."""
        return EdgeLayout(self.n_layers, self.n_heads, self.n_heads)

    def group_mask(self, group: ReaderGroup, flat: Float[Tensor, "*example edge"]
                   ) -> Float[Tensor, "*example reader writer"]:
        """The group's entries of a flat edge vector (of each example's, with a leading example axis)."""
        return flat[..., group.start:group.end].unflatten(-1, (len(group.readers), group.n_writers))

    def edges_between(self, units: Iterable[Unit]) -> list[Edge]:
        """A node circuit as edges: every edge from the embeddings or one of ``units`` into one of their inputs or the
        logits (a key-value head's inputs when a query head sharing it is one of them). With corrupt ablation the
        two are the same model: a unit outside the circuit reads only corrupted writers, so its output is its
        output on the corrupted input, which every edge out of it carries."""
        units = set(units)
        per_kv = self.n_heads // self.n_kv_heads

        def inside(node: Node) -> bool:
            if node.kind in ("embed", "logits"):
                return True
            if node.grouped:
                return any(Unit(cast(int, node.layer), cast(int, node.head) * per_kv + i) in units
                           for i in range(per_kv))
            return node.unit in units

        return [edge for edge in self.edges() if inside(edge.writer) and inside(edge.reader)]

    def mask(self, kept: Iterable[Edge] | Iterable[str], device: torch.device | str = "cpu") -> Float[Tensor, " edge"]:
        """``keep_mask``, its name in heurlens 0.1.0."""
        warnings.warn(f"EdgeLayout.mask is now EdgeLayout.keep_mask, as UnitLayout's (EdgeLayout.mask {STILL_WORKS})",
                      DeprecationWarning, stacklevel=2)
        return self.keep_mask(kept, device)

    def keep_mask(self, kept: Iterable[Edge] | Iterable[str], device: torch.device | str = "cpu"
                  ) -> Float[Tensor, " edge"]:
        """A flat 0/1 vector that is 1 on ``kept`` (edges or their names, ``"L0.H1->L1.H0.v"``) and 0 elsewhere."""
        index = {str(edge): i for i, edge in enumerate(self.edges())}
        mask = torch.zeros(self.n_edges, device=device)
        for edge in kept:
            if str(edge) not in index:
                raise HeurlensError(f"{edge} is not an edge of this model: edges go from embed, L<layer>.H<head> or "
                                    "L<layer>.MLP into a later L<layer>.H<head>.q/.k/.v (key-value heads: "
                                    "L<layer>.KV<head>.k/.v when grouped), L<layer>.MLP or logits, e.g. L0.H1->L1.H0.v")
            mask[index[str(edge)]] = 1
        return mask


def edge_layout(model: PreparedModel) -> EdgeLayout:
    """The model's edges, or a refusal that says why it has none heurlens can mask: its attention has no hook point
    before the query/key/value projections (TransformerLens splits them for GPT-2- and Llama-style attention, not for
    BERT's), or its attention and MLP run in parallel.

    Args:
        model: a prepared model (``as_model``).

    Returns:
        Its ``EdgeLayout``."""
    bridge = edge_bridge(model)
    cfg = bridge.cfg
    if getattr(cfg, "parallel_attn_mlp", False):
        raise HeurlensError("edge-level pruning reads each MLP's input as the sum of the writers before it, and this "
                            "model runs attention and MLP in parallel (GPT-NeoX style), which heurlens' edge layout does "
                            "not describe yet: prune its nodes (--level node)")
    obstruction = write_obstruction(bridge)
    if obstruction is not None:
        architecture = (getattr(cfg, "architecture", None) or type(bridge).__name__)
        raise HeurlensError(f"edge-level pruning needs each head's and MLP's output added to the residual stream "
                            f"unchanged (a head's write is hook_z @ W_O), and this model ({architecture}) does not: "
                            f"{obstruction}. Post-norm blocks (Gemma-2, Gemma-3, OLMo-2) normalise the outputs before "
                            "the add, so a masked edge would carry another value than its writer's; prune nodes "
                            "(--level node)")
    split = bool(getattr(cfg, "use_split_qkv_input", False))
    split_inputs(bridge)
    bridge.set_use_split_qkv_input(split)
    return EdgeLayout(cfg.n_layers, cfg.n_heads, int(getattr(cfg, "n_key_value_heads", None) or cfg.n_heads))


def write_obstruction(bridge: Any) -> str | None:
    """What stands between a block's attention or MLP output and the residual stream, or None: a norm after the
    output (``ln1_post``/``ln2_post``, whose hook_attn_out/hook_mlp_out TransformerLens then reads after the norm),
    or a scale on the attention's contribution (as TransformerLens' own edge attribution refuses)."""
    for layer, block in enumerate(bridge.blocks):
        aliases = getattr(block, "hook_aliases", None) or {}
        for hook, writer in (("hook_attn_out", "attn"), ("hook_mlp_out", "mlp")):
            target = aliases.get(hook)
            targets = [target] if isinstance(target, str) else list(target or [])
            owner = next((t.split(".")[0] for t in targets if t.split(".")[0] in block.submodules), writer)
            if owner != writer:
                return f"blocks.{layer}.{hook} is read after {owner}, a norm on the {_WRITERS[writer]}'s output"
        scale = getattr(block, "residual_contribution_scale", 1.0)
        if scale != 1.0:
            return f"blocks.{layer} scales its attention output by {scale}"
    return None


def split_inputs(bridge: Any) -> None:
    """Turn on TransformerLens' per-head query/key/value inputs, or refuse the model by name."""
    try:
        bridge.set_use_split_qkv_input(True)
    except (NotImplementedError, ValueError) as error:
        raise HeurlensError(f"edge-level pruning reads each head's query, key and value inputs apart, and "
                            f"TransformerLens cannot split this model's ({type(bridge.blocks[0].attn).__name__}): "
                            f"{str(error).splitlines()[0]} It splits GPT-2- and Llama-style decoders (GPT-2, Llama, "
                            "SmolLM2, Qwen2, Mistral, ...); for this model prune nodes (--level node)") from error


@contextmanager
def reader_inputs(model: PreparedModel) -> Iterator[Any]:
    """Inside the block (yielding the bridge) every reader has its own hook point, as the layout names them:
    TransformerLens' split query/key/value inputs (``set_use_split_qkv_input``) and MLP inputs
    (``set_use_hook_mlp_in``) turned on; on leaving, by an error too, as they were. Edge masks and edge attribution
    act there."""
    bridge = edge_bridge(model)
    split, mlp_in = bool(getattr(bridge.cfg, "use_split_qkv_input", False)), bool(bridge.cfg.use_hook_mlp_in)
    split_inputs(bridge)
    bridge.set_use_hook_mlp_in(True)
    try:
        yield bridge
    finally:
        bridge.set_use_split_qkv_input(split)
        bridge.set_use_hook_mlp_in(mlp_in)


def edge_bridge(model: PreparedModel) -> Any:
    bridge = getattr(model, "bridge", None)
    if bridge is None or not hasattr(bridge, "set_use_split_qkv_input"):
        raise HeurlensError("edge-level pruning needs a TransformerLens 4 TransformerBridge (heurlens.load_model or "
                            "heurlens.wrap_bridge): edges are masked at its split query/key/value inputs")
    return bridge


def parse_edges(spec: str, layout: EdgeLayout) -> list[Edge]:
    """``"L0.H1->L1.H0.v, L1.H0->logits"`` as edges of ``layout`` (refused by name when one is not).

    Args:
        spec: edges such as ``"L0.H1->L1.H0.v, L1.H0->logits"``.
        layout: the model's ``EdgeLayout``.

    Returns:
        The edges."""
    edges = [Edge.parse(item) for item in spec.split(",") if item.strip()]
    layout.keep_mask(edges)  # refuses an edge the layout does not have
    return edges
