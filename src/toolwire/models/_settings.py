"""Generation settings -> a wire's request fields. Every wire takes the same few sampling settings under its
own names; one it has no field for is dropped with a ``stream-start`` warning rather than an error."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from toolwire.models.base import ModelSettings


@dataclass(frozen=True, slots=True, kw_only=True)
class SettingNames:
    """A wire's field for each sampling setting of :class:`~toolwire.models.base.ModelSettings`; ``None``: the
    wire has none."""

    max_tokens: str
    temperature: str = "temperature"
    top_p: str | None = None
    stop: str | None = None
    seed: str | None = None


def sampling_fields(
    settings: ModelSettings, names: SettingNames, *, wire: str, default_max_tokens: int | None = None
) -> tuple[dict[str, Any], list[str]]:
    """The settings that are set, under the wire's ``names``, and a warning for each one it has no field for.

    ``default_max_tokens`` stands in for an unset ``max_tokens`` (a wire that requires one, a model option).
    """
    values: dict[str, Any] = {  # keyed by the fields of SettingNames
        "max_tokens": settings.max_tokens if settings.max_tokens is not None else default_max_tokens,
        "temperature": settings.temperature,
        "top_p": settings.top_p,
        "stop": list(settings.stop) or None,
        "seed": settings.seed,
    }
    out: dict[str, Any] = {}
    warnings: list[str] = []
    for setting, value in values.items():
        name: str | None = getattr(names, setting)
        if value is None:
            continue
        if name is None:
            warnings.append(f"{setting} is not supported by {wire} and was ignored")
        else:
            out[name] = value
    return out, warnings


__all__ = ["SettingNames", "sampling_fields"]
