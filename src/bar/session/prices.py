"""What a session cost, from the prices the developer wrote down (``agents.prices``).

A model's price is looked up by its exact name, else by the first pattern (with ``*``)
that matches it; a model with no price has no cost: bar never guesses one. Prices are US
dollars per million tokens; cache reads cost the input price unless one is given, and so
do cache writes.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

from bar.base.record import record
from bar.model.config import Price
from bar.session.events import Usage


@record(frozen=True)
class Budget:
    """Where an agent step is stopped (``bar run --max-tokens/--max-cost``,
    ``agents.budget``); None: no limit."""

    max_tokens: int | None = None
    max_cost_usd: float | None = None

    @property
    def set(self) -> bool:
        return self.max_tokens is not None or self.max_cost_usd is not None


def price_of(prices: tuple[tuple[str, Price], ...], model: str | None) -> Price | None:
    if not model:
        return None
    exact = next((p for name, p in prices if name == model), None)
    if exact is not None:
        return exact
    return next((p for name, p in prices if "*" in name and fnmatchcase(model, name)), None)


def cost(prices: tuple[tuple[str, Price], ...], u: Usage) -> float | None:
    """US dollars of one answer; None when its model has no price."""
    price = price_of(prices, u.model)
    if price is None:
        return None
    read = price.cache_read if price.cache_read is not None else price.input
    write = price.cache_write if price.cache_write is not None else price.input
    total = (
        u.input_tokens * price.input
        + u.output_tokens * price.output
        + u.cache_read_tokens * read
        + u.cache_write_tokens * write
    )
    return round(total / 1_000_000, 6)


def tokens(u: Usage) -> int:
    """Every token the model processed for one answer (what ``--max-tokens`` counts)."""
    return u.input_tokens + u.output_tokens + u.cache_read_tokens + u.cache_write_tokens
