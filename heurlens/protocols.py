"""What heurlens needs of a model and of a task, as structural types (``typing.Protocol``), the way
TransformerLens types its own utilities (``transformer_lens.model_protocol``): any object with these members
works, whatever its class.

- ``HookedModel``: a TransformerLens ``TransformerBridge`` (``.bridge``, whose hook points heurlens masks), a
  tokenizer, and a forward pass on a batch that returns one row of scores per example (class logits, or
  next-token logits at the scored position), run with hooks by ``hooks``. ``HookedClassifier`` is one;
  ``heurlens.wrap_bridge(bridge)`` makes one of a researcher's own bridge in one call. ``ModelLike`` (either, or
  a bare bridge) is what every public function takes; inside, heurlens works with a ``PreparedModel`` (the same
  with its shape and identity), made by ``as_model``.
- ``Task``: named, pre-tokenised batches and how a row of scores is judged (``accuracy``). NLI pair sets
  (``EvalSet``), prompt tasks (``PromptSet``) and plain token batches (``TokenSet``, no answers: enough for
  unit means and custom metrics) are all tasks.
- ``Metric``: a function of (scores, task) to a float, evaluated on the full and the ablated model (as
  TransformerLens' ``patching_metric``); ``Loss``: a differentiable function of (masked model's scores, full
  model's scores, the batch's example indices in the task) that pruning minimises.

``is_hooked_model(x)`` and ``is_task(x)`` tell whether an object has a protocol's members, on every Python.
``isinstance`` against a runtime protocol cannot: from Python 3.12 on it looks members up with
``inspect.getattr_static``, which does not see what ``nn.Module.__getattr__`` serves (a ``HookedClassifier``'s
``bridge`` lives in ``_modules``), so the protocols here are not ``runtime_checkable``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

from jaxtyping import Float, Int
from torch import Tensor
from typing_extensions import TypeIs, get_protocol_members

if TYPE_CHECKING:
    from transformer_lens.model_bridge import TransformerBridge

Batch = dict[str, Tensor]  # input_ids, attention_mask, (BERT) token_type_ids, (scoring positions) score_mask
# (hook point name, hook function): the type TransformerLens' run_with_hooks(fwd_hooks=...) takes, so heurlens'
# hooks pass a user's type checker there (a list is invariant: list[tuple[str, HookFunction]] would not)
HookList = list[tuple[str | Callable[..., Any], Callable[..., Any]]]


class HookedModel(Protocol):
    """What a model must have for heurlens to ablate, prune and read it (the cut of TransformerLens' own
    ``model_protocol``: four members). ``bridge``: the TransformerLens ``TransformerBridge`` whose hook points
    (``blocks.{L}.attn.hook_z``, ``blocks.{L}.hook_mlp_out``) heurlens masks and whose ``cfg`` gives the layers and
    heads; ``tokenizer`` (None: data as token ids); a forward pass on a batch (``input_ids``, ``attention_mask``)
    giving one row of scores per example; ``hooks(fwd_hooks)`` running it with hooks.
    ``heurlens.wrap_bridge(bridge)`` makes one of a bare bridge; a bridge itself is accepted everywhere."""

    @property
    def bridge(self) -> TransformerBridge:
        """The TransformerLens bridge whose hook points heurlens masks and whose ``cfg`` gives the shape."""
        ...

    @property
    def tokenizer(self) -> Any:
        """An HF tokenizer for texts (None: the model takes token ids only)."""
        ...

    def __call__(self, input_ids: Int[Tensor, "batch pos"],
                 attention_mask: Int[Tensor, "batch pos"] | None = None) -> Float[Tensor, "batch output"]:
        """One row of scores per example: class logits, or the next-token logits at the scored position. (A model
        of sentence pairs is also given ``token_type_ids=`` when the data has them.)"""
        ...

    def hooks(self, fwd_hooks: HookList) -> AbstractContextManager[Any]:
        """A context in which forward passes run with ``fwd_hooks`` [(hook point name, function)] attached."""
        ...


class PreparedModel(HookedModel, Protocol):
    """A ``HookedModel`` as heurlens works with it inside: with its shape, output names, identity (the disk caches
    and run folders are keyed by ``fingerprint``) and torch's module methods. ``HookedClassifier`` is one;
    ``heurlens.models.classifier.as_model`` makes one of any ``ModelLike``, so a user's model needs none of these."""

    labels: tuple[str, ...] | None  # names of the outputs (None: a next-token model's vocabulary)
    model_id: str

    @property
    def n_layers(self) -> int: ...

    @property
    def n_heads(self) -> int: ...

    @property
    def d_head(self) -> int: ...

    def fingerprint(self) -> str: ...

    def known_fingerprints(self) -> tuple[str, ...]: ...

    def __call__(self, input_ids: Int[Tensor, "batch pos"], attention_mask: Int[Tensor, "batch pos"] | None = None,
                 token_type_ids: Int[Tensor, "batch pos"] | None = None,
                 score_mask: Int[Tensor, "batch pos"] | None = None) -> Float[Tensor, "row output"]:
        """As ``HookedModel``'s; with ``score_mask`` one row per marked position (``heurlens.tasks``)."""
        ...

    def parameters(self, recurse: bool = True) -> Iterator[Any]: ...

    def train(self, mode: bool = True) -> Any: ...

    def eval(self) -> Any: ...


class Task(Protocol):
    """Named, tokenised examples in batches, and how the model's scores on them are judged."""

    name: str
    batches: list[Batch]

    def __len__(self) -> int: ...

    def accuracy(self, scores: Float[Tensor, "example output"], model_labels: tuple[str, ...] | None) -> float:
        """The fraction of examples the scores get right."""
        ...


Metric = Callable[..., "float | Tensor"]
"""A function of the scores ``[row, output]`` to a float or a one-element tensor, as ``metric(scores, task)`` or
TransformerLens' ``metric(scores)`` (``heurlens.metrics``): reported for the full and the ablated model, and, when
differentiable, kept by pruning (``prune(metric=...)``)."""
Metrics = Mapping[str, Metric]
Loss = Callable[[Float[Tensor, "batch output"], Float[Tensor, "batch output"], Int[Tensor, " batch"]], Tensor]
"""A differentiable function (masked scores ``[batch, output]``, full scores, example ids ``[batch]``) -> a
one-element tensor, minimised by pruning in place of the KL to the full model. A row is an example, or with
scoring positions (``heurlens.tasks``) a scored position, and the ids index the task's rows."""
Tasks = Sequence[Task]
ModelLike: TypeAlias = "HookedModel | TransformerBridge"
"""What every public function takes as a model: a ``HookedModel``, or a bare ``TransformerBridge`` (wrapped)."""


def _has_members(obj: object, protocol: type) -> bool:
    """Whether ``obj`` has every member of ``protocol``, looked up as Python code would (``hasattr``, which sees
    ``__getattr__``: an ``nn.Module``'s submodules and parameters)."""
    return all(hasattr(obj, name) for name in get_protocol_members(protocol))


def is_hooked_model(obj: object) -> TypeIs[HookedModel]:
    """Whether ``obj`` has every member of ``HookedModel`` (a ``HookedClassifier``, or a user's own class).

    Args:
        obj: anything.

    Returns:
        True when it is a ``HookedModel`` (a type guard)."""
    return _has_members(obj, HookedModel)


def is_prepared_model(obj: object) -> TypeIs[PreparedModel]:
    """Whether ``obj`` has every member of ``PreparedModel`` (used by heurlens as it is, not adapted)."""
    return _has_members(obj, PreparedModel)


def is_task(obj: object) -> TypeIs[Task]:
    """Whether ``obj`` has every member of ``Task`` (``EvalSet``, ``PromptSet``, ``TokenSet``, or a user's own).

    Args:
        obj: anything.

    Returns:
        True when it is a ``Task`` (a type guard)."""
    return _has_members(obj, Task)


class MaskHooks(Protocol):
    """What training and scoring need of the hooks that mask a model (``UnitMaskHooks``, ``EdgeMaskHooks``): masks
    set before each pass (a flat keep mask, or one row per example), the corrupted batch's activations as what a
    pruned component carries, and the hooks themselves, for a whole block (training) or for one pass."""

    def set_masks(self, flat: Float[Tensor, "*example mask"]) -> None:
        """The masks the next pass applies: a flat keep mask in the layout's order, or one row per example."""
        ...

    def use_corrupted(self, model: PreparedModel, batch: Batch) -> None:
        """Run the corrupted ``batch`` with nothing masked and keep what a pruned component will carry."""
        ...

    def attached(self, model: PreparedModel) -> AbstractContextManager[None]:
        """Inside the block every hook is on ``model`` (and the bridge prepared): for training."""
        ...

    def prepared(self, model: PreparedModel) -> AbstractContextManager[None]:
        """Inside the block the bridge has what the hooks read (edges: its split inputs); no hook added."""
        ...

    @property
    def pass_hooks(self) -> HookList:
        """The hooks one pass with the current masks needs (unit masks: the layers they change)."""
        ...

    def start_layer(self) -> int:
        """The lowest layer the current masks change, where a pass may resume (0: from the embeddings)."""
        ...
