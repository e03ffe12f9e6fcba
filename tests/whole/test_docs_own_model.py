"""docs/own-model.md runs as written: its Python snippets, in order, in one namespace, on a tiny Llama saved to
a local folder (standing in for a researcher's own model), with no HookedClassifier built by hand and no
private name imported."""

import re
import warnings
from pathlib import Path

import torch

DOC = Path(__file__).parents[2] / "docs" / "own-model.md"


def snippets() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), re.DOTALL)


def test_the_page_uses_only_public_names():
    code = "\n".join(snippets())
    assert "HookedClassifier(" not in code and not re.search(r"import _|\._[a-z]", code)


def test_every_snippet_runs_and_gives_what_the_page_says(tiny_decoder_dirs):
    namespace: dict = {"MODEL_DIR": str(tiny_decoder_dirs["llama"])}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # on a random model where the prune settles is fragile (see the page)
        for code in snippets():
            exec(compile(code, str(DOC), "exec"), namespace)
    table, scan = namespace["table"], namespace["scan"]
    assert list(table["eval_set"]) == ["texts"] and table["kl"].item() > 0
    assert table["delta"].item() == table["ablated_dog_vs_cat"].item() - table["full_dog_vs_cat"].item()
    assert list(scan["ablated"]) == ["L0.H0", "L0.H1", "L0.H2", "L0.H3", "L1.MLP"]
    per_token = namespace["per_token"]  # every real token of the four prompts scored: other values than the last's
    assert per_token["examples"].item() == 4 and per_token["full_dog_vs_cat"].item() != table["full_dog_vs_cat"].item()
    subnetwork = namespace["subnetwork"]
    kept_heads = [u for u in subnetwork.kept if not u.is_mlp]
    assert {str(u) for u in subnetwork.kept} >= {"L0.MLP", "L1.MLP"}  # heads only: every MLP kept
    assert subnetwork.achieved_sparsity == 1 - len(kept_heads) / 8  # the sparsity counts the 8 heads alone
    assert list(namespace["evaluation"]["subnetwork"]) == ["full model", "50% seed 0"]
    assert len(namespace["scores"]) == 8 and list(namespace["scores_on_tokens"]["unit"]) == [
        "L1.H0", "L1.H1", "L1.H2", "L1.H3"]
    assert torch.is_tensor(namespace["tokens"])
