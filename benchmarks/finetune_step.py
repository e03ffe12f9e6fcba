"""Fine-tuning step time on SNLI: today's default loop (random batches, float32) against length-sorted batches
(``FinetuneSettings.length_batches``, what ``--preset paper-length`` uses) and against bfloat16 autocast.

Run: .venv/bin/python benchmarks/finetune_step.py [--threads 1] [--steps 20] [--rounds 3]

Every side trains the same MiniLM + 3-way head (one copy per side, AdamW lr 2e-5, batch 32, max length 128) on
batches of epoch 0 of all ~100k SNLI training pairs as ``heurlens.models.nli_finetune.epoch_batches`` draws them
(each side its own batches, the same ones every round); a step is tokenising the batch, forward, backward and the
AdamW step. Rounds alternate the sides; the median step time of each side, the ratios to today's loop and the
padding each side carries are printed.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=20, help="Timed steps per side and round (2 more warm up).")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    from transformers import AutoTokenizer, BertForSequenceClassification

    from heurlens.data.snli import load_snli
    from heurlens.models.nli_finetune import epoch_batches
    from heurlens.runtime.assets import minilm_dir

    tokenizer = AutoTokenizer.from_pretrained(minilm_dir())
    train = load_snli("train")
    lengths = [len(ids) for ids in tokenizer(list(train["premise"]), list(train["hypothesis"]), truncation=True,
                                             max_length=128)["input_ids"]]
    sides = {"today (random batches, float32)": (False, False),
             "length-sorted batches, float32": (True, False),
             "random batches, bfloat16 autocast": (False, True)}
    state = {}
    for name, (sorted_batches, bf16) in sides.items():
        torch.manual_seed(0)
        model = BertForSequenceClassification.from_pretrained(minilm_dir(), num_labels=3).train()
        batches = epoch_batches(lengths, 32, seed=0, epoch=0, length_batches=sorted_batches)[:args.steps + 2]
        state[name] = (model, torch.optim.AdamW(model.parameters(), lr=2e-5), batches, bf16)
    times: dict[str, list[float]] = {name: [] for name in sides}
    padding = {}
    for _ in range(args.rounds):
        for name, (model, optimizer, batches, bf16) in state.items():
            seconds, real, padded = [], 0, 0
            for step, index in enumerate(batches):
                start = time.perf_counter()
                rows = train[index]
                batch = tokenizer(rows["premise"], rows["hypothesis"], truncation=True, max_length=128,
                                  padding=True, return_tensors="pt")
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                    loss = model(**batch, labels=torch.tensor(rows["label"])).loss
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
                if step >= 2:
                    seconds.append(time.perf_counter() - start)
                    real += int(batch["attention_mask"].sum())
                    padded += batch["input_ids"].numel()
            times[name].append(statistics.median(seconds))
            padding[name] = 1 - real / padded
    baseline = statistics.median(times["today (random batches, float32)"])
    print(f"fine-tuning step, MiniLM-L6 + 3-way head, batch 32, {args.threads} thread(s), median of {args.rounds} "
          f"rounds x {args.steps} steps")
    for name in sides:
        median = statistics.median(times[name])
        print(f"{name:36s} {median:6.3f} s/step  {baseline / median:5.2f}x today's speed  "
              f"padding {padding[name]:.0%}")


if __name__ == "__main__":
    main()
