"""Time per epoch of weight-mask discovery (continuous sparsification): heurlens beside the
`neurosurgeon` package (the Subtask Induction paper's own toolkit), same model, data, masked layers and settings.

Model: an HF GPT-2 decoder of the Subtask Induction paper's arithmetic size (2 layers, 4 heads, d_model 128,
d_mlp 512, numbers 0..99 as tokens); data: 5,000 ``<a> <b> <sep> <c>`` rows of ab mod 7 in
batches of 128; masks on every attention and MLP weight matrix (c_attn, c_proj, c_fc); loss =
last-token cross-entropy + lambda * sum of the soft mask; Adam lr 1e-2; beta (NeuroSurgeon's
temperature) annealed from 1 to 100. Both run the same number of epochs in one process, after a
warm-up epoch each.

Run: .venv/bin/pip install neurosurgeon==0.1.0 matplotlib && .venv/bin/python benchmarks/weight_mask_vs_neurosurgeon.py
(``pip install -e .[bench]`` installs both.)
"""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F

from heurlens.subtask import ArithmeticTask, DiscoverySettings, discover_subnetwork, training_set
from heurlens.subtask.masks import beta_at

EPOCHS, LAMBDA, LR = 3, 1e-5, 1e-2


def gpt2(vocab: int):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=vocab, n_positions=4, n_embd=128, n_layer=2, n_head=4, n_inner=512,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return GPT2LMHeadModel(config).eval()


def heurlens_seconds_per_epoch(batches: list[torch.Tensor], vocab: int) -> float:
    model = gpt2(vocab)

    def loss_fn(forward, batch):
        return F.cross_entropy(forward(batch[:, :-1]).logits[:, -1], batch[:, -1])

    discover_subnetwork(model, loss_fn, batches, DiscoverySettings(epochs=1, l0_lambda=LAMBDA, lr=LR), progress=False)
    start = time.perf_counter()
    discover_subnetwork(model, loss_fn, batches, DiscoverySettings(epochs=EPOCHS, l0_lambda=LAMBDA, lr=LR), progress=False)
    return (time.perf_counter() - start) / EPOCHS


def neurosurgeon_seconds_per_epoch(batches: list[torch.Tensor], vocab: int) -> float:
    from NeuroSurgeon.Models.circuit_model import CircuitConfig, CircuitModel

    model = gpt2(vocab)
    targets = [f"transformer.h.{layer}.{part}" for layer in range(2)
               for part in ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")]
    config = CircuitConfig(mask_method="continuous_sparsification",
                           mask_hparams={"ablation": "none", "mask_unit": "weight", "mask_bias": False,
                                         "mask_init_value": -0.1},
                           target_layers=targets, freeze_base=True, add_l0=False)
    circuit = CircuitModel(config, model)
    optimizer = torch.optim.Adam([p for p in circuit.parameters() if p.requires_grad], lr=LR)

    def epoch(index: int, epochs: int) -> None:
        circuit.temperature = beta_at(index, epochs, 100.0)
        for batch in batches:
            logits = circuit(input_ids=batch[:, :-1]).logits
            loss = F.cross_entropy(logits[:, -1], batch[:, -1]) + LAMBDA * circuit._compute_l0_loss()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    epoch(0, 1)
    start = time.perf_counter()
    for index in range(EPOCHS):
        epoch(index, EPOCHS)
    return (time.perf_counter() - start) / EPOCHS


def main() -> None:
    task = ArithmeticTask("ab", max_value=100)
    data = training_set(task, 0.5, seed=0)
    batches = [data[i:i + 128] for i in range(0, len(data), 128)]
    try:
        import NeuroSurgeon  # noqa: F401
    except ImportError as error:
        raise SystemExit("neurosurgeon is not installed: .venv/bin/pip install neurosurgeon==0.1.0 matplotlib") from error
    ours = heurlens_seconds_per_epoch(batches, task.vocab_size)
    theirs = neurosurgeon_seconds_per_epoch(batches, task.vocab_size)
    print(f"{len(data)} rows in {len(batches)} batches, {EPOCHS} timed epochs each, torch threads {torch.get_num_threads()}")
    print(f"heurlens     {ours:.3f} s/epoch")
    print(f"neurosurgeon {theirs:.3f} s/epoch")
    print(f"ratio heurlens / neurosurgeon = {ours / theirs:.3f}")


if __name__ == "__main__":
    main()
