"""Mean activation of every unit (head output ``hook_z``, MLP output ``hook_mlp_out``) over a
reference set, the constant a pruned or ablated unit is replaced by (Heuristic Core paper, Section 2: "the
mean activation over the training data"), and of the embeddings (``blocks.0.hook_resid_pre``), what a pruned edge
out of the embeddings carries under mean ablation (``interventions.edge_masks``). Means run over every non-padding
token.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import torch
from jaxtyping import Float
from safetensors.torch import load_file
from torch import Tensor

from heurlens.errors import HeurlensError
from heurlens.interventions.mask_sites import MaskSite, SiteMeans, head_site, mlp_site
from heurlens.interventions.units import heads_hook_name, mlp_hook_name
from heurlens.models.classifier import as_model
from heurlens.protocols import ModelLike, PreparedModel
from heurlens.runtime.argument_checks import checked
from heurlens.runtime.cache import atomic_save_tensors
from heurlens.runtime.devices import device_of
from heurlens.runtime.model_identity import embedding_sample, same_embeddings
from heurlens.runtime.progress import progress_bar
from heurlens.tasks import TaskLike, as_task

EMBED_HOOK = "blocks.0.hook_resid_pre"  # the embeddings' write into the residual stream (edges' first writer)


@dataclass
class UnitMeans:
    """Mean activation of every head (``[n_heads, d_head]`` per layer) and MLP (``[d_model]``), and of the
    embeddings (``[d_model]``; None in means saved before 2026-11-29: edges cannot be mean-ablated with those)."""

    heads: dict[int, Float[Tensor, "head d_head"]]
    mlps: dict[int, Float[Tensor, " d_model"]]
    source: str  # what the means were taken over
    embeddings: Float[Tensor, " d_model"] | None = None
    model_embeddings: tuple[float, ...] | None = None  # ``embedding_sample`` of the model taken on (None: not known)

    @property
    def _tensors(self) -> list[Tensor]:
        return [*self.heads.values(), *self.mlps.values(), *([] if self.embeddings is None else [self.embeddings])]

    def embeddings_mean(self) -> Float[Tensor, " d_model"]:
        """The embeddings' mean, refused by name when these means have none (saved before 2026-11-29)."""
        if self.embeddings is None:
            raise HeurlensError(f"the means over {self.source} have no mean of the embeddings (means saved before "
                                "2026-11-29), which a pruned edge out of the embeddings carries under mean ablation: "
                                "compute them again (heurlens.compute_means(model, data))")
        return self.embeddings

    def to(self, device: torch.device | str) -> UnitMeans:
        """The same means on ``device`` (itself when they are there already)."""
        if all(t.device == torch.device(device) for t in self._tensors):
            return self
        return UnitMeans({k: v.to(device) for k, v in self.heads.items()},
                         {k: v.to(device) for k, v in self.mlps.items()}, self.source,
                         None if self.embeddings is None else self.embeddings.to(device), self.model_embeddings)

    def save(self, path: Path) -> None:
        """Write the means to ``path`` (safetensors, atomically), with their ``source``."""
        tensors = {f"heads.{layer}": t for layer, t in self.heads.items()}
        tensors |= {f"mlps.{layer}": t for layer, t in self.mlps.items()}
        tensors |= {} if self.embeddings is None else {"embeddings": self.embeddings}
        identity = {} if self.model_embeddings is None else {"model_embeddings": json.dumps(self.model_embeddings)}
        atomic_save_tensors(path, tensors, metadata={"source": self.source, **identity})

    def check_fits(self, model: ModelLike) -> None:
        """Refuse means whose layers or shapes are not ``model``'s, or that were taken on another model of the same
        shape (a sample of its embeddings: ``runtime.model_identity.embedding_sample``), or that hold NaN/inf."""
        model = as_model(model)
        cfg = model.bridge.cfg
        if not all(t.isfinite().all() for t in self._tensors):
            raise HeurlensError(f"the unit means over {self.source} hold NaN or inf values: an ablation with them "
                                "would be NaN. Compute them again: heurlens.compute_means(model, data)")
        heads_ok = sorted(self.heads) == list(range(cfg.n_layers)) and all(
            tuple(t.shape) == (cfg.n_heads, cfg.d_head) for t in self.heads.values())
        mlps_ok = sorted(self.mlps) == list(range(cfg.n_layers)) and all(
            tuple(t.shape) == (cfg.d_model,) for t in self.mlps.values())
        mlps_ok = mlps_ok and (self.embeddings is None or tuple(self.embeddings.shape) == (cfg.d_model,))
        if not (heads_ok and mlps_ok):
            shapes = {f"heads.{k}": tuple(v.shape) for k, v in list(self.heads.items())[:1]}
            raise HeurlensError(
                f"the unit means over {self.source} do not fit model {model.model_id!r} ({cfg.n_layers} layers of "
                f"{cfg.n_heads} heads x {cfg.d_head}, d_model {cfg.d_model}; the means have layers "
                f"{sorted(self.heads)} and shapes like {shapes}): they are another model's. Compute them for this "
                "model: heurlens.compute_means(model, data)")
        sample = embedding_sample(model) if self.model_embeddings is not None else None
        if sample is not None and self.model_embeddings is not None and not same_embeddings(self.model_embeddings,
                                                                                             sample):
            raise HeurlensError(f"the unit means over {self.source} were taken on another model (its embeddings differ "
                                f"from {model.model_id!r}'s): compute them for this model, heurlens.compute_means(model, "
                                "data)")

    @classmethod
    def load(cls, path: Path, repair: str = "delete it and run the command that wrote it again") -> UnitMeans:
        """Read means saved by ``save``; a file that cannot be read whole, or holds NaN or inf, is refused
        with a HeurlensError that names it and says how to ``repair`` it."""
        from safetensors import safe_open

        try:
            with safe_open(str(path), "pt") as handle:
                metadata = handle.metadata() or {}
                source = metadata.get("source", "")
            tensors = load_file(str(path))
        except Exception as error:  # safetensors raises its own error types for truncated or garbled files
            raise HeurlensError(f"the unit means {path} cannot be read ({type(error).__name__}); {repair}") from error
        heads = {int(k.split(".")[1]): v for k, v in tensors.items() if k.startswith("heads.")}
        mlps = {int(k.split(".")[1]): v for k, v in tensors.items() if k.startswith("mlps.")}
        if not heads or heads.keys() != mlps.keys() or not all(t.isfinite().all() for t in tensors.values()):
            raise HeurlensError(f"the unit means {path} are incomplete or hold NaN/inf values; {repair}")
        sample = metadata.get("model_embeddings")
        return cls(heads, mlps, source, tensors.get("embeddings"), None if sample is None else tuple(json.loads(sample)))


@torch.no_grad()
@checked
def compute_means(model: ModelLike, reference: TaskLike, *, prepend_bos: bool | None = None,
                  progress: bool = True) -> UnitMeans:
    """Average ``hook_z`` and ``hook_mlp_out`` of every layer, and the embeddings, over the reference data's real
    tokens. Only tokens
    are needed: ``reference`` is any task, a list of texts (tokenised as TransformerLens' ``to_tokens`` does,
    ``prepend_bos`` as there: None follows the bridge's ``cfg.default_prepend_bos``), or a token tensor
    ``[example, pos]``.

    Args:
        model: a ``HookedModel`` or a bare ``TransformerBridge``.
        reference: a task, a list of texts or a token tensor ``[example, pos]``.
        prepend_bos: for texts, as ``to_tokens``' (None: the bridge's ``cfg.default_prepend_bos``).
        progress: a bar on stderr, a batch a step, once the pass has taken a couple of seconds.

    Returns:
        The ``UnitMeans``: each head's mean ``hook_z``, each MLP's mean output and the embeddings' mean."""
    model = as_model(model)
    reference = as_task(model, reference, prepend_bos)
    sites = [site for layer in range(model.n_layers) for site in (head_site(layer, model.n_heads), mlp_site(layer))]
    sites.append(MaskSite(EMBED_HOOK, 1, "residual"))
    running = SiteMeans(per_position=False)
    current: dict[str, Tensor] = {}  # the attention mask of the batch being run

    def accumulate(name: str, activation: Tensor) -> None:
        running.add(name, activation, current["attention_mask"])

    # the bridge may report an alias as hook.name (hook_z is attn.o.hook_in), so each hook binds its site's name
    with model.hooks([site.hook(partial(accumulate, site.name)) for site in sites]):
        for batch in progress_bar(reference.batches, desc=f"means over {reference.name}", unit="batch",
                                  disable=not progress, short=True):
            current["attention_mask"] = batch.get("attention_mask", torch.ones_like(batch["input_ids"]))
            model(**batch)
    means = {name: mean.cpu() for name, mean in running.means().items()}  # kept on the CPU, moved where used
    heads = {layer: means[heads_hook_name(layer)] for layer in range(model.n_layers)}
    mlps = {layer: means[mlp_hook_name(layer)] for layer in range(model.n_layers)}
    tokens = int(running.counts[heads_hook_name(0)])
    return UnitMeans(heads, mlps, source=f"{reference.name} ({len(reference)} examples, {tokens} tokens)",
                     embeddings=means[EMBED_HOOK], model_embeddings=embedding_sample(model))


def zero_means(model: PreparedModel, device: torch.device | None = None) -> UnitMeans:
    """All-zero replacements on ``device`` (default: the model's): masking with these is zero ablation."""
    cfg, device = model.bridge.cfg, device or device_of(model)
    heads = {layer: torch.zeros(cfg.n_heads, cfg.d_head, device=device) for layer in range(cfg.n_layers)}
    mlps = {layer: torch.zeros(cfg.d_model, device=device) for layer in range(cfg.n_layers)}
    return UnitMeans(heads, mlps, source="zeros", embeddings=torch.zeros(cfg.d_model, device=device))
