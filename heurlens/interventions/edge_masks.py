"""Edge masks in a forward pass (Edge Pruning, Bhaskar et al., NeurIPS 2024, Section 3): an edge mask m_wr on each
writer-reader pair (``heurlens.interventions.graph``) makes reader r's input

    x_r = sum_w m_wr out_w + (1 - m_wr) out_w~ = x_r(model) - sum_w (1 - m_wr) (out_w - out_w~),

out_w~ what a pruned edge carries: the writer's output on the example's corrupted input (corrupt ablation, Edge
Pruning's and MIB's patching), or its mean output over a reference set at every position (mean ablation, MIB's
"mean"; zeros: zero ablation). So m = 1 on every edge is the model, and m = 0 on every edge its run on the corrupted
input (corrupt ablation). Each reader is normalised on its own input, as Edge Pruning does. Writers are read at
``blocks.0.hook_resid_pre``, ``blocks.L.attn.hook_z`` (times each head's W_O) and ``blocks.L.hook_mlp_out``; readers
are corrected where they read (the layout's hook points).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor

from heurlens.errors import HeurlensError
from heurlens.interventions.corruption import captured
from heurlens.interventions.edge_products import BlockRead, GradientSum, SharedBlock
from heurlens.interventions.graph import FINAL_HOOK, EdgeLayout, ReaderGroup, edge_layout, reader_inputs
from heurlens.interventions.means import EMBED_HOOK, UnitMeans
from heurlens.interventions.writers import head_writes, replacement_activations, writer_blocks, writer_hook_names
from heurlens.protocols import Batch, HookList, PreparedModel

LAYERS_A_GROUP = 8  # writers' blocks of this many layers are joined into one (each writer kept twice)


WriterOutputs = list[Tensor]  # per writer block (embed, then per layer heads and MLP): [batch, writers, pos * d_model]


class EdgeMaskHooks:
    """Hook functions that apply edge masks ``masks`` (a flat vector over ``layout``'s edges, or one row per example
    of the batch: several pruning seeds in one forward pass) with what a pruned edge carries: the writers' outputs on
    the corrupted batch (``use_corrupted``, before each forward pass), or with ``means`` (``compute_means``, or
    ``zero_means``) each writer's mean output. Set ``masks`` before each forward pass; the hooks read them when they
    fire."""

    def __init__(self, layout: EdgeLayout, masks: Float[Tensor, "*example edge"], means: UnitMeans | None = None):
        self.layout = layout
        self.masks = masks
        self.means = means
        self.replacement: WriterOutputs | None = None
        self._mean_outputs: list[Tensor] = []  # mean ablation: per writer block, its writers' mean outputs
        self._differences: WriterOutputs = []  # a masked pass: out_w - out_w~ of the writers so far, block by block
        self._gradients: list[GradientSum] = []  # each block's gradient from the readers (``SharedBlock``)
        self._written = self._closed = self._grouped = 0  # blocks written; blocks up to the last MLP's, last group's
        per_layer = zip(*(iter(layout.groups[:-1]),) * 4)  # each layer's q, k, v and MLP groups
        self._read_with = {q.hook_name: [k, v, mlp] for q, k, v, mlp in per_layer}  # computed when q fires
        self._pending: dict[str, tuple[Tensor, int]] = {}  # corrections computed early, and over how many writers
        self._standing_aside = False  # the corrupted pass (``use_corrupted``): change nothing
        self._read_so_far: set[str] = set()  # the reader groups' hook points that fired in this pass
        self._w_o: list[Tensor] = []

    def set_masks(self, flat: Float[Tensor, "*example edge"]) -> None:
        """The masks the next forward pass applies (one flat vector, or one row per example)."""
        self.masks = flat

    @torch.no_grad()
    def use_corrupted(self, model: PreparedModel, batch: Batch) -> None:
        """Run ``batch`` (the corrupted inputs, on the model's device) with the edges untouched and keep every
        writer's output as what the pruned edges will carry (corrupt ablation; ``corruption.captured``)."""
        if self.means is not None:
            raise HeurlensError("these edge masks replace pruned edges by the writers' means (mean ablation), not by "
                                "their outputs on a corrupted batch: build them without means for corrupt ablation")
        self._standing_aside = True
        try:
            seen = captured(model, batch, writer_hook_names(self.layout.n_layers))
        finally:
            self._standing_aside = False
        self.replacement = [block.flatten(2) for block in writer_blocks(seen, self._w_o)]

    @property
    def hooks(self) -> HookList:
        """``(hook point, function)`` pairs: writers where they write, each reader group where it reads."""
        functions = [self._embeddings] + [function for layer in range(self.layout.n_layers)
                                          for function in (partial(self._heads, layer), self._mlp)]
        writers: HookList = list(zip(writer_hook_names(self.layout.n_layers), functions))
        return writers + [(group.hook_name, partial(self._read, group)) for group in self.layout.groups]

    @property
    def pass_hooks(self) -> HookList:
        """What one pass needs: every hook (a pruned edge anywhere changes its reader)."""
        return self.hooks

    def start_layer(self) -> int:
        """0: an edge pass needs every writer's output from the embeddings up, so it never resumes higher."""
        return 0

    @contextmanager
    def prepared(self, model: PreparedModel) -> Iterator[None]:
        """Inside the block ``model`` has what the hooks read: its split query/key/value inputs and MLP inputs turned
        on (TransformerLens' ``set_use_split_qkv_input``, ``set_use_hook_mlp_in``); on leaving, by an error too, as
        they were."""
        with reader_inputs(model) as bridge:
            self._w_o = [bridge.blocks[layer].attn.W_O.detach() for layer in range(self.layout.n_layers)]
            self._mean_outputs = [] if self.means is None else self._writers_means(self.means)
            try:
                yield
            finally:
                self._differences, self._gradients, self._pending = [], [], {}

    @contextmanager
    def attached(self, model: PreparedModel) -> Iterator[None]:
        """Inside the block the edge masks act on ``model`` (``prepared``, and the hooks added); on leaving, by an
        error too, as it was."""
        with self.prepared(model), model.hooks(self.hooks):
            yield

    def _writers_means(self, means: UnitMeans) -> list[Tensor]:
        """Each writer block's mean outputs ``[writers, d_model]``: the embeddings' mean, a head's W_O^h mean(z_h) (the
        mean of its write, W_O^h being linear), an MLP's mean."""
        activations = replacement_activations(means, self.layout.n_layers) | {EMBED_HOOK: means.embeddings_mean()}
        device = self._w_o[0].device
        one = {name: value.to(device)[None, None] for name, value in activations.items()}  # one example, one position
        return [block[0].flatten(1) for block in writer_blocks(one, self._w_o)]

    def _shared(self, blocks: list[Tensor]) -> Tensor:
        """``blocks`` joined into one block of differences that readers read through ``SharedBlock``."""
        self._gradients.append(GradientSum())
        return SharedBlock.apply(blocks[0] if len(blocks) == 1 else torch.cat(blocks, dim=1), self._gradients[-1])

    def _write(self, output: Float[Tensor, "batch writer pos_d_model"], closes_layer: bool = False) -> None:
        """Keep a block of writers' outputs (the corrupted pass) or their differences from the corrupted ones (a masked
        pass), each example's writers as the rows of a matrix over its positions and dimensions. An MLP closes its
        layer: the blocks written since the last MLP become one, so a later reader takes one matrix product a layer."""
        if self._standing_aside:
            return
        if self._mean_outputs:  # each writer's mean, the same at every position
            mean = self._mean_outputs[self._written].to(output.device, output.dtype)
            difference = (output.unflatten(2, (-1, mean.shape[-1])) - mean[None, :, None]).flatten(2)
        elif self.replacement is None:
            raise HeurlensError("edge masks replace pruned edges by the writers' outputs on the corrupted input: call "
                                "use_corrupted(model, corrupted batch) before each forward pass")
        else:
            difference = output - self.replacement[self._written].to(output.dtype)
        self._differences.append(self._shared([difference]))
        self._written += 1
        if closes_layer:
            self._join(self._closed)
            self._closed = len(self._differences)
            if self._closed - self._grouped == LAYERS_A_GROUP:  # fewer, larger products for the layers above
                self._join(self._grouped)
                self._closed = self._grouped = len(self._differences)

    def _join(self, first: int) -> None:
        """The blocks from ``first`` on become one."""
        blocks = self._differences[first:]
        del self._differences[first:], self._gradients[first:]
        self._differences.append(self._shared(blocks))

    def _embeddings(self, resid: Float[Tensor, "batch pos d_model"], hook: Any) -> None:
        self._differences, self._gradients, self._pending = [], [], {}  # a new pass
        self._written = self._closed = self._grouped = 0
        self._read_so_far = set()
        self._write(resid.flatten(1)[:, None])  # one writer's row over positions and dimensions

    def _heads(self, layer: int, z: Float[Tensor, "batch pos head d_head"], hook: Any) -> None:
        self._write(head_writes(z, self._w_o[layer]).flatten(2))  # a row per head

    def _mlp(self, out: Float[Tensor, "batch pos d_model"], hook: Any) -> None:
        self._write(out.flatten(1)[:, None], closes_layer=True)

    def _read(self, group: ReaderGroup, x: Tensor, hook: Any) -> Tensor | None:
        """x_r - sum_w (1 - m_wr) (out_w - out_w~) for each reader r of the group (``x``: ``[batch, pos, reader,
        d_model]``, or ``[batch, pos, d_model]`` for a group of one). A layer's query, key and value inputs and its MLP
        read the same writers below the layer: their corrections are computed together when the query input fires
        (one pass over those writers' outputs a layer), the MLP's completed with its own layer's heads."""
        if self._standing_aside:
            return None
        self._check_every_reader_fired(group)
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

    def _check_every_reader_fired(self, group: ReaderGroup) -> None:
        """Refuse a pass in which a reader's hook point stayed silent (its edges would be kept whatever their mask):
        checked when the final residual is read, after every other reader."""
        self._read_so_far.add(group.hook_name)
        if group.hook_name != FINAL_HOOK:
            return
        silent = [g.hook_name for g in self.layout.groups if g.hook_name not in self._read_so_far]
        if silent:
            raise HeurlensError(f"edge masks: {', '.join(silent[:3])}{' ...' if len(silent) > 3 else ''} did not fire "
                                "in this forward pass, so the edges into them would not be masked: this bridge does not run "
                                "the split query/key/value or MLP inputs TransformerLens was asked to turn on; prune "
                                "nodes (--level node)")

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
        for difference, gradient in zip(self._differences, self._gradients):  # [batch, writers, pos * d_model]
            end = start + difference.shape[1]
            if end > last:
                break
            if start >= first:
                correction = BlockRead.apply(dropped[..., start - first:end - first], difference, gradient, correction)
            start = end
        if start != last or correction is None:
            raise HeurlensError(f"a reader fired after {start} writers, not the {last} edge-level pruning expects: this "
                                "architecture's blocks run in another order")
        return correction


def edge_mask_forward(model: PreparedModel, masks: Float[Tensor, "*example edge"], batch: Batch,
                      corrupted: Batch | None = None, means: UnitMeans | None = None) -> Tensor:
    """The model's scores on ``batch`` with the edges masked by ``masks``, pruned edges carrying the writers' outputs
    on ``corrupted`` (both batches on the model's device), or with ``means`` instead their means.

    Args:
        model: a prepared model (``as_model``).
        masks: edge masks, one flat vector over ``EdgeLayout``'s edges or one row per example.
        batch: the batch, on the model's device.
        corrupted: its corrupted batch (corrupt ablation).
        means: the means, with the embeddings' (mean ablation).

    Returns:
        The model's scores."""
    if (corrupted is None) == (means is None):
        raise HeurlensError("give what pruned edges carry: a corrupted batch (corrupt ablation) or means, one of them")
    hooks = EdgeMaskHooks(edge_layout(model), masks, means)
    with hooks.attached(model):
        if corrupted is not None:
            hooks.use_corrupted(model, corrupted)
        return model(**batch)
