"""What data a run trains on, evaluates on, takes its unit means from and scores attention patterns on: decided
here, once, for the NLI set-up and for prompt tasks, so that a library call reruns exactly what a command ran
(``heurlens prune --task ioi --seed 3`` is ``PromptTaskData("ioi", seed=3)``).

One seed convention: ``seed`` draws the data a run learns from (training prompts, the means, pattern prompts) and
``seed + 1`` the prompts it is evaluated on, so the two never share a draw. The NLI set-up's training pairs and
means are the SNLI training pairs the default model was fine-tuned on (sample seed 0, whatever ``seed``); its
evaluation subsets and pattern pairs are drawn with ``seed``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from heurlens.data.nli_setup import PRUNING_BATCH, PRUNING_PAIRS, REFERENCE_PAIRS

if TYPE_CHECKING:  # imported where used: the CLI builds these without loading torch
    from heurlens.data.prompt_tasks import PromptSet
    from heurlens.interventions.means import UnitMeans
    from heurlens.protocols import PreparedModel, Task


@dataclass(frozen=True)
class PromptTaskData:
    """A prompt task ("ioi", "greater-than", "induction" or a .jsonl/.csv file) for a decoder LM."""

    task: str
    examples: int = 200
    seed: int = 0
    batch_size: int = 32

    def prompts(self, model: PreparedModel, seed: int, examples: int | None = None,
                batch_size: int | None = None) -> PromptSet:
        from heurlens.data.prompt_generators import prompt_task_set
        from heurlens.errors import HeurlensError

        if model.labels is not None:
            raise HeurlensError(f"a prompt task (task={self.task}) scores next tokens, but model {model.model_id!r} "
                                f"is a classifier with labels {', '.join(model.labels)}; use a decoder LM "
                                "(name_or_path=smollm2, or a causal LM folder), or the NLI sets without a task")
        return prompt_task_set(self.task, model.tokenizer, model.bridge.cfg.n_ctx, examples or self.examples, seed,
                               batch_size or self.batch_size)

    def train(self, model: PreparedModel) -> PromptSet:
        """The prompts pruning trains on: ``examples`` drawn with ``seed``."""
        return self.prompts(model, self.seed)

    def means(self, model: PreparedModel) -> UnitMeans:
        """Unit means over the training prompts."""
        from heurlens.interventions.means import compute_means

        return compute_means(model, self.train(model))

    def eval_sets(self, model: PreparedModel) -> list[Task]:
        """One set: ``examples`` prompts drawn with ``seed + 1``; a task file whose two draws share prompts is warned
        of, naming how many (``shared_prompts``)."""
        shared = self.shared_prompts()
        if shared:
            from heurlens.runtime.caller_warnings import warn_at_caller

            warn_at_caller(f"the task file {self.task}: its training draw (seed {self.seed}) and its evaluation draw "
                           f"(seed {self.seed + 1}) of {self.examples} prompts share {shared[0]} of its {shared[1]} "
                           "prompts, so those are not held out: give a file with more prompts, or fewer "
                           "--task-examples", UserWarning)
        return [self.prompts(model, self.seed + 1, batch_size=32)]

    def shared_prompts(self) -> tuple[int, int] | None:
        """For a task file: (prompts in both the ``seed`` and the ``seed + 1`` draw, rows in the file), or None when
        they share none (a built-in task draws new prompts each time)."""
        from heurlens.data.prompt_generators import file_draw
        from heurlens.data.prompt_tasks import load_prompt_file

        if Path(self.task).suffix not in (".jsonl", ".csv"):
            return None
        rows = len(load_prompt_file(self.task))
        both = set(file_draw(rows, self.examples, self.seed)) & set(file_draw(rows, self.examples, self.seed + 1))
        return (len(both), rows) if both else None

    def pattern_data(self, model: PreparedModel, examples: int | None = None) -> Task:
        """Prompts (drawn with ``seed``) to score attention patterns on."""
        return self.prompts(model, self.seed, examples, batch_size=32)


@dataclass(frozen=True)
class NliData:
    """The Heuristic Core paper's set-up on offline data: SNLI pairs to prune on and take means over, an
    in-domain set ("snli": SNLI test, or a pair file) and HANS-style subcases to evaluate on."""

    train_examples: int = PRUNING_PAIRS
    batch_size: int = PRUNING_BATCH
    reference_examples: int = REFERENCE_PAIRS
    in_domain: str | Path = "snli"
    in_domain_examples: int | None = 2000
    per_subcase: int = 200
    subcases: tuple[str, ...] | None = None
    seed: int = 0

    def train(self, model: PreparedModel) -> Task:
        from heurlens.data.nli_setup import snli_pruning_data

        return snli_pruning_data(model, self.train_examples, self.batch_size)

    def means(self, model: PreparedModel) -> UnitMeans:
        """Means over ``reference_examples`` SNLI training pairs (cached on disk per model)."""
        from heurlens.data.nli_setup import snli_reference_means

        return snli_reference_means(model, self.reference_examples)

    def eval_sets(self, model: PreparedModel) -> list[Task]:
        from heurlens.data.nli_setup import nli_eval_sets

        return list(nli_eval_sets(model, self.in_domain, self.in_domain_examples, self.per_subcase,
                                  list(self.subcases) if self.subcases else None, self.seed))

    def pattern_data(self, model: PreparedModel, examples: int = 300) -> Task:
        """``examples`` SNLI test pairs (drawn with ``seed``) to score attention patterns on."""
        from heurlens.data.snli import load_snli
        from heurlens.evaluate import tokenize_pairs

        return tokenize_pairs("snli-test", load_snli("test", limit=examples, seed=self.seed), model.tokenizer)
