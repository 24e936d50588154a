"""The ReAct driver: tool use for models without function calling, through JSON decisions.

Each step the model sees the tool catalog and a text-only rendering of the history (``_react_prompt``),
and answers with one JSON decision (``_react_parse``). The decision schema goes out as
``request.output_schema``, so a model that can constrain generation (the local llama.cpp model turns it
into a grammar) cannot produce anything else. The reply is still parsed defensively, because other models
follow the format by instruction only; on failure the model is re-prompted with the reason, a bounded
number of times.

Decisions leave the driver as canonical stream parts, so the loop cannot tell this step from a native
function-calling one: a tool decision becomes ``tool-input-start/delta/end`` with a fresh call id; a final
answer becomes text, streamed while the model is still generating it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from typing import Any

from toolwire.agent.drivers import Driver
from toolwire.agent.drivers._react_examples import generated_examples
from toolwire.agent.drivers._react_final import answer_parts, answer_request
from toolwire.agent.drivers._react_grounded import grounded_decision_schema, grounded_examples
from toolwire.agent.drivers._react_parse import (
    MAX_ANSWER_CHARS,
    MAX_THOUGHT_CHARS,
    AnswerStreamer,
    Decision,
    FinalAnswer,
    RepeatedCall,
    calls_this_turn,
    decision_parts,
    decision_schema,
    parse_decision,
    thought_parts,
)
from toolwire.agent.drivers._react_prompt import (
    DEFAULT_EXAMPLES,
    DEFAULT_FORMAT,
    render_history,
    system_prompt,
)
from toolwire.errors import ConfigError, DecisionTimeout, DriverError
from toolwire.messages import Message, TextPart, Usage
from toolwire.models._builder import closing
from toolwire.models.base import (
    DecisionRetry,
    Finish,
    FinishReason,
    Model,
    ModelRequest,
    ModelStreamPart,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    ResponseMetadata,
    StreamError,
    StreamStart,
    TextDelta,
    TextEnd,
    ToolDefinition,
)


class ReActDriver(Driver):
    """Drives a model without function calling with schema-constrained JSON decisions.

    ``instructions`` replaces :data:`DEFAULT_FORMAT` (how to reply); the agent's own instructions come with
    each request. ``examples`` are canonical conversations, rendered exactly like the history and placed
    before it as chat turns: measured on SmolLM2-135M, turns teach the format better than the same
    transcript inside the system prompt. Without ``examples`` they are generated from the step's tools
    (``_react_examples``). ``refuse_repeats`` rejects a call identical to one already answered since the
    user's last message (turn it off for tools meant to be polled); ``reuse_observations`` also one
    answered earlier in the conversation (for tools whose answers do not change). A refused repeat is
    retried with a grammar that allows only the answer. ``grounded`` (the default driver's for the
    embedded model) leaves the model only choices among options built from the conversation: arguments
    from the user's words, enum values or stored results, and answers stating stored results, "not
    available" or a courtesy reply (``_react_grounded``); a structured answer (``output_type``) is not
    grounded. ``thought`` adds an optional ``thought`` string before the choice in each decision (bounded
    by ``MAX_THOUGHT_CHARS``); a thought the model writes reaches clients and the store as reasoning.
    :meth:`decision_schema` is the hook that customises the decision. A reply that is not a valid decision
    is announced (a ``system-message`` event, code ``decision-retry``) and asked again; after the last
    retry the step ends with reason ``error`` and its usage (stored as a failure step), then raises.
    ``final_via_inference``: when the decision is the final answer, a separate model call without grammar
    writes it from the whole conversation (``_react_final``), streamed as the step's text; the decision's
    own answer is not shown (a structured answer is not written that way).

    Bounds, so that no decision runs on: ``max_calls_per_turn`` tool calls per user message (then only an
    answer is allowed; None: no limit), ``max_decision_tokens`` per model call when the request sets no
    ``max_tokens``, ``max_answer_chars`` per text answer (in the grammar), and ``decision_timeout``
    seconds per step, retries included (:class:`~toolwire.errors.DecisionTimeout`; an answer already
    being streamed stands, cut).
    """

    def __init__(
        self,
        *,
        max_retries: int = 2,
        examples: Sequence[Sequence[Message]] | None = None,
        instructions: str | None = None,
        refuse_repeats: bool = True,
        reuse_observations: bool = False,
        max_calls_per_turn: int | None = None,
        max_decision_tokens: int = 300,
        max_answer_chars: int = MAX_ANSWER_CHARS,
        decision_timeout: float | None = 120.0,
        grounded: bool = False,
        thought: bool = False,
        final_via_inference: bool = False,
    ) -> None:
        if max_retries < 0:
            raise ConfigError("max_retries must be >= 0")
        if max_calls_per_turn is not None and max_calls_per_turn < 1:
            raise ConfigError("max_calls_per_turn must be >= 1 (or None)")
        if max_decision_tokens < 1 or max_answer_chars < 1:
            raise ConfigError("max_decision_tokens and max_answer_chars must be >= 1")
        if decision_timeout is not None and decision_timeout <= 0:
            raise ConfigError("decision_timeout must be > 0 (or None)")
        self.max_retries = max_retries
        self.examples = None if examples is None else tuple(tuple(e) for e in examples)
        self.format_instructions = DEFAULT_FORMAT if instructions is None else instructions
        self.refuse_repeats = refuse_repeats
        self.reuse_observations = reuse_observations
        self.max_calls_per_turn = max_calls_per_turn
        self.max_decision_tokens = max_decision_tokens
        self.max_answer_chars = max_answer_chars
        self.decision_timeout = decision_timeout
        self.grounded = grounded
        self.thought = thought
        self.final_via_inference = final_via_inference

    async def stream_step(self, model: Model, request: ModelRequest) -> AsyncIterator[ModelStreamPart]:
        tools, allow_final = _allowed(request)
        answered = calls_this_turn(request.messages)
        # The prompt (catalog, examples) stays the same for every step of a turn, so the model reads the
        # same text (and llama.cpp reuses its cache); only the grammar narrows when the call budget is spent.
        choices = tools
        if allow_final and self.max_calls_per_turn is not None and len(answered) >= self.max_calls_per_turn:
            choices = []
        answer_schema = request.output_schema  # a structured final answer (the agent's output_type)
        settings = request.settings
        if settings.max_tokens is None:  # bounded generation: one decision never runs on and on
            settings = replace(settings, max_tokens=self.max_decision_tokens)
        text_request = ModelRequest(
            messages=self.prompt_messages(request.messages, tools),
            instructions=self.system_prompt(
                request.instructions, tools, allow_final, answer_schema=answer_schema
            ),
            settings=settings,
            output_schema=self.decision_schema(choices, allow_final, answer_schema, request.messages),
            output_schema_name="decision",
        )
        done = set(answered) if self.refuse_repeats else set()
        if self.reuse_observations:
            done.update(calls_this_turn(request.messages, whole=True))
        state = _StepState()
        deadline = None if self.decision_timeout is None else _now() + self.decision_timeout
        # A structured answer (output_type) keeps its schema: only a text answer gets its own call.
        via_inference = self.final_via_inference and answer_schema is None
        for attempt in range(1, self.max_retries + 2):
            outcome = _Attempt(allow_final and not via_inference)  # the decision's answer is not shown then
            # aclosing: a consumer that stops early must stop the model now (the local model's generation
            # thread), not whenever the garbage collector finalizes the generators.
            async with aclosing(outcome.run(model, text_request, state, deadline)) as parts:
                async for part in parts:
                    yield part
            if outcome.aborted:
                return
            if outcome.answer is not None and outcome.answer.started:
                # Visible text cannot be taken back: the answer stands, truncated if the model ran out
                # (of tokens or of time).
                yield TextEnd(id=outcome.answer.id)
                reason = "stop" if outcome.answer.closed else _reason(outcome.finish)
                if outcome.answer.looping:
                    reason = "length"
                yield Finish(reason=reason, usage=state.usage)
                return
            if outcome.timed_out:
                yield Finish(reason="error", usage=state.usage)  # the failed step is stored with its cost
                raise DecisionTimeout(
                    f"no decision within {self.decision_timeout:g} s ({attempt} attempts)",
                    raw_output=outcome.text,
                    attempts=attempt,
                )
            try:
                decision = parse_decision(
                    outcome.text,
                    choices,
                    allow_final=allow_final,
                    done=done,
                    structured=answer_schema is not None,
                )
            except DriverError as exc:
                if attempt > self.max_retries:
                    # The step failed, but its attempts were billed: it ends (reason "error", their usage)
                    # so the model step stores it as a failure step before the error ends the run.
                    yield Finish(reason="error", usage=state.usage)
                    raise type(exc)(
                        f"no valid decision after {attempt} attempts: {exc.message}",
                        raw_output=exc.raw_output,
                        attempts=attempt,
                    ) from exc
                if isinstance(exc, RepeatedCall) and allow_final:
                    # The model asks again for what it has just read: only an answer is allowed now, by
                    # grammar (a small model told so in words repeats the call anyway).
                    text_request = replace(
                        text_request,
                        output_schema=self.decision_schema([], True, answer_schema, request.messages),
                    )
                # Announced (a system-message event with code decision-retry), never stored: every client
                # sees why the step takes longer.
                yield DecisionRetry(attempt=attempt, error=exc.message, raw_output=outcome.text)
                text_request = _with_messages(
                    text_request,
                    Message(role="assistant", parts=(TextPart(text=outcome.text),)),
                    Message.user(
                        f"That reply was not valid: {exc.message}. Reply with one JSON object only."
                    ),
                )
                continue
            async with aclosing(self._decided(model, request, decision, state.usage, via_inference)) as parts:
                async for part in parts:
                    yield part
            return

    async def _decided(
        self, model: Model, request: ModelRequest, decision: Decision, usage: Usage, via_inference: bool
    ) -> AsyncGenerator[ModelStreamPart, None]:
        """A valid decision's parts and the step's finish (``usage``: what its decisions cost); a final
        answer ``via_inference`` is written by its own call."""
        if via_inference and isinstance(decision, FinalAnswer):
            for part in thought_parts(decision.thought):
                yield part
            async with aclosing(answer_parts(model, answer_request(request))) as answer:
                async for part in answer:  # the step cost its decisions and the answer's call
                    yield replace(part, usage=usage + part.usage) if isinstance(part, Finish) else part
            return
        for part in decision_parts(decision):
            yield part
        yield Finish(reason="stop" if isinstance(decision, FinalAnswer) else "tool-calls", usage=usage)

    def decision_schema(
        self,
        tools: Sequence[ToolDefinition],
        allow_final: bool,
        answer_schema: dict[str, Any] | None,
        history: Sequence[Message],
    ) -> dict[str, Any]:
        """The JSON schema of this step's decision (sent as ``output_schema``: the local model's grammar).
        Override to customise it: narrow an argument, add fields. Each option must keep ``action`` (a
        tool name or ``final_answer``) with ``args`` or ``answer``; other keys are ignored by the parser,
        except an optional ``thought`` string. ``tools`` are the tools allowed now (none when only the
        answer is), ``history`` the conversation."""
        if self.grounded and answer_schema is None:
            grounded = grounded_decision_schema(tools, history, allow_final=allow_final)
            if grounded is not None:
                return grounded
        return self._schema(tools, allow_final, answer_schema)

    def _schema(
        self, tools: Sequence[ToolDefinition], allow_final: bool, answer_schema: dict[str, Any] | None
    ) -> dict[str, Any]:
        return decision_schema(
            tools,
            allow_final=allow_final,
            answer_schema=answer_schema,
            max_answer_chars=self.max_answer_chars,
            thought_chars=MAX_THOUGHT_CHARS if self.thought else None,
        )

    def system_prompt(
        self,
        instructions: str | None,
        tools: Sequence[ToolDefinition],
        allow_final: bool,
        *,
        answer_schema: dict[str, Any] | None = None,
    ) -> str:
        """The text-only system prompt: agent instructions, tool catalog, reply format (and the schema
        of a structured final answer)."""
        return system_prompt(
            instructions,
            tools,
            allow_final=allow_final,
            reply_format=self.format_instructions,
            answer_schema=answer_schema,
        )

    def prompt_messages(
        self, history: Sequence[Message], tools: Sequence[ToolDefinition] = ()
    ) -> list[Message]:
        """The examples (given, or generated from ``tools``), then the history, as text-only chat messages."""
        if self.examples is not None:
            examples = self.examples
        elif self.grounded:
            examples = grounded_examples(tools, generated_examples(tools))
        else:
            examples = generated_examples(tools)
        out: list[Message] = []
        for example in examples:
            out += render_history(example)
        return out + render_history(history)


def _now() -> float:
    return asyncio.get_running_loop().time()


@dataclass(slots=True)
class _StepState:
    usage: Usage = field(default_factory=Usage)
    started: bool = False
    """Whether ``stream-start`` went out: one per step, carrying the first attempt's warnings."""


class _Attempt:
    """One model call of a step: forwards what the consumer may see now, collects the decision text."""

    def __init__(self, allow_final: bool) -> None:
        self.answer = AnswerStreamer("answer-0") if allow_final else None
        self.finish: Finish | None = None
        self.aborted = False
        self.timed_out = False
        self._raw: list[str] = []

    @property
    def text(self) -> str:
        return "".join(self._raw)

    async def run(
        self, model: Model, request: ModelRequest, state: _StepState, deadline: float | None
    ) -> AsyncGenerator[ModelStreamPart, None]:
        # closing: stop the model now (the local model's generation thread), not when the GC finalizes it.
        async with closing(model.stream(request)) as stream:
            parts = aiter(stream)
            while True:
                try:
                    # The time bound covers waiting for the model only, never the consumer's handling
                    # of a part we yielded (a timeout scope around a yield would cancel the consumer).
                    async with asyncio.timeout_at(deadline):
                        part = await anext(parts)
                except StopAsyncIteration:
                    break
                except TimeoutError:
                    self.timed_out = True
                    break
                match part:
                    case StreamStart():
                        if not state.started:
                            state.started = True
                            yield part
                    case TextDelta():
                        self._raw.append(part.delta)
                        if self.answer is not None:
                            for out in self.answer.feed(part.delta):
                                yield out
                            if self.answer.looping:
                                break  # leaving the loop closes the stream, which stops the model
                    case Finish():
                        self.finish = part
                        state.usage = state.usage + part.usage
                    case StreamError():
                        self.aborted = True
                        yield part
                        return
                    case ResponseMetadata() | ReasoningStart() | ReasoningDelta() | ReasoningEnd():
                        yield part
                    case _:
                        pass  # text start/end are re-framed by the driver; no tools were sent, so no tool parts
        if not state.started:
            state.started = True
            yield StreamStart()


def _allowed(request: ModelRequest) -> tuple[list[ToolDefinition], bool]:
    """The tools the model may pick this step and whether it may answer instead, from ``tool_choice``."""
    tools = list(request.tools)
    match request.tool_choice:
        case "auto":
            return tools, True
        case "none":
            return [], True
        case "required":
            if not tools:
                raise ConfigError("tool_choice 'required' needs at least one tool")
            return tools, False
        case name:
            chosen = [t for t in tools if t.name == name]
            if not chosen:
                raise ConfigError(f"tool_choice {name!r} names no tool of this request")
            return chosen, False


def _reason(finish: Finish | None) -> FinishReason:
    return finish.reason if finish is not None and finish.reason != "tool-calls" else "other"


def _with_messages(request: ModelRequest, *extra: Message) -> ModelRequest:
    return ModelRequest(
        messages=[*request.messages, *extra],
        instructions=request.instructions,
        settings=request.settings,
        output_schema=request.output_schema,
        output_schema_name=request.output_schema_name,
    )


__all__ = ["DEFAULT_EXAMPLES", "ReActDriver"]
