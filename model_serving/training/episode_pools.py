"""An epoch's rows shuffled within pools of whole episodes, each pool as large as the vision
cache holds.

A screenshot recurs in up to five consecutive rows of an episode (the export's history window).
The frozen vision tower keeps what it encoded in a cache of ``vision_cache_gib`` (``vision``),
so a screenshot is encoded once as long as its rows come while it is still cached. Shuffled
over the whole dataset, an episode's rows are spread over the epoch and a dataset larger than
the cache has its screenshots evicted between their rows: each row's five screenshots are
encoded again (about 0.47 s of a 7B SFT row's 2.6 s on an H200).

So the episodes are shuffled and dealt into pools, each of whole episodes holding no more
screenshots than the cache does (an episode of ``n`` rows has ``n`` screenshots: one new a step),
and the rows of each pool are shuffled among themselves; the pools follow one another. Every
screenshot is then encoded once an epoch, and a step's rows are still drawn from many episodes,
as from a shuffle buffer. A dataset the cache holds whole is one pool: an ordinary shuffle.
An episode longer than a pool is a pool of its own.

The order is drawn from the job's seed and the epoch, so a resumed job reads the same rows in
the same order. Rows without the export's provenance columns are shuffled by TRL as usual.
"""

import random
from collections import defaultdict
from collections.abc import Iterator, Sequence
from typing import Any

COLUMNS = ("episode_id",)


class EpisodePools:
    """A sampler (``torch.utils.data.Sampler``'s protocol) of row indices pooled by episode."""

    def __init__(self, episodes: Sequence[int], rows_per_pool: int, seed: int) -> None:
        by_episode: dict[int, list[int]] = defaultdict(list)
        for row, episode in enumerate(episodes):
            by_episode[episode].append(row)
        self.episodes = [by_episode[episode] for episode in sorted(by_episode)]
        self.rows_per_pool = max(1, rows_per_pool)
        self.rows = len(episodes)
        self.seed = seed
        self.epoch = 0

    @classmethod
    def of(cls, table: Any, rows_per_pool: int, seed: int) -> "EpisodePools | None":
        """The pools of a ``datasets.Dataset``; None where its rows do not name their episode."""
        if any(name not in table.column_names for name in COLUMNS):
            return None
        return cls(list(table["episode_id"]), rows_per_pool, seed)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def pools(self, epoch: int) -> list[list[int]]:
        """The epoch's pools, each a shuffled list of rows."""
        shuffle = random.Random(self.seed * 1_000_003 + epoch).shuffle
        episodes = list(self.episodes)
        shuffle(episodes)
        pools: list[list[int]] = []
        for rows in episodes:
            if pools and len(pools[-1]) + len(rows) <= self.rows_per_pool:
                pools[-1] += rows
            else:
                pools.append(list(rows))
        for pool in pools:
            shuffle(pool)
        return pools

    def order(self, epoch: int) -> list[int]:
        return [row for pool in self.pools(epoch) for row in pool]

    def __iter__(self) -> Iterator[int]:
        return iter(self.order(self.epoch))

    def __len__(self) -> int:
        return self.rows


def rows_per_pool(cache_bytes: int, screenshot_bytes: int) -> int:
    """The screenshots (one a row) a cache of ``cache_bytes`` holds; at least one."""
    return max(1, cache_bytes // max(1, screenshot_bytes))


def trainer_class(base: type, pools: EpisodePools) -> type:
    """``base`` (a transformers ``Trainer``) reading its training rows in ``pools``' order."""

    class EpisodePoolsTrainer(base):  # type: ignore[misc, valid-type]
        def _get_train_sampler(self, train_dataset: Any = None) -> EpisodePools:
            rows = len(train_dataset if train_dataset is not None else self.train_dataset)
            if rows != len(pools):
                raise ValueError(f"the trainer holds {rows} rows, the episode pools {len(pools)}")
            return pools

    EpisodePoolsTrainer.__name__ = f"EpisodePools{base.__name__}"
    return EpisodePoolsTrainer
