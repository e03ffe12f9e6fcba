"""The nodes and edges of the residual-stream graph, typed as TransformerLens 4.3 types them
(``transformer_lens.tools.analysis.attribution_patching.Node``: a kind, a layer, a head), and the names heurlens writes
them under in records and tables (``L0.H1->L1.H0.v``). Which edges a model has, and their order: ``graph``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, cast

from heurlens.errors import HeurlensError
from heurlens.interventions.units import Unit

EMBED, LOGITS = "embed", "logits"
NodeKind = Literal["embed", "attn_head_out", "mlp_out", "q_input", "k_input", "v_input", "mlp_in", "logits"]
WRITER_KINDS = ("embed", "attn_head_out", "mlp_out")  # TransformerLens 4.3's node kinds (attribution_patching.Node)
READER_KINDS = ("q_input", "k_input", "v_input", "mlp_in", "logits")
_INPUT_SUFFIX = {"q_input": "q", "k_input": "k", "v_input": "v"}


@dataclass(frozen=True)
class Node:
    """A node of the residual-stream graph, typed as TransformerLens 4.3 types them (``kind``, ``layer``, ``head``;
    no position: an edge here stands for every position). Writers: ``embed``, ``attn_head_out`` (a head's W_O^h z_h),
    ``mlp_out``; readers: a head's ``q_input``, ``k_input``, ``v_input`` (with grouped-query attention the key and value
    inputs are a key-value head's: ``grouped``, ``head`` its index), a layer's ``mlp_in``, and ``logits``. Written as
    heurlens names them in edges: ``embed``, ``L0.H1``, ``L0.MLP``, ``L1.H0.q``, ``L1.KV0.k``, ``logits``."""

    kind: NodeKind
    layer: int | None = None
    head: int | None = None
    grouped: bool = False

    def __post_init__(self) -> None:
        needs_layer = self.kind not in ("embed", "logits")
        needs_head = self.kind in ("attn_head_out", "q_input", "k_input", "v_input")
        if (self.layer is not None) != needs_layer or (self.head is not None) != needs_head or (
                self.grouped and self.kind not in ("k_input", "v_input")):
            raise HeurlensError(f"an {self.kind} node takes {'a layer' if needs_layer else 'no layer'} and "
                                f"{'a head' if needs_head else 'no head'}, and only key and value inputs are grouped "
                                f"(got layer={self.layer}, head={self.head}, grouped={self.grouped})")

    def __str__(self) -> str:
        if self.kind in ("embed", "logits"):
            return EMBED if self.kind == "embed" else LOGITS
        if self.kind in ("mlp_out", "mlp_in"):
            return f"L{self.layer}.MLP"
        name = f"L{self.layer}.{'KV' if self.grouped else 'H'}{self.head}"
        return name if self.kind == "attn_head_out" else f"{name}.{_INPUT_SUFFIX[self.kind]}"

    @property
    def is_writer(self) -> bool:
        """Whether it adds to the residual stream (embed, a head's output, an MLP's) rather than reads it."""
        return self.kind in WRITER_KINDS

    @property
    def unit(self) -> Unit | None:
        """The head or MLP the node is part of (a grouped key-value input belongs to no one query head: None)."""
        if self.kind in ("mlp_out", "mlp_in"):
            return Unit(cast(int, self.layer))
        if self.head is None or self.grouped:
            return None
        return Unit(cast(int, self.layer), self.head)

    @classmethod
    def parse(cls, name: str, writer: bool) -> Node:
        """The writer (``writer=True``) or reader a name stands for (``L0.MLP`` is either: its output or its input);
        refused by name when it is neither."""
        match = _NODE.match(name.strip())
        if match is None:
            raise HeurlensError(f"cannot read {name!r} as a {'writer' if writer else 'reader'}: writers are embed, "
                                "L<layer>.H<head> and L<layer>.MLP; readers L<layer>.H<head>.q/.k/.v (key-value heads: "
                                "L<layer>.KV<head>.k/.v when grouped), L<layer>.MLP and logits")
        special, layer, mlp, kv, index, suffix = match.groups()
        if special:
            node = cls("embed" if special == EMBED else "logits")
        elif mlp:
            node = cls("mlp_out" if writer else "mlp_in", int(layer))
        else:
            kind = "attn_head_out" if suffix is None else f"{suffix}_input"
            node = cls(cast(NodeKind, kind), int(layer), int(index), grouped=kv is not None)
        if node.is_writer != writer:
            raise HeurlensError(f"{name!r} is a {'writer' if node.is_writer else 'reader'}, not a "
                                f"{'writer' if writer else 'reader'}: write an edge as WRITER->READER, e.g. "
                                "L0.H1->L1.H0.v")
        return node


_NODE = re.compile(r"^(?:(embed|logits)|L(\d+)\.(?:(MLP)|(?:H|(KV))(\d+)(?:\.([qkv]))?))$")


@dataclass(frozen=True)
class Edge:
    """One edge: a writer node into a reader node (``L0.H1->L1.H0.v``)."""

    writer: Node
    reader: Node

    def __post_init__(self) -> None:
        if not isinstance(self.writer, Node) or not isinstance(self.reader, Node):  # Edge("L0.H1", "L1.H0.v") in 0.1.0
            raise HeurlensError(f"Edge({self.writer!r}, {self.reader!r}): an edge is a pair of Nodes; from its name "
                                f"write Edge.parse('{self.writer}->{self.reader}')")
        if not self.writer.is_writer or self.reader.is_writer:
            raise HeurlensError(f"an edge goes from a writer into a reader, not from {self.writer} into {self.reader}")

    def __str__(self) -> str:
        return f"{self.writer}->{self.reader}"

    @classmethod
    def parse(cls, name: str) -> Edge:
        """``"L0.H1->L1.H0.v"`` as an edge (refused by name when it is not one)."""
        match = _EDGE.match(name)
        if match is None:
            raise HeurlensError(f"cannot read {name!r} as an edge: write WRITER->READER, e.g. L0.H1->L1.H0.v")
        return cls(Node.parse(match.group(1), writer=True), Node.parse(match.group(2), writer=False))


_EDGE = re.compile(r"^\s*(\S+)\s*->\s*(\S+)\s*$")
