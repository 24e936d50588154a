"""Grounded decisions for a tiny model: every choice it makes is a choice among options the driver built.

A 135M model writing free text copies its few-shot examples and invents facts (issue 30: "29.3 Celsius"
where the tool would have said 18). Under a grammar it can still pick well among a few options, so in
grounded mode the decision schema leaves it only these:

* the action: a tool whose required arguments can all be filled (below), or the answer;
* an argument: an ``enum`` of the tool's schema if it has one, else a span of the user's own words
  (:func:`text_spans`: up to five consecutive words, not starting or ending with a filler word, quoted
  phrases whole) or a scalar of a stored tool result; numbers only from numbers written in them;
* the answer: a statement of a stored tool result (the whole result, or one field of it), that the
  information is not available, or a short courtesy reply. It cannot contain a fact that no tool gave.

The grammar is the model's only input channel for these choices: nothing here inspects the wording of
the question beyond splitting it into words.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Sequence
from typing import Any

from toolwire.agent.drivers._react_parse import FINAL_ANSWER, _hoist_defs, bounded
from toolwire.messages import Message, TextPart, ToolResultPart
from toolwire.models.base import ToolDefinition

NOT_AVAILABLE = "Sorry, that information is not available to me."
"""The answer when no stored result holds what was asked."""
COURTESY_REPLIES = ("Hello! How can I help you?", "You're welcome!")
"""Answers that state no fact (a greeting, thanks)."""

MAX_SPAN_WORDS = 5
MAX_RESULTS = 3
"""Answers are built from this many latest tool results (each adds options, so grammar and prompt)."""

_WORD = re.compile(r"[\w$€£][\w.,:/@'’+#$€£%-]*[\w%]|[\w$€£]")
_QUOTED = re.compile(r"[\"“'‘]([^\"”'’]{2,80})[\"”'’]")
_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?$")
_FILLER = frozenset(
    re.findall(
        r"\S+",
        """
           a an the and or but of in on at to for from with by about into over under than then as is are was
           were be been am do does did has have had can could will would shall should may might must it its it's
           this that these those there here what what's whats which who whom whose when where where's why how i
           me my mine we us our you your yours he him his she her they them their please pls thanks thank thx hi
           hello hey ok okay yes no not bye good morning evening afternoon night tell show give get find check
           look up know want need like let's lets some any many much more most also just still so again now
           today tonight tomorrow one anything something everything say track change convert translate book
           cancel search lookup going go make take send anyone someone anybody
        """,
    )
)
# Greetings carry no value an argument could take ("Hello!" is not a city); "good morning" quoted is.


def text_spans(text: str) -> list[str]:
    """Candidate argument values in ``text``: quoted phrases, then runs of up to
    :data:`MAX_SPAN_WORDS` words that neither start nor end with a filler word."""
    spans = [m.group(1).strip() for m in _QUOTED.finditer(text)]
    for sentence in re.split(r"[,.!?;\n]+(?:\s|$)", text):  # a value does not cross a clause
        words = [_strip_possessive(w) for w in _WORD.findall(sentence)]
        for start, first in enumerate(words):
            if first.lower() in _FILLER:
                continue
            for end in range(start, min(start + MAX_SPAN_WORDS, len(words))):
                if words[end].lower() not in _FILLER:
                    spans.append(" ".join(words[start : end + 1]))
    return _unique(spans)


def _strip_possessive(word: str) -> str:
    return re.sub(r"['’]s$", "", word)


def _unique(values: Iterable[Any]) -> list[Any]:
    seen: set[str] = set()
    out = []
    for value in values:
        key = json.dumps(value, sort_keys=True)
        if key not in seen:
            seen.add(key)
            out.append(value)
    return out


def user_texts(history: Sequence[Message]) -> list[str]:
    """The user's own words, latest message first."""
    return [m.text for m in reversed(history) if m.role == "user" and m.text]


def stored_results(history: Sequence[Message], *, this_turn: bool = False) -> list[ToolResultPart]:
    """Tool results, latest first (``this_turn``: only since the last user message); errors included."""
    out: list[ToolResultPart] = []
    for message in reversed(history):
        if message.role == "user" and this_turn:
            break
        out += [
            p for p in reversed(message.parts) if isinstance(p, ToolResultPart) and not p.provider_executed
        ]
    return out


def _result_scalars(results: Sequence[ToolResultPart]) -> list[Any]:
    out: list[Any] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif _citable(value):
            out.append(value)

    for result in results:
        if not result.is_error:
            walk(result.output)
    return out


def _citable(value: Any) -> bool:
    """A number, or a string short enough to be a value (not a paragraph)."""
    if isinstance(value, str):
        return 0 < len(value) <= 60
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def argument_candidates(
    spec: Any, texts: Sequence[str], scalars: Sequence[Any], vocabulary: Collection[str] = ()
) -> dict[str, Any] | None:
    """A schema for one argument that allows only grounded values, ``{}`` when the argument is left as
    the tool declares it (booleans, objects, arrays), or None when no grounded value fits. A span made
    only of words the tool is described with ("tickets are still open" for ``list_open_tickets``) names
    the tool, not a value."""
    if not isinstance(spec, dict):
        return {}
    if "const" in spec:
        return {}
    if isinstance(spec.get("enum"), list):
        # The enum values the user wrote ("from JPY to GBP"), when there are any; else all of them
        # (a jacket is "clothing": the model maps it).
        named = [v for v in spec["enum"] if isinstance(v, str) and any(_mentions(t, v) for t in texts[:1])]
        return {"enum": named} if named else {}
    kinds = _kinds(spec)
    if not kinds & {"string", "integer", "number"}:
        return {}
    values: list[Any] = []
    words = [s for text in texts for s in text_spans(text) if not _describes(s, vocabulary)]
    if "string" in kinds:
        values += words + [v for v in scalars if isinstance(v, str)]
    if kinds & {"integer", "number"}:
        numbers = [_number(w) for w in words if _NUMBER.match(w)] + [
            v for v in scalars if isinstance(v, (int, float))
        ]
        values += [n for n in numbers if n is not None and ("number" in kinds or float(n).is_integer())]
        if "number" not in kinds:
            values = [int(v) if isinstance(v, float) else v for v in values]
    values = [v for v in _unique(values) if _fits(v, spec)]
    if not values:
        return None
    return {"enum": values}


def _describes(span: str, vocabulary: Collection[str]) -> bool:
    content = [_stem(w) for w in re.findall(r"[A-Za-z]+|\d+", span) if w.lower() not in _FILLER]
    return bool(vocabulary) and all(w in vocabulary for w in content)


def _mentions(text: str, value: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(value)}(?!\w)", text, re.IGNORECASE) is not None


def _stem(word: str) -> str:
    word = word.lower()
    for suffix in ("ing", "es", "s"):
        if word.endswith(suffix) and len(word) > len(suffix) + 2:
            return word[: -len(suffix)]
    return word


def _vocabulary(tool: ToolDefinition) -> set[str]:
    """The words a tool is described with: its name, description, parameter names and descriptions."""
    text = " ".join([words(tool.name), tool.description, json.dumps(tool.parameters)])
    return {_stem(w) for w in re.findall(r"[a-z]+", words(text))}


def closest_tools(tools: Sequence[ToolDefinition], text: str) -> list[ToolDefinition]:
    """The tools sharing the most words with ``text`` (all of them when none shares any): the model
    picks among fewer look-alikes. Only content words count (no filler)."""
    overlap = [_shared_words(t, text) for t in tools]
    best = max(overlap, default=0)
    return list(tools) if best == 0 else [t for t, n in zip(tools, overlap, strict=True) if n == best]


def _shared_words(tool: ToolDefinition, text: str) -> int:
    asked = {_stem(w) for span in text_spans(text) for w in span.split() if w.lower() not in _FILLER}
    return len(asked & _vocabulary(tool))


def _kinds(spec: dict[str, Any]) -> set[str]:
    declared = spec.get("type")
    if isinstance(declared, str):
        return {declared}
    if isinstance(declared, list):
        return {k for k in declared if isinstance(k, str)}
    options = spec.get("anyOf") or spec.get("oneOf") or []
    return {k for option in options if isinstance(option, dict) for k in _kinds(option)}


def _number(text: str) -> int | float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return int(value) if value.is_integer() and "." not in text else value


def _fits(value: Any, spec: dict[str, Any]) -> bool:
    if isinstance(value, str):
        pattern = spec.get("pattern")
        if isinstance(pattern, str) and not re.search(pattern, value):
            return False
        return len(value) <= int(spec.get("maxLength", 200))
    return True


def grounded_tool_schema(tool: ToolDefinition, history: Sequence[Message]) -> dict[str, Any] | None:
    """The tool's argument schema with grounded values (see the module docstring), or None when a
    required argument has no grounded value (the tool cannot be called sensibly now)."""
    parameters = bounded(tool.parameters)
    properties: dict[str, Any] = dict(parameters.get("properties") or {})
    required = set(parameters.get("required", ()))
    texts = user_texts(history)
    scalars = _result_scalars(stored_results(history))
    vocabulary = _vocabulary(tool)
    for name, spec in list(properties.items()):
        narrowed = argument_candidates(spec, texts, scalars, vocabulary)
        if narrowed is None:
            if name in required:
                return None
            del properties[name]
        elif narrowed:
            properties[name] = narrowed
    return {**parameters, "properties": properties}


# -- answers -------------------------------------------------------------------------------------------


def answer_options(history: Sequence[Message]) -> list[str]:
    """Every answer the model may give now: statements of stored results (this turn's first), not
    available, courtesy replies."""
    fresh = stored_results(history, this_turn=True)
    results = fresh[:MAX_RESULTS] or stored_results(history)[:MAX_RESULTS]
    options = [restate(r.output) for r in results]
    if not fresh:  # a follow-up: one field of an earlier result is the likelier answer
        options += [
            statement(k, v) for r in results if isinstance(r.output, dict) for k, v in r.output.items()
        ]
    # A message with no word a value could be (greetings, thanks) gets a courtesy reply; one with such
    # words asked for something, and when no result answers it, it is not available.
    texts = user_texts(history)
    asked = bool(text_spans(texts[0])) if texts else False
    return _unique([*options, *([NOT_AVAILABLE] if asked or fresh else COURTESY_REPLIES)])


def restate(output: Any) -> str:
    """A tool result as one sentence: "The city is Lisbon, the sky is sunny and the low c is 14."."""
    if isinstance(output, dict) and output:
        clauses = [_clause(k, v) for k, v in output.items()]
        body = clauses[0] if len(clauses) == 1 else ", ".join(clauses[:-1]) + " and " + clauses[-1]
        return f"{body[0].upper()}{body[1:]}."
    return f"The result is {_value_text(output)}."


def statement(key: str, value: Any) -> str:
    """One field of a result as a sentence: "The carrier is DHL."."""
    clause = _clause(key, value)
    return f"{clause[0].upper()}{clause[1:]}."


def _clause(key: str, value: Any) -> str:
    verb = "are" if isinstance(value, list) and len(value) != 1 else "is"
    return f"the {words(key)} {verb} {_value_text(value)}"


def _value_text(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{words(k)} {_value_text(v)}" for k, v in value.items())
    if isinstance(value, list):
        if not value:
            return "none"
        items = [
            " ".join(_value_text(v) for v in item.values()) if isinstance(item, dict) else _value_text(item)
            for item in value
        ]
        return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "none"
    return str(value)


def words(name: str) -> str:
    """``transaction_id`` -> "transaction id", ``highC`` -> "high c"."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name)
    return " ".join(spaced.replace("_", " ").replace("-", " ").split()).lower()


# -- examples --------------------------------------------------------------------------------------------


def grounded_examples(
    tools: Sequence[ToolDefinition], conversations: Sequence[Sequence[Message]]
) -> tuple[tuple[Message, ...], ...]:
    """The generated examples, answered the grounded way: each call's answer restates its result, a
    follow-up states one field, a question no result answers gets :data:`NOT_AVAILABLE`, thanks a
    courtesy reply. ``conversations`` are :func:`~._react_examples.generated_examples`' (request, call,
    observation, answer[, follow-up, answer])."""
    out: list[tuple[Message, ...]] = []
    for index, conversation in enumerate(conversations):
        turns = list(conversation[:3])
        result = next(p for p in conversation[2].parts if isinstance(p, ToolResultPart))
        turns.append(_say(restate(result.output)))
        if index == 0 and isinstance(result.output, dict) and len(result.output) > 1:
            key, value = list(result.output.items())[-1]
            turns += [Message.user(f"What was the {words(key)}?"), _say(statement(key, value))]
            turns += [Message.user("And the phone number?"), _say(NOT_AVAILABLE)]
        out.append(tuple(turns))
    greeting = (
        Message.user("Hi!"),
        _say(COURTESY_REPLIES[0]),
        Message.user("Thanks!"),
        _say(COURTESY_REPLIES[1]),
    )
    # The greeting goes first: the model copies the closest example most, and with the greeting last
    # it answered questions it should have looked up ("not available").
    return (greeting, *out)


def _say(text: str) -> Message:
    return Message(role="assistant", parts=(TextPart(text=text),))


def grounded_decision_schema(
    tools: Sequence[ToolDefinition], history: Sequence[Message], *, allow_final: bool
) -> dict[str, Any] | None:
    """The decision schema with grounded arguments and answers, or None when no option is left (a tool
    is required but none can be filled: the caller falls back to the ungrounded schema)."""
    options: list[dict[str, Any]] = []
    defs: dict[str, Any] = {}
    texts = user_texts(history)
    if texts and not text_spans(texts[0]) and allow_final:
        tools = []  # nothing to look up in "Hello!" or "Thanks, bye!", even with a tool that needs no value
    elif texts and len(tools) > 1:
        tools = closest_tools(tools, texts[0])
    # A question in a tool's own words ("Is LH1830 on time?" for a flight status "departure time") is
    # looked up before it is answered: SmolLM2-135M otherwise said "not available" for 4 of 11 such
    # questions of the development set.
    must_look_up = (
        allow_final
        and bool(texts)
        and not stored_results(history, this_turn=True)
        and any(_shared_words(t, texts[0]) for t in tools)
    )
    for tool in tools:
        args = grounded_tool_schema(tool, history)
        if args is None:
            continue
        # A schema with definitions keeps them at the decision's root (as the ungrounded schema does).
        args = _hoist_defs(args, prefix=f"{tool.name}__", into=defs)
        options.append(
            {
                "type": "object",
                "properties": {"action": {"const": tool.name}, "args": args},
                "required": ["action", "args"],
                "additionalProperties": False,
            }
        )
    if allow_final and not (must_look_up and options):
        options.append(
            {
                "type": "object",
                "properties": {
                    "action": {"const": FINAL_ANSWER},
                    "answer": {"enum": answer_options(history)},
                },
                "required": ["action", "answer"],
                "additionalProperties": False,
            }
        )
    if not options:
        return None
    schema: dict[str, Any] = options[0] if len(options) == 1 else {"anyOf": options}
    return {**schema, "$defs": defs} if defs else schema
