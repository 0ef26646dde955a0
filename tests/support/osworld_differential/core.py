"""What a generated case is, and the registry of case makers by metric name."""

import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Case:
    """One input, passed to both sides as OSWorld's evaluator passes it:
    ``metric(*args, **options)``. ``difference`` names a deliberate difference (a key of
    ``DIFFERENCES``) that this input shows; such a case is reported, never counted."""

    label: str
    args: tuple[Any, ...]
    options: Mapping[str, Any] = field(default_factory=dict)
    difference: str | None = None


# (seeded random, a folder for the case's files) -> the cases
CaseMaker = Callable[[random.Random, Path], Iterable[Case]]

MAKERS: dict[str, CaseMaker] = {}


def makes(*names: str) -> Callable[[CaseMaker], CaseMaker]:
    """Register a case maker for the named metrics (one maker may serve several)."""

    def register(maker: CaseMaker) -> CaseMaker:
        for name in names:
            MAKERS[name] = maker
        return maker

    return register


def words(rng: random.Random, count: int) -> list[str]:
    """``count`` short words from a small vocabulary, some differing only by case."""
    vocabulary = [
        "alpha",
        "Beta",
        "gamma",
        "delta",
        "Delta",
        "echo",
        "fox",
        "golf",
        "hotel",
        "india",
        "Juliet",
        "kilo",
        "lima",
        "mike",
        "November",
        "oscar",
        "papa",
    ]
    return [rng.choice(vocabulary) for _ in range(count)]
