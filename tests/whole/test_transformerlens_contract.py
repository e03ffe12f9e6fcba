"""What heurlens relies on in TransformerLens, checked so that an upgrade fails loudly (issue 67): no private
(``_``-named) TransformerLens module is imported; a caller's outer hooks survive heurlens' inner hook contexts
(TransformerLens 4 changed how ``hooks()`` removes temporary hooks, PR 1638); the pinned version."""

from __future__ import annotations

import ast
from pathlib import Path

import torch

import heurlens

PACKAGE = Path(heurlens.__file__).parent
TOKENS = torch.tensor([[2, 4, 10, 5, 6], [3, 5, 10, 9, 7]])


def transformerlens_imports(source: str) -> list[str]:
    """Every ``transformer_lens...`` module a Python source imports from (``import`` and ``from ... import``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("transformer_lens"):
            found.append(node.module or "")
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if alias.name.startswith("transformer_lens")]
    return found


def test_no_private_transformerlens_module_is_imported():
    private = {f"{path.relative_to(PACKAGE)}: {module}" for path in PACKAGE.rglob("*.py")
               for module in transformerlens_imports(path.read_text())
               if any(part.startswith("_") for part in module.split("."))}
    assert not private, private
    # the check finds one when it is there
    assert transformerlens_imports("from transformer_lens.model_bridge.sources._bridge_builder import x\n") == [
        "transformer_lens.model_bridge.sources._bridge_builder"]


def test_an_outer_hook_survives_heurlens_inner_hook_contexts_and_run_with_cache(tiny_decoder_dirs):
    from heurlens.interventions.edge_masks import edge_mask_forward
    from heurlens.interventions.graph import edge_layout

    model = heurlens.load_model(tiny_decoder_dirs["llama"])
    batch = {"input_ids": TOKENS, "attention_mask": torch.ones_like(TOKENS)}
    fired: list[str] = []

    def outer(x, hook):
        fired.append(hook.name)

    means = heurlens.compute_means(model, TOKENS)
    with model.bridge.hooks(fwd_hooks=[("blocks.1.hook_mlp_out", outer)]):
        with torch.no_grad():
            model(**batch)
        assert fired == ["blocks.1.mlp.hook_out"]  # the alias's hook point
        heurlens.predict_logits(model, TOKENS, fwd_hooks=heurlens.ablation_hooks(model, "L1.H0", means=means))
        with heurlens.ablated(model, "L0.MLP", means=means), torch.no_grad():
            model(**batch)
        layout = edge_layout(model)
        with torch.no_grad():
            edge_mask_forward(model, torch.ones(layout.n_edges), batch, batch)
        model.bridge.run_with_cache(TOKENS)
        fired.clear()
        with torch.no_grad():
            model(**batch)
        assert fired == ["blocks.1.mlp.hook_out"]  # still there after every inner context closed
    fired.clear()
    with torch.no_grad():
        model(**batch)
    assert fired == []  # and gone with its own context


def test_transformerlens_is_pinned_until_the_architecture_matrix_passes_on_a_newer_release():
    from importlib.metadata import version

    pyproject = (PACKAGE.parent / "pyproject.toml").read_text()
    assert '"transformer-lens==4.3.0"' in pyproject and version("transformer-lens") == "4.3.0"
