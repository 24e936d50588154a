"""Compaction: what a step SENDS shrinks when the history outgrows its budget or the model's context window.

The store keeps the whole history; only the request changes, in this order:

1. **A stored summary applies.** The session's latest :class:`~toolwire.store.records.CompactionRecord`
   replaces the messages before its first kept message with its summary, in the instructions (valid for
   every provider: no message of another role is invented, the first message stays the user's).
2. **Old tool results shrink.** When the request would pass its budget, ``min(threshold x window,
   max_request_tokens)`` (either one alone when the other is unknown or ``None``), the results of earlier
   turns, oldest first and only the large ones, are replaced by a short stand-in, in blocks (see
   :func:`_trim_cuts`). Every call keeps a result and every part keeps its provider metadata
   (signatures), so the request stays valid for any adapter. This is recomputed at each step from the
   history, never stored.
3. **Older turns become a summary.** Still too long with every whole block trimmed: the turns before the most recent ones are summarised
   by the agent's model (or ``Compaction(summary_model=...)``), stored as a record of its own (what it
   covers, the summary, the model, its usage) through the run's recorder, announced (``compaction``) and
   reused by every later step and turn, in any process or replica. A summary cuts at a user turn, so no
   call is separated from its result.
4. **The summariser failed** (an error, or its own request too long): the oldest turns are left out of
   this request instead; nothing is stored and the session goes on.

The recent turns (``keep_recent_turns``, the current one included) are never summarised or left out, and their
results are trimmed only to fit the window's share, never for ``max_request_tokens`` alone.

A provider's :class:`~toolwire.errors.ContextLengthExceeded` asks for the same with ``force`` (the model
step asks again once): the window it states is learned, and the request is cut to the threshold of it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from toolwire.agent.config import Compaction
from toolwire.errors import ContextLengthExceeded
from toolwire.events import AgentEvent, CompactionEvent
from toolwire.messages import Message, TextPart, ToolResultPart, Usage, new_id
from toolwire.models._builder import collect
from toolwire.models._tokens import DEFAULT_CHARS_PER_TOKEN, Sizes, chars_per_token, estimate_request_tokens
from toolwire.models.base import Model, ModelRequest, ModelSettings
from toolwire.models.fallback import FallbackModel
from toolwire.store.records import CompactionRecord

logger = logging.getLogger("toolwire.agent")

SUMMARY_INSTRUCTIONS = (
    "You write the memory of a conversation between a user and an assistant that uses tools. Summarise the "
    "conversation below so the assistant can go on without it: the user's goals and preferences, facts "
    "learned (names, numbers, ids, dates exactly as written), what tools returned that still matters, "
    "decisions made and what is still open. Write plain sentences, no preamble, at most 300 words."
)
SUMMARY_HEADING = (
    "Summary of the earlier conversation (older messages were summarised to fit the context window):"
)
STAND_IN = "[{chars} characters of this tool result were left out to fit the context window]"
TRIM_BLOCK_SHARE = 0.4
"""The share of the budget one block of trimmed results saves: the trimming boundary moves by that much at a
time, so it moves rarely and the provider's cache keeps serving the prefix in between."""
_MIN_TRIMMED_CHARS = 400
"""A result shorter than this is not worth its stand-in."""


class Compactor:
    """The compaction of one run's requests (see the module docstring)."""

    def __init__(self, settings: Compaction, latest: CompactionRecord | None) -> None:
        self._settings = settings
        self.latest = latest
        """The session's latest stored summary (read when the run opened, then this run's own)."""
        self.sizes = Sizes()
        """The run's measures of its messages: each measured once, not at every step."""
        self._unfitted: ModelRequest | None = None
        """The last request as the step built it, before it was fitted."""

    async def fit(
        self,
        model: Model,
        request: ModelRequest,
        recorder: Any,
        *,
        refused: ContextLengthExceeded | None = None,
    ) -> tuple[ModelRequest, list[AgentEvent]]:
        """``request`` as it fits ``model``'s window, and the events to publish (a new summary's).

        ``refused``: the provider refused ``request`` (already fitted by an earlier call) as too long: the
        step's own request is compacted again, to fit the window the refusal taught, scaled by how far the
        estimate fell short of the provider's count when it stated both."""
        force = refused is not None
        if force and self._unfitted is not None:
            request = self._unfitted
        self._unfitted = request
        request = self._with_summary(request)
        window, most = _window(model), self._settings.max_request_tokens
        if window is None and most is None and not force:
            return request, []  # unknown (never learned): sent as it is; its error teaches the window
        before = estimate_request_tokens(model, request, self.sizes)
        # The window's share is the hard limit: the only one the recent turns are ever trimmed for.
        hard = int(window * self._settings.threshold) if window is not None else None
        limits = [limit for limit in (hard, most) if limit is not None]
        # A refusal that stated no window, and no budget of its own: a third shorter than what was refused.
        budget = min(limits) if limits else int(before * 0.67)
        if refused is not None and refused.requested and refused.limit:
            # The provider counts differently: the budget in the estimate's own units.
            budget = min(budget, int(refused.limit * self._settings.threshold * before / refused.requested))
        if before <= budget:
            if not force:
                return request, []
            budget = int(before * 0.67)  # refused though it looked short enough: the estimate was low
        if force:
            hard = budget  # what the provider refused is the hard limit now
        per_token = chars_per_token(model)
        # Refused by the provider: only the current turn is kept whole.
        keep = 1 if force else self._settings.keep_recent_turns
        if self._settings.trim_tool_results:
            # With summaries on, trimming stops at the last whole block: past it the boundary would move
            # with every turn (a cache miss of the request at each), where a summary moves it once.
            whole_blocks = self._settings.summarize
            request, before = _trim_results(
                request, before, budget, per_token, keep, whole_blocks=whole_blocks, recent_limit=hard
            )
            if before <= budget:
                return request, []
        # Still too long with the earlier results stand-ins: only now is a summary written.
        cut = _turn_cut(request.messages, keep)
        if cut <= 0:
            return request, []  # only recent turns left: nothing older to leave out
        if self._settings.summarize:
            try:
                record, events = await self._summarise(model, request, cut, before, recorder)
            except Exception as exc:  # never a broken session: leave the oldest turns out instead
                logger.warning(
                    "compaction: the summary failed (%s); older turns are left out of this request", exc
                )
            else:
                self.latest = record
                return self._fitted_again(model, hard, keep), events
        shorter = replace(request, messages=request.messages[cut:])
        if force and self._unfitted is not None:  # without the summary, which may be what does not fit
            shorter = replace(shorter, instructions=self._unfitted.instructions)
        return shorter, []

    @property
    def budgeted(self) -> bool:
        """A request budget of its own (``max_request_tokens``): every step is fitted, even when the model's
        window is unknown."""
        return self._settings.max_request_tokens is not None

    def _fitted_again(self, model: Model, hard: int | None, keep: int) -> ModelRequest:
        """The step's request from the new summary on, its kept turns' results trimmed if it still passes
        the hard limit (the window's share; never for the budget alone)."""
        assert self._unfitted is not None
        request = self._with_summary(self._unfitted)
        tokens = estimate_request_tokens(model, request, self.sizes)
        if self._settings.trim_tool_results and hard is not None and tokens > hard:
            request, _ = _trim_results(request, tokens, hard, chars_per_token(model), keep, recent_limit=hard)
        return request

    def _with_summary(self, request: ModelRequest) -> ModelRequest:
        """The stored summary in place of the messages it covers (a summary whose first kept message is
        gone, the conversation edited before it, no longer applies)."""
        record = self.latest
        if record is None:
            return request
        at = next((i for i, m in enumerate(request.messages) if m.id == record.first_kept_message_id), None)
        if at is None:
            return request
        instructions = f"{request.instructions}\n\n" if request.instructions else ""
        return replace(
            request,
            messages=request.messages[at:],
            instructions=f"{instructions}{SUMMARY_HEADING}\n{record.summary}",
        )

    async def _summarise(
        self, model: Model, request: ModelRequest, cut: int, before: int, recorder: Any
    ) -> tuple[CompactionRecord, list[AgentEvent]]:
        writer = self._settings.summary_model or model
        limit = self._settings.max_summary_input_chars
        if (window := _window(writer)) is not None:  # the summariser's own request must fit its window
            limit = min(limit, int(window * 0.5 * chars_per_token(writer)) - len(SUMMARY_INSTRUCTIONS))
        earlier = _transcript(request.messages[:cut], max(limit, 0))
        if self.latest is not None and self.latest.summary not in earlier:
            earlier = f"Summary of what came before:\n{self.latest.summary}\n\n{earlier}"
        # A summary takes at most a fifth of the window it is sent in (and 600 tokens).
        tokens = max(32, min(600, (_window(model) or 3_000) // 5))
        asked = ModelRequest(
            messages=(Message.user(f"The conversation so far:\n\n{earlier}"),),
            tools=(),
            instructions=SUMMARY_INSTRUCTIONS.replace("300 words", f"{int(tokens * 0.7)} words"),
            settings=ModelSettings(max_tokens=tokens),
        )
        response = await collect(writer, asked)
        summary = response.message.text.strip()
        if not summary:
            raise ValueError("the summariser answered nothing")
        kept = request.messages[cut:]
        after = (
            estimate_request_tokens(model, replace(request, messages=kept), self.sizes) + len(summary) // 3
        )
        record = CompactionRecord(
            id=new_id("cmp_"),
            session_id=recorder.session_id,
            first_kept_message_id=kept[0].id,
            summary=summary,
            provider=writer.provider,
            model=writer.model_name,
            usage=response.usage,
            tokens_before=before,
            tokens_after=after,
            created_at=time.time(),
        )
        await recorder.record_compaction(record)
        event = recorder.event(
            CompactionEvent,
            compaction_id=record.id,
            first_kept_message_id=record.first_kept_message_id,
            summary=summary,
            provider=record.provider,
            model=record.model,
            usage=record.usage,
            tokens_before=before,
            tokens_after=after,
        )
        return record, [event]


def _window(model: Model) -> int | None:
    """The window a request is fitted to: a FallbackModel's ``larger_context`` model's, else its largest
    (a request too long for its primary goes to a model with a larger window before anything is compacted,
    issue 27), any model's own."""
    if isinstance(model, FallbackModel):
        if model.larger_context is not None:  # what a too-long request is sent to before it is compacted
            return model.larger_context.context_window
        windows = [m.context_window for m in (*model.models, model.larger_context) if m is not None]
        known = [w for w in windows if w is not None]
        return max(known) if known else None
    return model.context_window


def _turn_starts(messages: Sequence[Message]) -> list[int]:
    return [i for i, m in enumerate(messages) if m.role == "user"]


def _turn_cut(messages: Sequence[Message], keep_recent_turns: int) -> int:
    """Where the kept turns begin: the start of the ``keep_recent_turns``-th user turn from the end (0 when
    there are no more turns than that)."""
    starts = _turn_starts(messages)
    if len(starts) <= max(keep_recent_turns, 1):
        return 0
    return starts[-max(keep_recent_turns, 1)]


def _trim_results(
    request: ModelRequest,
    tokens: int,
    budget: int,
    per_token: float,
    keep_recent_turns: int,
    *,
    whole_blocks: bool = False,
    recent_limit: int | None,
) -> tuple[ModelRequest, int]:
    """Replace the large tool results of earlier turns by a stand-in until the request fits ``budget``
    (estimated from the characters each stand-in saves). Returns the request and its estimate.

    Whole turns go, oldest first, in blocks (:func:`_trim_cuts`): the boundary stays where it is while the
    request fits, step after step and turn after turn (it is recomputed from the history, not stored), so
    the provider's prompt cache keeps serving the prefix; it moves only when the request passes the budget
    again. ``whole_blocks``: the turns after the last whole block stay whole (see :func:`_trim_cuts`).
    Within the recent turns alone (no earlier one to trim), their older steps' results go, but only to fit
    ``recent_limit`` (the window's share: never for the budget alone; ``None``: never)."""
    messages = list(request.messages)
    starts = _turn_starts(messages)
    keep = max(keep_recent_turns, 1)
    if len(starts) <= keep:  # recent turns only: every result of them but the latest step's
        if recent_limit is None or tokens <= recent_limit:
            return request, tokens
        budget = recent_limit
        last_results = max((i for i, m in enumerate(messages) if m.role == "tool"), default=0)
        cuts, block_ends = [last_results], []
    else:
        cuts = _trim_cuts(messages, starts, starts[-keep], budget, whole_blocks=whole_blocks)
        if not cuts:
            return request, tokens
        block_ends = cuts if whole_blocks else cuts[:-1]  # the last cut then moves with every turn
    saved, trimmed_upto, changed = 0, 0, False
    for cut in cuts:
        for index in range(trimmed_upto, cut):
            message = messages[index]
            if message.role != "tool":
                continue
            parts: list[Any] = []
            for part in message.parts:
                size = len(part.output_text()) if isinstance(part, ToolResultPart) else 0
                if size < _MIN_TRIMMED_CHARS or not isinstance(part, ToolResultPart):
                    parts.append(part)
                    continue
                stand_in = STAND_IN.format(chars=size)
                parts.append(replace(part, output=stand_in))  # its id, name, error flag and metadata kept
                saved += int((size - len(stand_in)) / per_token)
                changed = True
            messages[index] = replace(message, parts=tuple(parts))
        trimmed_upto = cut
        if tokens - saved <= budget:
            break
    if not changed:
        return request, tokens
    # The ends of the blocks trimmed: what is sent up to each stays the same until the boundary moves on,
    # so a provider with explicit cache breakpoints keeps the prefix cached across a move.
    marks = tuple(messages[cut - 1].id for cut in block_ends if 0 < cut <= trimmed_upto)
    return replace(request, messages=tuple(messages), cache_marks=marks), tokens - saved


def _trim_cuts(
    messages: Sequence[Message], starts: Sequence[int], kept: int, budget: int, *, whole_blocks: bool
) -> list[int]:
    """Where trimming may stop: the ends of blocks of whole turns, counted from the first message sent, each
    block's stand-ins saving about :data:`TRIM_BLOCK_SHARE` of the budget, then (unless ``whole_blocks``)
    ``kept``, the start of the recent turns: a boundary there moves with every turn.

    A block is sized by what trimming it saves, in characters at the default ratio (not the fitted one,
    which drifts with each response: the blocks must come out the same at every step). A boundary that
    moves by a large share of the budget leaves the request well under it, so it moves again only after
    many turns, and each move re-sends (a cache miss) only the short untrimmed part after it; small blocks
    would move every few turns and re-send most of the request each time."""
    block_chars = budget * TRIM_BLOCK_SHARE * DEFAULT_CHARS_PER_TOKEN
    turn_starts = set(starts)
    cuts: list[int] = []
    saving = 0
    for index in range(kept):
        if index in turn_starts and saving >= block_chars:
            cuts.append(index)
            saving = 0
        message = messages[index]
        if message.role == "tool":
            saving += sum(_saved_chars(part) for part in message.tool_results)
    return cuts if whole_blocks else [*cuts, kept]


def _saved_chars(part: ToolResultPart) -> int:
    size = len(part.output_text())
    return size - len(STAND_IN.format(chars=size)) if size >= _MIN_TRIMMED_CHARS else 0


def _transcript(messages: Sequence[Message], max_chars: int) -> str:
    """The messages as plain text for the summariser, its most recent ``max_chars``."""
    lines: list[str] = []
    for message in messages:
        for part in message.parts:
            if isinstance(part, TextPart) and part.text.strip():
                lines.append(f"{message.role}: {part.text.strip()}")
            elif isinstance(part, ToolResultPart):
                lines.append(f"tool result ({part.tool_name}): {_cut(part.output_text(), 2_000)}")
        for call in message.tool_calls:
            lines.append(f"assistant called {call.tool_name} with {_cut(str(call.args), 500)}")
    text = "\n".join(lines)
    return text[-max_chars:]


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text) - limit} more characters)"


def usage_of(records: Sequence[CompactionRecord]) -> Usage:
    """What a session's summaries cost in tokens."""
    return sum((r.usage for r in records), Usage())
