"""A model's weights saved and loaded with tied tensors once: safetensors stores no shared memory, and GPT-2's
input and output embeddings are one tensor under two names (the T1 model of a sweep is saved this way)."""

from __future__ import annotations

from torch import Tensor, nn

from heurlens.errors import HeurlensError


def state_without_ties(model: nn.Module) -> dict[str, Tensor]:
    """The model's state with each shared tensor once (safetensors stores no shared memory: GPT-2's tied input and
    output embeddings are one tensor under two names)."""
    seen: set[int] = set()
    state = {}
    for name, tensor in model.state_dict().items():
        if tensor.data_ptr() not in seen:
            seen.add(tensor.data_ptr())
            state[name] = tensor
    return state


def load_tied_state(model: nn.Module, state: dict[str, Tensor]) -> None:
    """Load ``state_without_ties``' output: a name left out must be one that shares its tensor with another."""
    own = model.state_dict()
    missing, unexpected = model.load_state_dict(state, strict=False)
    shared = {name for name in own if sum(t.data_ptr() == own[name].data_ptr() for t in own.values()) > 1}
    if unexpected or set(missing) - shared:
        raise HeurlensError(f"the stored T1 model does not fit this architecture (missing {sorted(set(missing) - shared)}"
                            f", unexpected {sorted(unexpected)}); use another out= or the settings it was made with")
