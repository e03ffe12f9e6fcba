"""The library as a researcher's own code calls it: their bridge, strings for units, texts or tokens for data."""

import math

import pytest
import torch
from transformer_lens.model_bridge import TransformerBridge

import heurlens
from heurlens.errors import HeurlensError
from heurlens.interventions.units import Unit, as_units
from heurlens.models.classifier import as_model
from heurlens.protocols import is_hooked_model, is_prepared_model, is_task
from heurlens.tasks import TokenSet, token_batches


@pytest.fixture(scope="module")
def llama_bridge(tiny_decoder_dirs):
    return TransformerBridge.boot_transformers(str(tiny_decoder_dirs["llama"]), device="cpu")


def test_units_are_accepted_as_strings_units_or_lists_of_either():
    assert as_units("L1.H0,L0.MLP", 2, 4) == [Unit(1, 0), Unit(0)]
    assert as_units(Unit(1, 2), 2, 4) == [Unit(1, 2)]
    assert as_units(["L0.*", Unit(0, 1), "L1.MLP"], 2, 4) == [Unit(0, h) for h in range(4)] + [Unit(1)]
    with pytest.raises(HeurlensError, match="out of range"):
        as_units([Unit(5, 0)], 2, 4)
    with pytest.raises(HeurlensError, match="cannot read 3 as a unit"):
        as_units([3], 2, 4)  # type: ignore[list-item]  # the misuse under test


def test_a_bridge_is_a_model_in_one_call(llama_bridge):
    model = heurlens.wrap_bridge(llama_bridge)
    assert is_hooked_model(model) and model.n_layers == 2 and model.n_heads == 4 and model.labels is None
    assert heurlens.load_model(llama_bridge).fingerprint() == model.fingerprint() == as_model(llama_bridge).fingerprint()
    assert heurlens.HookedClassifier(llama_bridge).fingerprint() == model.fingerprint()
    batch = model.tokenizer(["the man sees the", "a dog"], padding=True, return_tensors="pt")
    scores = model(batch["input_ids"], batch["attention_mask"])
    direct = llama_bridge(batch["input_ids"][1:, :2])[0, -1]  # "a dog" alone: its last real token
    assert scores.shape == (2, 11) and torch.allclose(scores[1], direct, atol=1e-5)
    with pytest.raises(HeurlensError, match="not a model heurlens can use"):
        as_model(torch.nn.Linear(2, 2))  # type: ignore[arg-type]  # the misuse under test


def test_a_model_is_recognised_by_its_members_on_every_python(llama_bridge):
    """From Python 3.12 on, isinstance against a runtime Protocol does not see an nn.Module's submodules (kept in
    ``_modules``, served by ``__getattr__``): every model command failed there. The check goes by hasattr."""
    model = heurlens.wrap_bridge(llama_bridge)
    assert "bridge" not in vars(model) and as_model(model) is model

    class Delegating:  # a user's own structural model: every member but the call served by __getattr__
        def __init__(self, inner):
            self.inner = inner

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def __call__(self, *args, **kwargs):
            return self.inner(*args, **kwargs)

    own = Delegating(model)
    assert as_model(own) is own and heurlens.is_hooked_model(own) and not heurlens.is_hooked_model(llama_bridge)
    assert heurlens.compute_means(own, ["the man sees the"]).heads[0].shape == (4, model.d_head)


def test_a_users_model_needs_only_the_four_members_of_the_protocol(llama_bridge):
    """TransformerLens' own model protocol has 4 members, and so has heurlens': a bridge, a tokenizer, a forward
    pass on a batch, hooks. A plain class with those (no nn.Module, no fingerprint, no labels) gives the tables
    the bridge itself gives."""

    class LastTokenModel:
        def __init__(self, bridge):
            self.bridge = bridge
            self.tokenizer = heurlens.wrap_bridge(bridge).tokenizer

        def __call__(self, input_ids, attention_mask=None):
            logits = self.bridge(input_ids, attention_mask=attention_mask)
            return logits[torch.arange(len(logits)), attention_mask.sum(-1) - 1]

        def hooks(self, fwd_hooks):
            return self.bridge.hooks(fwd_hooks=fwd_hooks)

    own = LastTokenModel(llama_bridge)
    assert heurlens.is_hooked_model(own) and not is_prepared_model(own) and not hasattr(own, "fingerprint")
    texts = ["the man sees the", "a dog sleeps .", "the cat runs"]
    means = heurlens.compute_means(own, texts)
    assert all(torch.equal(means.heads[layer], heurlens.compute_means(llama_bridge, texts).heads[layer])
               for layer in range(2))
    metric = {"first_logit": lambda scores, task: scores[:, 0].mean().item()}
    tables = [heurlens.ablate(model, "L0.H1,L1.MLP", [texts], means=means, metrics=metric, cache=False)
              for model in (own, llama_bridge)]
    assert tables[0].equals(tables[1]) and tables[0]["kl"].item() > 0
    adapted = as_model(own)
    assert adapted is as_model(own) and adapted.model_id == "LastTokenModel" and adapted.n_heads == 4
    assert adapted.fingerprint() == as_model(LastTokenModel(llama_bridge)).fingerprint()  # weights, not the object


def test_means_need_only_tokens_and_agree_across_the_ways_of_giving_them(llama_bridge):
    model = heurlens.wrap_bridge(llama_bridge)
    texts = ["the man sees the", "a dog sleeps", "the cat runs ."]
    from_texts = heurlens.compute_means(llama_bridge, texts, prepend_bos=False)  # the tokenizer's own tokens
    padded = model.tokenizer(texts, padding=True, return_tensors="pt")
    from_tokens = heurlens.compute_means(model, token_batches(padded["input_ids"], attention_mask=padded["attention_mask"]))
    assert from_texts.source == "texts (3 examples, 11 tokens)"  # padding is not counted
    for layer in range(2):
        assert torch.equal(from_texts.heads[layer], from_tokens.heads[layer])
        assert torch.equal(from_texts.mlps[layer], from_tokens.mlps[layer])
    same_length = heurlens.compute_means(model, padded["input_ids"][:1])  # a tensor: every token real
    assert same_length.source == "tokens (1 examples, 4 tokens)"
    with pytest.raises(HeurlensError, match="list of texts, not one string"):
        heurlens.compute_means(model, "the man")


def llama_with_a_bos_tokenizer(out):
    """A tiny Llama whose tokenizer prepends BOS itself (as Llama's and SmolLM2's do; the shared word-level
    tokenizer does not, as GPT-2's does not), saved to ``out``."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import AutoModelForCausalLM, LlamaConfig, PreTrainedTokenizerFast

    words = ["<eos>", "<unk>", "<s>", "the", "a", "man", "dog", "sees", "sleeps", "cat", "runs", "."]
    backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 2)])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", eos_token="<eos>",
                                        unk_token="<unk>")
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(words), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32, bos_token_id=2,
                         eos_token_id=0, architectures=["LlamaForCausalLM"])
    AutoModelForCausalLM.from_config(config).eval().save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_means_over_texts_are_transformerlens_own_over_to_tokens(family, tiny_gpt2_dirs, tmp_path):
    """Texts are tokenised by the bridge's own rules (to_tokens: GPT-2's tokenizer adds no BOS and TransformerLens
    prepends one; Llama's adds it itself), so heurlens' means over strings are the mean of TransformerLens'
    run_with_cache over bridge.to_tokens of each string, and prepend_bos=False leaves the BOS out as there."""
    directory = tiny_gpt2_dirs["lm"] if family == "gpt2" else llama_with_a_bos_tokenizer(tmp_path)
    bridge = TransformerBridge.boot_transformers(str(directory), device="cpu")
    texts = ["the man sees the", "a dog sleeps", "the cat runs ."]
    for prepend_bos in (None, False):
        means = heurlens.compute_means(bridge, texts, prepend_bos=prepend_bos)
        caches = [bridge.run_with_cache(bridge.to_tokens(text, prepend_bos=prepend_bos))[1] for text in texts]
        tokens = sum(len(bridge.to_tokens(text, prepend_bos=prepend_bos)[0]) for text in texts)
        assert tokens == (14 if prepend_bos is None else 11)  # 11 words, and a BOS before each text or none
        assert means.source == f"texts (3 examples, {tokens} tokens)"
        for layer in range(2):
            heads = torch.cat([cache[f"blocks.{layer}.attn.hook_z"][0] for cache in caches]).mean(0)
            mlp = torch.cat([cache[f"blocks.{layer}.hook_mlp_out"][0] for cache in caches]).mean(0)
            torch.testing.assert_close(means.heads[layer], heads, atol=1e-6, rtol=1e-5)
            torch.testing.assert_close(means.mlps[layer], mlp, atol=1e-6, rtol=1e-5)
        embeddings = torch.cat([cache["blocks.0.hook_resid_pre"][0] for cache in caches]).mean(0)
        torch.testing.assert_close(means.embeddings, embeddings, atol=1e-6, rtol=1e-5)


def test_an_nli_classifier_tokenises_texts_as_its_bridge_does(tiny_bert_dir):
    """BERT's tokenizer adds [CLS] and [SEP] itself; prepend_bos=False drops the [CLS] only, as to_tokens does."""
    bert = heurlens.load_model(tiny_bert_dir)
    with_bos = heurlens.tokenize_texts(bert, ["a man sleeps"]).batches[0]["input_ids"]
    without = heurlens.tokenize_texts(bert, ["a man sleeps"], prepend_bos=False).batches[0]["input_ids"]
    cls, sep = bert.tokenizer.cls_token_id, bert.tokenizer.sep_token_id
    assert with_bos[0, 0] == cls and with_bos[0, -1] == sep and torch.equal(without, with_bos[:, 1:])
    from heurlens.data.prompt_tasks import PromptExample, tokenize_prompt_task

    prompts = tokenize_prompt_task("p", [PromptExample("a man", " sleeps")], bert.tokenizer, 512,
                                   add_special_tokens=False)
    assert prompts.batches[0]["input_ids"][0, -1] == bert.tokenizer.convert_tokens_to_ids("man")


def test_a_token_set_has_no_accuracy_and_is_a_task(llama_bridge):
    data = heurlens.tokenize_texts(heurlens.wrap_bridge(llama_bridge), ["the man", "a dog sees"])
    assert is_task(data) and isinstance(data, TokenSet) and len(data) == 2
    with pytest.raises(HeurlensError, match="no labels or answers"):
        heurlens.ablate(llama_bridge, "L0.H0", [data], method="zero")


def test_means_of_another_model_are_refused_by_name(llama_bridge, random_bert_dir):
    bert = heurlens.load_model(random_bert_dir(3, 4))  # 3 layers: the Llama has 2
    means = heurlens.compute_means(bert, ["a man sleeps"])
    with pytest.raises(HeurlensError, match="do not fit model .*another model's"):
        heurlens.ablate(llama_bridge, "L0.H0", [["the man"]], means=means, metrics={})


def test_non_finite_pruning_settings_are_refused():
    for value in (math.nan, math.inf):
        with pytest.raises(HeurlensError, match="log_alpha_init = .* is not a finite number"):
            heurlens.PruneSettings(log_alpha_init=value)


def test_the_ablated_context_manager_masks_inside_and_restores_the_model_even_after_an_error(llama_bridge):
    model = heurlens.wrap_bridge(llama_bridge)
    batch = model.tokenizer(["the man sees the", "a dog"], padding=True, return_tensors="pt")
    batch = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    means = heurlens.compute_means(model, ["the man sees the dog", "a cat runs"])
    full = model(**batch)
    with model.hooks(heurlens.ablation_hooks(model, "L0.H1,L1.MLP", method="mean", means=means)):
        by_hooks = model(**batch)
    with heurlens.ablated(llama_bridge, ["L0.H1", "L1.MLP"], means=means) as ablated_model:
        inside = ablated_model(**batch)
    assert torch.equal(inside, by_hooks) and not torch.allclose(inside, full)
    with pytest.raises(RuntimeError, match="stop"), heurlens.ablated(model, "L0.*", method="zero"):
        raise RuntimeError("stop")
    assert torch.equal(model(**batch), full)  # no hook left behind


def test_a_transformerlens_native_bridge_works_like_any_other(tmp_path):
    from transformer_lens.model_bridge.sources.native import boot

    bridge = boot({"n_layers": 2, "d_model": 16, "n_heads": 2, "d_head": 8, "d_mlp": 32, "d_vocab": 10, "n_ctx": 8,
                   "act_fn": "relu", "seed": 0})  # no tokenizer: data as token ids
    tokens = torch.randint(0, 10, (6, 5), generator=torch.Generator().manual_seed(0))
    means = heurlens.compute_means(bridge, tokens)
    last_token_mean = {"mean_logit_0": lambda scores, task: scores[:, 0].mean().item()}
    table = heurlens.ablate(bridge, "L1.H0", [tokens], means=means, metrics=last_token_mean)
    by_hand = bridge(tokens)[:, -1, 0].mean().item()  # every row is real: the last position is scored
    assert table["full_mean_logit_0"].item() == pytest.approx(by_hand, abs=1e-5) and table["kl"].item() > 0


def test_library_misuse_is_answered_by_name(llama_bridge):
    """Found by probing the library as a newcomer would: each ended in another library's error, or trained on."""
    from heurlens.analysis import group_superadditivity, single_unit_scan

    model = heurlens.wrap_bridge(llama_bridge)
    with pytest.raises(HeurlensError, match=r"text 1 \(''\) has no tokens"):
        heurlens.compute_means(model, ["the man", ""], prepend_bos=False)
    means = heurlens.compute_means(model, ["the man sees the dog"])
    metrics = {"first": lambda scores, task: float(scores[:, 0].mean())}
    with pytest.raises(HeurlensError, match="at least one unit to scan"):
        single_unit_scan(model, [], [["the man"]], means=means, progress=False, metrics=metrics)
    with pytest.raises(HeurlensError, match="at least two units"):
        group_superadditivity(model, "L0.H1", [["the man"]], means=means, progress=False, metrics=metrics)
    data = heurlens.tokenize_texts(model, ["the man sees the", "a dog sleeps"])
    config = heurlens.PruneSettings(total_steps=20, warmup_steps=5)
    with pytest.raises(HeurlensError, match="one-element torch tensor .*got a float"):
        heurlens.prune(model, data, sparsity=0.5, seeds=[0], config=config, progress=False,
                       loss=lambda scores, full, ids: (scores - full).pow(2).mean().item())  # type: ignore
    steps: list[int] = []

    def nan_after_three(scores, full, ids):
        steps.append(1)
        return (scores - full).pow(2).mean() * (float("nan") if len(steps) > 3 else 1.0)

    with pytest.raises(HeurlensError, match=r"the loss was \[nan\] at step 4 of 20"):
        heurlens.prune(model, data, sparsity=0.5, seeds=[0], config=config, progress=False, loss=nan_after_three)


@pytest.mark.filterwarnings("ignore:subnetwork 50% seed", "ignore:sparsity 0.50 cannot be reached")  # 3 steps
def test_prune_batches_texts_and_tokens_by_its_batch_size_and_leaves_a_task_as_built(llama_bridge):
    """batch_size sets the micro-batch of data prune batches itself (texts, a token tensor); a task brings its own
    batches, and asking to rebatch one is refused by name rather than ignored."""
    model = heurlens.wrap_bridge(llama_bridge)
    rows: list[int] = []

    def fit(scores, full_scores, example_ids):
        rows.append(len(example_ids))
        return (scores - full_scores).pow(2).mean()

    config = heurlens.PruneSettings(total_steps=3, warmup_steps=1)
    texts = ["the man sees the", "a dog sleeps", "the dog sees a man", "a man sleeps", "the dog"]
    for data, batch_size, sizes in ((texts, 2, {2, 1}), (texts, None, {5}),
                                    (torch.randint(3, 10, (7, 4)), 3, {3, 1}), (torch.randint(3, 10, (7, 4)), None, {7})):
        rows.clear()
        heurlens.prune(model, data, sparsity=0.5, seeds=[0], config=config, loss=fit, progress=False, cache=False,
                       batch_size=batch_size)
        assert set(rows) <= sizes and sizes & set(rows), (batch_size, rows)
    task = heurlens.tokenize_texts(model, texts, batch_size=2)
    with pytest.raises(HeurlensError, match="cannot rebatch a task .*give it when building the task"):
        heurlens.prune(model, task, sparsity=0.5, seeds=[0], config=config, loss=fit, progress=False, batch_size=4)


def test_ablation_hooks_take_a_bridge_as_the_other_functions_do(llama_bridge):
    """TransformerLens' own way: hooks from heurlens, run by the bridge's run_with_hooks; the same logits as
    heurlens' ablated() context on the wrapped model, and other than the unablated bridge's."""
    texts = ["the man sees the", "a dog sleeps ."]
    means = heurlens.compute_means(llama_bridge, texts)
    tokens = heurlens.wrap_bridge(llama_bridge).tokenizer(["the man sees the"], return_tensors="pt")["input_ids"]
    hooks = heurlens.ablation_hooks(llama_bridge, "L0.H1,L1.MLP", means=means)
    hooked = llama_bridge.run_with_hooks(tokens, fwd_hooks=hooks)
    with heurlens.ablated(llama_bridge, "L0.H1,L1.MLP", means=means) as model:
        via_context = model(tokens)
    torch.testing.assert_close(hooked[:, -1], via_context, atol=1e-6, rtol=0)
    assert not torch.allclose(hooked, llama_bridge(tokens), atol=1e-4)


def test_the_callers_tokenizer_is_left_as_it_was(tiny_decoder_dirs):
    """wrap_bridge set the caller's own tokenizer to pad with EOS on the right; heurlens now pads a copy."""
    bridge = TransformerBridge.boot_transformers(str(tiny_decoder_dirs["llama"]), device="cpu")
    bridge.tokenizer.padding_side = "left"
    bridge.tokenizer.pad_token = None
    texts = ["the man sees the", "a dog"]
    means = heurlens.compute_means(bridge, texts)
    heurlens.ablate(bridge, "L0.H1", [texts], means=means, metrics={})
    assert bridge.tokenizer.padding_side == "left" and bridge.tokenizer.pad_token is None
    model = heurlens.wrap_bridge(bridge)
    assert model.tokenizer.padding_side == "right" and model.tokenizer.pad_token == model.tokenizer.eos_token
    batch = model.tokenizer(texts, padding=True, return_tensors="pt")
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 1], [1, 1, 0, 0]]  # right padding, the last real token scored


def test_every_position_or_a_mask_per_example_can_be_scored(llama_bridge, tmp_path, monkeypatch):
    """positions="all": one row of scores per real token, so a metric and the KL average over every position (a
    copying or induction task); a 0/1 mask per example scores the positions it marks. Checked against the bridge's
    own logits, each example run alone and unpadded, with the ablation hooks through run_with_hooks."""
    monkeypatch.setenv("HEURLENS_CACHE", str(tmp_path))
    tokens = torch.tensor([[2, 4, 10, 2, 5], [3, 5, 7, 8, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 1, 0]])
    means = heurlens.compute_means(llama_bridge, heurlens.token_batches(tokens, attention_mask=mask))
    hooks = heurlens.ablation_hooks(llama_bridge, "L0.H1,L1.MLP", means=means)
    alone = [tokens[:1], tokens[1:, :4]]
    full = torch.cat([llama_bridge(example)[0] for example in alone])  # [9 real tokens, vocab]
    ablated = torch.cat([llama_bridge.run_with_hooks(example, fwd_hooks=hooks)[0] for example in alone])
    every = heurlens.token_batches(tokens, attention_mask=mask, positions="all")
    metric = {"logit_0": lambda scores, task: scores[:, 0].mean().item()}
    for cache in (False, True, True):  # in memory; written to the cache; read back from it
        row = heurlens.ablate(llama_bridge, "L0.H1,L1.MLP", [every], means=means, metrics=metric, cache=cache)
        assert row["full_logit_0"].item() == pytest.approx(full[:, 0].mean().item(), abs=1e-5)
        assert row["ablated_logit_0"].item() == pytest.approx(ablated[:, 0].mean().item(), abs=1e-5)
        by_hand = (full.softmax(-1) * (full.log_softmax(-1) - ablated.log_softmax(-1))).sum(-1).mean()
        assert row["kl"].item() == pytest.approx(by_hand.item(), abs=1e-6)
    marked = torch.zeros_like(tokens)
    marked[0, 2] = marked[1, 1] = marked[1, 3] = 1
    scores = heurlens.predict_logits(llama_bridge, heurlens.token_batches(tokens, attention_mask=mask,
                                                                          positions=marked))
    torch.testing.assert_close(scores, full[[2, 5 + 1, 5 + 3]], atol=1e-5, rtol=0)
    with pytest.raises(HeurlensError, match="mark padding"):
        heurlens.token_batches(tokens, attention_mask=mask, positions=mask.roll(1, -1))
    texts = heurlens.tokenize_texts(llama_bridge, ["the man sees", "a dog"], positions="all")
    assert [int(batch["score_mask"].sum()) for batch in texts.batches] == [3 + 2 + 2]  # a BOS before each text


@pytest.mark.filterwarnings("ignore:subnetwork 50% seed")  # a random model: where the masks settle is no matter here
def test_pruning_scores_every_position_and_seeds_stack_as_they_do_alone(llama_bridge):
    """With positions="all" the loss gets one row per scored token and ids that index them; the stacked seeds'
    per-example masks still cover whole examples, so stacking gives what the seeds give one by one."""
    tokens = torch.tensor([[2, 4, 10, 2, 5], [3, 5, 7, 8, 0], [2, 9, 6, 8, 0], [3, 4, 10, 3, 5]])
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 1, 0], [1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    data = heurlens.token_batches(tokens, attention_mask=mask, batch_size=2, positions="all")
    seen: list[tuple[int, list[int]]] = []

    def fit(scores, full_scores, example_ids):
        seen.append((scores.shape[0], example_ids.tolist()))
        return (scores - full_scores).pow(2).mean()

    config = heurlens.PruneSettings(total_steps=30, warmup_steps=10, log_alpha_init=0.5)
    alone = heurlens.prune(llama_bridge, data, sparsity=0.5, seeds=[0, 1], config=config, loss=fit, progress=False,
                           stack_seeds=False, cache=False)
    assert {rows for rows, _ in seen} == {9, 8} and {tuple(ids) for _, ids in seen} == {
        tuple(range(9)), tuple(range(9, 17))}  # batches of 5+4 and 3+5 real tokens
    stacked = heurlens.prune(llama_bridge, data, sparsity=0.5, seeds=[0, 1], config=config, loss=fit, progress=False,
                             stack_seeds=True, cache=False)
    assert all(0 < len(subnetwork.kept) < 10 for subnetwork in alone)  # the masks moved: some units pruned
    for one, together in zip(alone, stacked):
        assert one.kept == together.kept
        torch.testing.assert_close(one.log_alpha_heads, together.log_alpha_heads, atol=1e-4, rtol=0)
