"""The architecture matrix (issue 67): every architecture of ``architectures.CONFIGS`` x every feature of
``architectures.FEATURES``, each cell a check against an independent computation or a refusal by name
(``architectures.REFUSED``); the last test checks that docs/architectures.md says what the cells measured
(``HEURLENS_WRITE_ARCHITECTURES=1`` writes it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from architectures import CONFIGS, FEATURE_MEANS, FEATURES, REFUSED, build
from test_single_edges import hand_patched

import heurlens
from heurlens.errors import HeurlensError
from heurlens.interventions.edge_masks import edge_mask_forward
from heurlens.interventions.graph import edge_layout
from heurlens.interventions.resumed_passes import ablated_logits
from heurlens.interventions.unit_masks import UnitMaskHooks
from heurlens.interventions.units import UnitLayout, parse_units
from heurlens.runtime.call_context import call_context
from heurlens.tasks import as_task

CLEAN = torch.tensor([[2, 4, 10, 5, 6], [3, 5, 10, 9, 7]])  # word-level tokens, no padding
CORRUPTED = torch.tensor([[3, 9, 10, 4, 6], [2, 4, 10, 9, 8]])
ABLATED = "L0.H1,L1.MLP"
PAGE = Path(__file__).parents[2] / "docs" / "architectures.md"
MEASURED: dict[tuple[str, str], str] = {}  # (architecture, feature) -> "yes" or "refused: why"


def batch(ids):
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    made: dict[str, Path] = {}

    def folder(architecture: str) -> Path:
        if architecture not in made:
            made[architecture] = build(architecture, tmp_path_factory.mktemp(architecture))
        return made[architecture]

    return folder


def by_hand(model, means):
    """L0.H1 and L1.MLP replaced by their means with TransformerLens hooks written here."""
    def head(z, hook):
        z = z.clone()
        z[:, :, 1] = means.heads[0][1].to(z.dtype)
        return z

    def mlp(out, hook):
        return means.mlps[1].to(out.dtype).expand_as(out).clone()

    with torch.no_grad(), model.hooks([("blocks.0.attn.hook_z", head), ("blocks.1.hook_mlp_out", mlp)]):
        return model(**batch(CLEAN))


def check(feature: str, architecture: str, folder: Path) -> None:
    model = heurlens.load_model(folder)
    with torch.no_grad():
        full = model(**batch(CLEAN))
    means = heurlens.compute_means(model, CLEAN)
    if feature == "logits":
        import transformers

        classifier = architecture.endswith("ForSequenceClassification")
        theirs = (transformers.AutoModelForSequenceClassification if classifier
                  else transformers.AutoModelForCausalLM).from_pretrained(folder).eval()
        with torch.no_grad():
            ours = full if classifier else model.bridge(CLEAN)
            torch.testing.assert_close(ours, theirs(CLEAN).logits, atol=1e-4, rtol=1e-4)
    elif feature == "unit means":
        _, cache = model.bridge.run_with_cache(CLEAN)
        for layer in range(model.n_layers):
            torch.testing.assert_close(means.heads[layer], cache[f"blocks.{layer}.attn.hook_z"].mean((0, 1)))
            torch.testing.assert_close(means.mlps[layer], cache[f"blocks.{layer}.hook_mlp_out"].mean((0, 1)))
        torch.testing.assert_close(means.embeddings, cache["blocks.0.hook_resid_pre"].mean((0, 1)))
    elif feature == "unit ablation":
        ours = heurlens.predict_logits(model, CLEAN, fwd_hooks=heurlens.ablation_hooks(model, ABLATED, means=means))
        hand = by_hand(model, means)
        assert (hand - full).abs().max() > 1e-4  # the ablation changes the scores: the comparison can tell
        torch.testing.assert_close(ours, hand, atol=1e-5, rtol=1e-4)
    elif feature == "node masks":
        layout = UnitLayout(model.n_layers, model.n_heads)
        for off, expected in (([], full), (parse_units(ABLATED, model.n_layers, model.n_heads), by_hand(model, means))):
            masks = UnitMaskHooks(means, *layout.mask(off))
            with masks.attached(model), torch.no_grad():
                torch.testing.assert_close(model(**batch(CLEAN)), expected, atol=1e-5, rtol=1e-4)
    elif feature == "resumed pass":
        hooks = heurlens.ablation_hooks(model, "L1.MLP", means=means)
        [resumed] = ablated_logits(model, [(1, hooks)], as_task(model, CLEAN), call_context(model, cache=False))
        whole = heurlens.predict_logits(model, CLEAN, fwd_hooks=hooks)
        assert (whole - full).abs().max() > 1e-4
        torch.testing.assert_close(resumed, whole, atol=1e-5, rtol=1e-4)
    elif feature == "edge masks":
        check_edges(model, full)
    elif feature == "bfloat16":
        low = heurlens.load_model(folder, dtype="bfloat16")
        with torch.no_grad():
            scores = low(**batch(CLEAN)).float()
        assert float((scores - full).abs().max()) <= 0.05 * float(full.max() - full.min())


def check_edges(model, full) -> None:
    layout = edge_layout(model)  # or a refusal by name
    clean, corrupted = batch(CLEAN), batch(CORRUPTED)
    with torch.no_grad():
        torch.testing.assert_close(edge_mask_forward(model, torch.ones(layout.n_edges), clean, corrupted), full,
                                   atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(edge_mask_forward(model, torch.zeros(layout.n_edges), clean, corrupted),
                                   model(**corrupted), atol=1e-5, rtol=1e-4)
        for weight in model.bridge.parameters():  # a query edge of a 0.02-initialised model moves the logits by 1e-5
            weight.mul_(8 if weight.dim() > 1 else 1)
        kv = "KV" if layout.n_kv_heads < layout.n_heads else "H"
        for edge in ("L0.H1->L1.H2.q", f"L0.H1->L1.{kv}0.v", "L0.H3->logits", "L0.MLP->L1.H2.q", "embed->L0.MLP"):
            writer, reader = edge.split("->")
            ours = edge_mask_forward(model, 1 - layout.keep_mask([edge]), clean, corrupted)
            torch.testing.assert_close(ours, hand_patched(model, writer, reader), atol=2e-6, rtol=1e-4,
                                       msg=lambda m, e=edge: f"{e}: {m}")


@pytest.mark.parametrize("feature", FEATURES)
@pytest.mark.parametrize("architecture", list(CONFIGS))
def test_each_architecture_is_right_or_refused_by_name(architecture, feature, folders):
    if (architecture, feature) not in REFUSED:
        check(feature, architecture, folders(architecture))
        MEASURED[architecture, feature] = "yes"
        return
    message, reason = REFUSED[architecture, feature]
    with pytest.raises(HeurlensError, match=message) as refused:
        check(feature, architecture, folders(architecture))
    MEASURED[architecture, feature] = f"refused ({reason})"
    assert "\n" not in str(refused.value)


def page() -> str:
    rows = ["| architecture | " + " | ".join(FEATURES) + " |", "|" + " --- |" * (len(FEATURES) + 1)]
    rows += [f"| `{architecture}` | " + " | ".join(MEASURED[architecture, feature] for feature in FEATURES) + " |"
             for architecture in CONFIGS]
    meanings = "\n".join(f"- **{feature}**: {FEATURE_MEANS[feature]}." for feature in FEATURES)
    return f"""# Architectures

<!-- Written by tests/whole/test_architectures.py from what it measured (HEURLENS_WRITE_ARCHITECTURES=1 writes it). -->

What heurlens was checked to do right on each architecture, on a tiny random model built from the architecture's
transformers config (2 layers, 4 heads; no weights from a hub), and what it refuses by name. A cell is `yes` when
the check below passed (tests/whole/test_architectures.py, in CI's fast set); `refused` when heurlens refuses it by name
before any work, saying why and what to do instead. Grouped-query models (Llama, Mistral, Mixtral, Qwen2/3, Gemma,
Phi-3, OLMo, StableLM here) have 2 key-value heads for 4 query heads.

{chr(10).join(rows)}

What each column checks:

{meanings}

Not tried: every other architecture TransformerLens 4.3 lists (162 in all: encoder-decoders, vision and audio
models, recurrent ones such as RWKV, mixture-of-experts beyond Mixtral, and the rest). heurlens loads decoder LMs that
TransformerLens bridges and transformers builds with `AutoModelForCausalLM`, and refuses by name any whose blocks
have no attention heads (Mamba above; the check is on the bridge's blocks, not on a list of names); a model outside
this table may work, but nothing here says it does.
"""


def test_the_architectures_page_says_what_the_matrix_measured():
    if len(MEASURED) < len(CONFIGS) * len(FEATURES):
        pytest.skip("only part of the matrix ran (-k or -x): the page is checked against a whole run")
    if os.environ.get("HEURLENS_WRITE_ARCHITECTURES") == "1":
        PAGE.write_text(page())
    assert PAGE.read_text() == page(), "docs/architectures.md is stale: HEURLENS_WRITE_ARCHITECTURES=1 rewrites it"
