"""Edge masks: which component reads which other's output (Edge Pruning, Bhaskar et al., NeurIPS 2024, Section 3).

A *writer* adds its output to the residual stream: the embeddings, each attention head (its W_O^h z_h), each MLP. A
*reader* takes the residual stream in: each head's query, key and value inputs, each MLP's input, and the final
residual (the logits). In a pre-norm transformer reader r's input is the sum of its upstream writers' outputs (plus
constant biases), and an edge mask m_wr on each pair makes it

    x_r = sum_w m_wr out_w + (1 - m_wr) out_w~ = x_r(model) - sum_w (1 - m_wr) (out_w - out_w~),

out_w~ the writer's output on the example's corrupted input (interchange ablation), so m = 1 on every edge is the
model and m = 0 on every edge its run on the corrupted input. Each reader is normalised on its own input, as Edge
Pruning does, through TransformerLens 4's split inputs (``set_use_split_qkv_input``: ``blocks.L.attn.hook_q_input``
``[batch, pos, head, d_model]``, ``hook_k_input``/``hook_v_input`` per key-value head, so a grouped-query model's
edges go into each *key-value* head; ``set_use_hook_mlp_in``: ``blocks.L.hook_mlp_in``) and ``ln_final.hook_in``.
Writers are read at ``blocks.0.hook_resid_pre``, ``blocks.L.attn.hook_z`` (times each head's W_O) and
``blocks.L.hook_mlp_out``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property, partial
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor

from heurlens.errors import HeurlensError
from heurlens.protocols import Batch, HookList, PreparedModel
from heurlens.units import Unit, heads_hook_name, mlp_hook_name

EMBED, LOGITS = "embed", "logits"
EMBED_HOOK, FINAL_HOOK = "blocks.0.hook_resid_pre", "ln_final.hook_in"
LAYERS_A_GROUP = 8  # writers' blocks of this many layers are joined into one (each writer kept twice)


@dataclass(frozen=True)
class Edge:
    """One edge: ``writer`` ("embed", "L0.H1", "L0.MLP") into ``reader`` ("L1.H0.v", "L1.MLP", "logits")."""

    writer: str
    reader: str

    def __str__(self) -> str:
        return f"{self.writer}->{self.reader}"


@dataclass(frozen=True)
class ReaderGroup:
    """Readers that one hook point holds (one layer's query inputs, key inputs, value inputs, its MLP input, or the
    final residual), all reading the same writers: the first ``n_writers`` of the layout's. Their edges are the
    entries ``start : start + len(readers) * n_writers`` of the flat edge vector, reader by reader."""

    hook_name: str
    readers: tuple[str, ...]
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

    @cached_property
    def writers(self) -> list[str]:
        """Every writer in order: ``embed``, then per layer ``L.H0 ... L.MLP``."""
        return [EMBED] + [str(unit) for layer in range(self.n_layers)
                          for unit in [*(Unit(layer, h) for h in range(self.n_heads)), Unit(layer)]]

    @cached_property
    def groups(self) -> list[ReaderGroup]:
        """Every reader group in the flat vector's order, with its hook point and its entries."""
        groups: list[ReaderGroup] = []
        start = 0
        kv = "H" if self.n_kv_heads == self.n_heads else "KV"  # a grouped key-value head is not one query head's
        for layer in range(self.n_layers):
            before = 1 + layer * (self.n_heads + 1)  # the embeddings and every unit of the layers below
            for name, readers in (("q", [f"L{layer}.H{h}.q" for h in range(self.n_heads)]),
                                  ("k", [f"L{layer}.{kv}{h}.k" for h in range(self.n_kv_heads)]),
                                  ("v", [f"L{layer}.{kv}{h}.v" for h in range(self.n_kv_heads)])):
                groups.append(ReaderGroup(f"blocks.{layer}.attn.hook_{name}_input", tuple(readers), before, start))
                start = groups[-1].end
            groups.append(ReaderGroup(f"blocks.{layer}.hook_mlp_in", (f"L{layer}.MLP",), before + self.n_heads, start))
            start = groups[-1].end
        groups.append(ReaderGroup(FINAL_HOOK, (LOGITS,), len(self.writers), start))
        return groups

    @property
    def n_edges(self) -> int:
        """How many edges the model has."""
        return self.groups[-1].end

    def edges(self) -> list[Edge]:
        """Every edge, in the flat vector's order."""
        return [Edge(writer, reader) for group in self.groups for reader in group.readers
                for writer in self.writers[:group.n_writers]]

    def group_mask(self, group: ReaderGroup, flat: Float[Tensor, "*example edge"]
                   ) -> Float[Tensor, "*example reader writer"]:
        """The group's entries of a flat edge vector (of each example's, with a leading example axis)."""
        return flat[..., group.start:group.end].unflatten(-1, (len(group.readers), group.n_writers))

    def edges_between(self, units: Iterable[Unit]) -> list[Edge]:
        """A node circuit as edges: every edge from the embeddings or one of ``units`` into one of their inputs or the
        logits (a key-value head's inputs when a query head sharing it is one of them). With interchange ablation the
        two are the same model: a unit outside the circuit reads only corrupted writers, so its output is its
        output on the corrupted input, which every edge out of it carries."""
        names = {str(unit) for unit in units}
        per_kv = self.n_heads // self.n_kv_heads

        def inside(reader: str) -> bool:
            if reader == LOGITS:
                return True
            layer, part = reader.split(".")[:2]
            if part.startswith("KV"):
                return any(f"{layer}.H{int(part[2:]) * per_kv + i}" in names for i in range(per_kv))
            return f"{layer}.{part}" in names

        return [edge for edge in self.edges() if (edge.writer == EMBED or edge.writer in names) and inside(edge.reader)]

    def mask(self, kept: list[Edge] | list[str], device: torch.device | str = "cpu") -> Float[Tensor, " edge"]:
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
    BERT's), or its attention and MLP run in parallel."""
    bridge = _bridge(model)
    cfg = bridge.cfg
    if getattr(cfg, "parallel_attn_mlp", False):
        raise HeurlensError("edge-level pruning reads each MLP's input as the sum of the writers before it, and this "
                            "model runs attention and MLP in parallel (GPT-NeoX style), which heurlens' edge layout does "
                            "not describe yet: prune its nodes (--level node)")
    split = bool(getattr(cfg, "use_split_qkv_input", False))
    _split_inputs(bridge)
    bridge.set_use_split_qkv_input(split)
    return EdgeLayout(cfg.n_layers, cfg.n_heads, int(getattr(cfg, "n_key_value_heads", None) or cfg.n_heads))


def _split_inputs(bridge: Any) -> None:
    """Turn on TransformerLens' per-head query/key/value inputs, or refuse the model by name."""
    try:
        bridge.set_use_split_qkv_input(True)
    except (NotImplementedError, ValueError) as error:
        raise HeurlensError(f"edge-level pruning reads each head's query, key and value inputs apart, and "
                            f"TransformerLens cannot split this model's ({type(bridge.blocks[0].attn).__name__}): "
                            f"{str(error).splitlines()[0]} It splits GPT-2- and Llama-style decoders (GPT-2, Llama, "
                            "SmolLM2, Qwen2, Mistral, ...); for this model prune nodes (--level node)") from error


def _bridge(model: PreparedModel) -> Any:
    bridge = getattr(model, "bridge", None)
    if bridge is None or not hasattr(bridge, "set_use_split_qkv_input"):
        raise HeurlensError("edge-level pruning needs a TransformerLens 4 TransformerBridge (heurlens.load_model or "
                            "heurlens.wrap_bridge): edges are masked at its split query/key/value inputs")
    return bridge


WriterOutputs = list[Tensor]  # per writer block (embed, then per layer heads and MLP): [batch, writers, pos * d_model]


class EdgeMaskHooks:
    """Hook functions that apply edge masks ``masks`` (a flat vector over ``layout``'s edges, or one row per example
    of the batch: several pruning seeds in one forward pass) with the writers' outputs on the corrupted batch
    (``use_corrupted``) as what a pruned edge carries. Set ``masks`` and call ``use_corrupted`` before each forward
    pass; the hooks read them when they fire."""

    def __init__(self, layout: EdgeLayout, masks: Float[Tensor, "*example edge"]):
        self.layout = layout
        self.masks = masks
        self.replacement: WriterOutputs | None = None
        self._outputs: WriterOutputs = []  # the corrupted pass: the writers' outputs so far
        self._differences: WriterOutputs = []  # a masked pass: out_w - out_w~ of the writers so far, block by block
        self._written = self._closed = self._grouped = 0  # blocks written; blocks up to the last MLP's, last group's
        per_layer = zip(*(iter(layout.groups[:-1]),) * 4)  # each layer's q, k, v and MLP groups
        self._read_with = {q.hook_name: [k, v, mlp] for q, k, v, mlp in per_layer}  # computed when q fires
        self._pending: dict[str, tuple[Tensor, int]] = {}  # corrections computed early, and over how many writers
        self._capturing = False  # the pass on the corrupted batch: record outputs, change nothing
        self._w_o: list[Tensor] = []

    def set_masks(self, flat: Float[Tensor, "*example edge"]) -> None:
        """The masks the next forward pass applies (one flat vector, or one row per example)."""
        self.masks = flat

    @torch.no_grad()
    def use_corrupted(self, model: PreparedModel, batch: Batch) -> None:
        """Run ``batch`` (the corrupted inputs, on the model's device) with the edges untouched and keep every
        writer's output as what the pruned edges will carry (interchange ablation)."""
        self._capturing = True
        try:
            model(**batch)
        finally:
            self._capturing = False
        self.replacement = [output.detach() for output in self._outputs]

    @property
    def hooks(self) -> HookList:
        """``(hook point, function)`` pairs: writers where they write, each reader group where it reads."""
        writers: HookList = [(EMBED_HOOK, self._embeddings)]
        for layer in range(self.layout.n_layers):
            writers += [(heads_hook_name(layer), partial(self._heads, layer)), (mlp_hook_name(layer), self._mlp)]
        return writers + [(group.hook_name, partial(self._read, group)) for group in self.layout.groups]

    @contextmanager
    def attached(self, model: PreparedModel) -> Iterator[None]:
        """Inside the block the edge masks act on ``model``: its split query/key/value inputs and MLP inputs turned
        on (TransformerLens' ``set_use_split_qkv_input``, ``set_use_hook_mlp_in``) and the hooks added; on leaving,
        by an error too, both as they were."""
        bridge = _bridge(model)
        split, mlp_in = bool(getattr(bridge.cfg, "use_split_qkv_input", False)), bool(bridge.cfg.use_hook_mlp_in)
        _split_inputs(bridge)
        bridge.set_use_hook_mlp_in(True)
        self._w_o = [bridge.blocks[layer].attn.W_O.detach() for layer in range(self.layout.n_layers)]
        try:
            with model.hooks(self.hooks):
                yield
        finally:
            bridge.set_use_split_qkv_input(split)
            bridge.set_use_hook_mlp_in(mlp_in)
            self._outputs, self._differences, self._pending = [], [], {}

    def _write(self, output: Float[Tensor, "batch writer pos_d_model"], closes_layer: bool = False) -> None:
        """Keep a block of writers' outputs (the corrupted pass) or their differences from the corrupted ones (a masked
        pass), each example's writers as the rows of a matrix over its positions and dimensions. An MLP closes its
        layer: the blocks written since the last MLP become one, so a later reader takes one matrix product a layer."""
        if self._capturing:
            self._outputs.append(output)
            return
        if self.replacement is None:
            raise HeurlensError("edge masks replace pruned edges by the writers' outputs on the corrupted input: call "
                                "use_corrupted(model, corrupted batch) before each forward pass")
        self._differences.append(output - self.replacement[self._written].to(output.dtype))
        self._written += 1
        if closes_layer:
            self._differences[self._closed:] = [torch.cat(self._differences[self._closed:], dim=1)]
            self._closed = len(self._differences)
            if self._closed - self._grouped == LAYERS_A_GROUP:  # fewer, larger products for the layers above
                self._differences[self._grouped:] = [torch.cat(self._differences[self._grouped:], dim=1)]
                self._closed = self._grouped = len(self._differences)

    def _embeddings(self, resid: Float[Tensor, "batch pos d_model"], hook: Any) -> None:
        self._outputs, self._differences, self._pending = [], [], {}  # a new pass
        self._written = self._closed = self._grouped = 0
        self._write(resid.flatten(1)[:, None])

    def _heads(self, layer: int, z: Float[Tensor, "batch pos head d_head"], hook: Any) -> None:
        self._write(torch.einsum("bphd,hdm->bhpm", z, self._w_o[layer].to(z.dtype)).flatten(2))

    def _mlp(self, out: Float[Tensor, "batch pos d_model"], hook: Any) -> None:
        self._write(out.flatten(1)[:, None], closes_layer=True)

    def _read(self, group: ReaderGroup, x: Tensor, hook: Any) -> Tensor | None:
        """x_r - sum_w (1 - m_wr) (out_w - out_w~) for each reader r of the group (``x``: ``[batch, pos, reader,
        d_model]``, or ``[batch, pos, d_model]`` for a group of one). A layer's query, key and value inputs and its MLP
        read the same writers below the layer: their corrections are computed together when the query input fires
        (one pass over those writers' outputs a layer), the MLP's completed with its own layer's heads."""
        if self._capturing:
            return None
        correction, covered = self._pending.pop(group.hook_name, (None, 0))
        if correction is None:
            later = self._read_with.get(group.hook_name, [])
            below = torch.cat([self._dropped(group, x.shape[0])] +
                              [self._dropped(g, x.shape[0])[..., :group.n_writers] for g in later], dim=1)
            correction, *theirs = self._product(below, 0, group.n_writers).split(
                [len(group.readers)] + [len(g.readers) for g in later], dim=1)
            self._pending |= {g.hook_name: (c, group.n_writers) for g, c in zip(later, theirs)}
        elif covered < group.n_writers:
            correction = correction + self._product(self._dropped(group, x.shape[0])[..., covered:], covered,
                                                    group.n_writers)
        correction = correction.unflatten(-1, (x.shape[1], x.shape[-1])).transpose(1, 2)  # [batch, pos, reader, d]
        return x - (correction if x.dim() == 4 else correction[:, :, 0])

    def _dropped(self, group: ReaderGroup, batch: int) -> Float[Tensor, "batch reader writer"]:
        """1 - m for the group's edges, one matrix per example."""
        dropped = 1 - self.layout.group_mask(group, self.masks).to(self._differences[0].device,
                                                                     self._differences[0].dtype)
        return dropped.expand(batch, *dropped.shape[-2:])

    def _product(self, dropped: Float[Tensor, "batch reader writer"], first: int, last: int
                 ) -> Float[Tensor, "batch reader pos_d_model"]:
        """sum_w (1 - m_wr) (out_w - out_w~) over writers ``first`` to ``last`` (``dropped``'s columns): one batched
        matrix product per block of writers (a layer's, or the heads of the reader's own layer), so the writers' outputs
        are never copied for a reader, and backpropagation keeps each block once."""
        correction, start = None, 0
        for difference in self._differences:  # [batch, writers of the block, pos * d_model]
            end = start + difference.shape[1]
            if end > last:
                break
            if start >= first:
                block = dropped[..., start - first:end - first]
                correction = (torch.bmm(block, difference) if correction is None
                              else torch.baddbmm(correction, block, difference))
            start = end
        if start != last or correction is None:
            raise HeurlensError(f"a reader fired after {start} writers, not the {last} edge-level pruning expects: this "
                                "architecture's blocks run in another order")
        return correction


def edge_mask_forward(model: PreparedModel, masks: Float[Tensor, "*example edge"], batch: Batch,
                      corrupted: Batch) -> Tensor:
    """The model's scores on ``batch`` with the edges masked by ``masks``, pruned edges carrying the writers' outputs
    on ``corrupted`` (both batches on the model's device)."""
    hooks = EdgeMaskHooks(edge_layout(model), masks)
    with hooks.attached(model):
        hooks.use_corrupted(model, corrupted)
        return model(**batch)


_EDGE = re.compile(r"^\s*(\S+)\s*->\s*(\S+)\s*$")


def parse_edges(spec: str, layout: EdgeLayout) -> list[Edge]:
    """``"L0.H1->L1.H0.v, L1.H0->logits"`` as edges of ``layout`` (refused by name when one is not)."""
    edges = []
    for item in (part for part in spec.split(",") if part.strip()):
        match = _EDGE.match(item)
        if match is None:
            raise HeurlensError(f"cannot read {item!r} as an edge: write WRITER->READER, e.g. L0.H1->L1.H0.v")
        edges.append(Edge(*match.groups()))
    layout.mask(edges)  # refuses an edge the layout does not have
    return edges
