"""Cost estimates from token usage, using the ``genai-prices`` package's maintained price table.

Update path: prices come from the installed ``genai-prices`` release (``pip install -U genai-prices``,
optional extra ``prices``); nothing is fetched at run time. Without the package, or for a model it does
not know, the estimate is ``None`` (unknown), never a guess. The embedded local model costs nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal

from toolwire.messages import Usage

_FREE = frozenset({"local"})
_PROVIDER_IDS = {"bedrock": "aws", "google": "google", "openai": "openai", "anthropic": "anthropic"}


def estimate_cost(provider: str | None, model: str | None, usage: Usage) -> Decimal | None:
    """The price in USD of one model request's usage, or ``None`` when it cannot be known."""
    if provider in _FREE:
        return Decimal(0)
    if not provider or not model:
        return None
    try:
        from genai_prices import Usage as PriceUsage
        from genai_prices import calc_price
    except ImportError:
        return None
    priced = PriceUsage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_tokens or None,
        cache_write_tokens=usage.cache_write_tokens or None,
    )
    try:
        result = calc_price(priced, model_ref=model, provider_id=_PROVIDER_IDS.get(provider, provider))
    except (LookupError, ValueError):
        return None
    return Decimal(result.total_price)


def total_cost(steps: Iterable[tuple[str | None, str | None, Usage]]) -> Decimal | None:
    """Sum over steps; ``None`` if any step's price is unknown (a partial sum would under-report)."""
    total = Decimal(0)
    for provider, model, usage in steps:
        cost = estimate_cost(provider, model, usage)
        if cost is None:
            return None
        total += cost
    return total
