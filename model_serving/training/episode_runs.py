"""Rows in runs of consecutive steps of one episode, the runs shuffled.

A screenshot recurs in up to five consecutive rows of an episode (the export's history window),
and the frozen vision tower encodes each distinct screenshot once an optimizer step
(``vision``). Shuffled one by one, a step's rows share almost no screenshot, so every image is
encoded: about 0.47 s of a 7B SFT row's 2.6 s on an H200. ``rows_per_episode_run`` = R cuts each
episode's rows, in step order, into runs of R rows and shuffles the runs instead of the rows.
R consecutive rows bring about R + 4 distinct screenshots instead of 5R, so with R = 8 and the
default eight rows an optimizer step the tower encodes about 12 images where it encoded 40.

The price is a less varied step: its rows come from fewer episodes. R = 1 (the default) keeps
TRL's own shuffle. The order is drawn from the job's seed and the epoch, so a resumed job reads
the same rows in the same order. An episode's last run may be shorter than R; a run may
straddle two optimizer steps.
"""

import random
from collections import defaultdict
from collections.abc import Iterator, Sequence
from typing import Any

COLUMNS = ("episode_id", "step_index")


class NoProvenance(ValueError):
    """The rows do not say which episode and step they come from."""


class EpisodeRuns:
    """A sampler (``torch.utils.data.Sampler``'s protocol) of row indices in shuffled runs."""

    def __init__(self, episodes: Sequence[int], steps: Sequence[int], run: int, seed: int) -> None:
        by_episode: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for row, (episode, step) in enumerate(zip(episodes, steps, strict=True)):
            by_episode[episode].append((step, row))
        self.runs: list[list[int]] = []
        for episode in sorted(by_episode):
            rows = [row for _, row in sorted(by_episode[episode])]
            self.runs += [rows[start : start + run] for start in range(0, len(rows), run)]
        self.rows = len(episodes)
        self.seed = seed
        self.epoch = 0

    @classmethod
    def of(cls, table: Any, run: int, seed: int) -> "EpisodeRuns":
        """The runs of a ``datasets.Dataset`` with the export's provenance columns."""
        missing = [name for name in COLUMNS if name not in table.column_names]
        if missing:
            raise NoProvenance(f"rows_per_episode_run needs the columns {missing} in the rows")
        return cls(list(table["episode_id"]), list(table["step_index"]), run, seed)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def order(self, epoch: int) -> list[int]:
        runs = list(self.runs)
        random.Random(self.seed * 1_000_003 + epoch).shuffle(runs)
        return [row for run in runs for row in run]

    def __iter__(self) -> Iterator[int]:
        return iter(self.order(self.epoch))

    def __len__(self) -> int:
        return self.rows


def trainer_class(base: type, runs: EpisodeRuns) -> type:
    """``base`` (a transformers ``Trainer``) reading its training rows in ``runs``' order."""

    class EpisodeRunsTrainer(base):  # type: ignore[misc, valid-type]
        def _get_train_sampler(self, train_dataset: Any = None) -> EpisodeRuns:
            rows = len(train_dataset if train_dataset is not None else self.train_dataset)
            if rows != len(runs):
                raise ValueError(f"the trainer holds {rows} rows, the episode runs {len(runs)}")
            return runs

    EpisodeRunsTrainer.__name__ = f"EpisodeRuns{base.__name__}"
    return EpisodeRunsTrainer
