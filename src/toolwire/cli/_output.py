"""What the command prints: agent events as they stream, stored transcripts, errors and notes.

Everything that comes from a model, a tool or a user (text, tool names, arguments, model names) is
printed literally: the consoles interpret neither rich markup nor ``:emoji:`` codes, and styles are
applied to :class:`~rich.text.Text` pieces, never by formatting markup strings.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext

from rich.console import Console
from rich.status import Status
from rich.text import Text

from toolwire.events import (
    AgentEvent,
    CompactionEvent,
    ErrorEvent,
    FailoverEvent,
    InteractionEnd,
    MediaEvent,
    ReasoningDeltaEvent,
    StepStart,
    SystemMessageEvent,
    TextDeltaEvent,
    TextEndEvent,
    ToolCallActive,
    ToolCallComplete,
    ToolCallHeartbeat,
    ToolInputStartEvent,
    ToolProgress,
)
from toolwire.transcript import Transcript

console = Console(highlight=False, emoji=False, markup=False)
err_console = Console(stderr=True, highlight=False, emoji=False, markup=False)

CYAN, DIM = "cyan", "dim"


def print_error(exc: BaseException) -> None:
    """The one line a failed command prints, on stderr. A missing key names its variables, not Python."""
    from toolwire.errors import MissingKeyError

    message = one_line(exc)
    if isinstance(exc, MissingKeyError):
        message = exc.without_code() + (" (in the environment or ./.env)" if exc.variables else "")
    err_console.print(Text.assemble(("error:", "red"), " ", message), soft_wrap=True)


def print_note(text: str, *, style: str = DIM) -> None:
    """A note about the command (the session id, a new session), on stderr so stdout stays the answer."""
    err_console.print(Text(text, style=style), soft_wrap=True)


def read_line(prompt: str) -> str:
    """``input()`` that Ctrl-C interrupts (KeyboardInterrupt) even inside ``asyncio.run``, whose own
    SIGINT handler only cancels the main task, which a blocked ``input()`` never notices. Blocking the
    event loop is fine while nothing else runs (between chat turns, a confirmation)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return input(prompt)
    finally:
        signal.signal(signal.SIGINT, previous)


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _mark(is_error: bool) -> tuple[str, str]:
    return ("✗", "red") if is_error else ("✓", "green")


def loading(what: str) -> AbstractContextManager[object]:
    """A spinner on stdout while something slow starts (the embedded model's weights), on a terminal only:
    piped output stays the answer alone."""
    return console.status(Text(what), spinner="dots") if console.is_terminal else nullcontext()


class EventPrinter:
    """Renders agent events live: streamed text, tool calls with their progress, a spinner while the model
    decides (until its first text or tool call of the step) and while tools run. Spinners only on a
    terminal.

    The run's own :class:`ErrorEvent` is not printed: the run raises the same error right after it, and
    the command prints that once, on stderr. A sub-agent's failure shows as its tool call's result.
    """

    def __init__(self, out: Console, session_id: str, *, activity: Console | None = None) -> None:
        self.out = out
        """Where the run's own answer goes."""
        self.activity = activity or out
        """Where everything else goes: tool calls, progress, reasoning, sub-agents' text."""
        self.session_id = session_id
        self.error: str | None = None
        """The run's own error message, when it sent one."""
        self.status: Status | None = None
        self.running: dict[tuple[str, str], tuple[str, float]] = {}
        self.progress: dict[tuple[str, str], str] = {}
        self.depth: dict[str, int] = {}
        self.at_line_start = True
        self.activity_at_line_start = True
        """Only used when activity goes to another console than the answer."""
        self.thinking_since: float | None = None
        """When the model started a step that has shown nothing yet."""

    def _indent(self, event: AgentEvent) -> str:
        parent = event.parent_session_id
        if event.session_id not in self.depth:
            self.depth[event.session_id] = self.depth.get(parent, 0) + 1 if parent else 0
        return "  " * self.depth[event.session_id]

    def _newline(self) -> None:
        if not self.at_line_start:
            self.out.out("")
            self.at_line_start = True

    def _activity_newline(self) -> None:
        if self.activity is self.out:
            self._newline()
        elif not self.activity_at_line_start:
            self.activity.out("")
            self.activity_at_line_start = True

    def _line(self, indent: str, *pieces: str | tuple[str, str]) -> None:
        self._activity_newline()
        self.activity.print(Text.assemble(indent, *pieces), soft_wrap=True)

    def _stop_thinking_on(self, event: AgentEvent) -> None:
        if self.thinking_since is not None and not isinstance(event, ToolCallHeartbeat | StepStart):
            self._think(False)  # the model has shown something (or the step ended): the spinner goes

    def _think(self, started: bool) -> None:
        if started and not self.out.is_terminal:
            return
        self.thinking_since = time.time() if started else None
        self._update_status()

    def _update_status(self) -> None:
        if not self.running and self.thinking_since is None:
            if self.status is not None:
                self.status.stop()
                self.status = None
            return
        now = time.time()
        if self.running:
            text = Text(
                "running "
                + ", ".join(
                    f"{name} ({now - started:.1f}s)"
                    + (f": {self.progress[key]}" if key in self.progress else "")
                    for key, (name, started) in self.running.items()
                )
            )
        else:
            text = Text("thinking…")
        if self.status is None:
            self.status = self.out.status(text, spinner="dots")
            self.status.start()
        else:
            self.status.update(text)

    def __call__(self, event: AgentEvent) -> None:
        indent = self._indent(event)
        self._stop_thinking_on(event)
        match event:
            case StepStart():
                self._think(True)
            case TextDeltaEvent():
                self._show_delta(indent, event)
            case ReasoningDeltaEvent():
                self._show_activity_text("", event.delta, style=DIM)
            case TextEndEvent() | InteractionEnd():
                self._newline()
                self._activity_newline()
            case ToolInputStartEvent():
                self._line(indent, ("◇ preparing ", CYAN), (event.tool_name, CYAN))
            case ToolCallActive():
                self._show_call(indent, event)
            case ToolProgress():
                self._show_progress(indent, event)
            case ToolCallHeartbeat():
                self._update_status()
            case ToolCallComplete():
                self._show_result(indent, event)
            case SystemMessageEvent():
                self._line(indent, (f"{event.level}: ", "yellow"), (event.text, "yellow"))
            case MediaEvent():
                self._line(
                    indent, ("media ", "magenta"), (f"{event.content_type} {event.url or ''}", "magenta")
                )
            case ErrorEvent():
                if event.session_id == self.session_id:
                    self.error = event.message
            case FailoverEvent() | CompactionEvent():
                self._show_model_note(indent, event)
            case _:
                pass

    def _show_delta(self, indent: str, event: TextDeltaEvent) -> None:
        if event.session_id == self.session_id:
            self._show_text(indent, event.delta)
        else:  # a sub-agent's words
            self._show_activity_text(indent, event.delta, style="")

    def _show_call(self, indent: str, event: ToolCallActive) -> None:
        args = json.dumps(event.args, ensure_ascii=False)
        self._line(indent, ("▶ ", CYAN), (event.tool_name, CYAN), f"({clip(args, 200)})")
        self.running[(event.session_id, event.tool_call_id)] = (event.tool_name, event.started_at)
        self._update_status()

    def _show_model_note(self, indent: str, event: FailoverEvent | CompactionEvent) -> None:
        if isinstance(event, FailoverEvent):
            self._show_failover(indent, event)
            return
        summarised = (
            f"older turns summarised by {event.model} ({event.tokens_before} → {event.tokens_after} tokens)"
        )
        self._line(indent, ("⤵ compaction ", "yellow"), summarised)

    def _show_failover(self, indent: str, event: FailoverEvent) -> None:
        dropped = "; what it streamed is dropped" if event.dropped_output else ""
        self._line(
            indent,
            ("↪ failover ", "yellow"),
            f"{event.from_provider}:{event.from_model} → {event.to_provider}:{event.to_model} "
            f"({clip(event.reason, 200)}){dropped}",
        )
        self._think(True)  # the next model is deciding

    def _show_text(self, indent: str, delta: str, *, style: str = "") -> None:
        if self.at_line_start:
            self.out.out(indent, end="")
        self.out.out(delta, style=style or None, end="")
        self.at_line_start = delta.endswith("\n")

    def _show_activity_text(self, indent: str, delta: str, *, style: str) -> None:
        if self.activity is self.out:
            self._show_text(indent, delta, style=style)
            return
        if self.activity_at_line_start:
            self.activity.out(indent, end="")
        self.activity.out(delta, style=style or None, end="")
        self.activity_at_line_start = delta.endswith("\n")

    def _show_result(self, indent: str, event: ToolCallComplete) -> None:
        key = (event.session_id, event.tool_call_id)
        self.running.pop(key, None)
        self.progress.pop(key, None)
        self._update_status()
        output = event.output if isinstance(event.output, str) else json.dumps(event.output, default=str)
        self._line(
            indent,
            _mark(event.is_error),
            " ",
            event.tool_name,
            f" → {clip(output, 300)} ",
            (f"({event.duration:.2f}s)", DIM),
        )

    def _show_progress(self, indent: str, event: ToolProgress) -> None:
        key = (event.session_id, event.tool_call_id)
        name = self.running.get(key, ("tool", 0.0))[0]
        percent = f" ({event.fraction:.0%})" if event.fraction is not None else ""
        shown = f"{event.message}{percent}".strip()
        if shown and shown != self.progress.get(key):
            self.progress[key] = shown
            self._line(indent, (f"  … {name}: {shown}", DIM))
        self._update_status()

    def close(self) -> None:
        if self.status is not None:
            self.status.stop()
            self.status = None
        self._newline()
        self._activity_newline()


def render_transcript(
    transcript: Transcript,
    out: Console,
    *,
    agents: Mapping[str, str | None],
    notes: Mapping[int, Sequence[str]] | None = None,
) -> None:
    """Print a conversation as the page draws it (one ``Transcript`` from the same history): each call
    with its result under the bubble it belongs to, a sub-agent's messages indented under its name, the
    calls still waiting, and ``notes`` (a failed turn's error) before the bubble at their index (or last)."""
    notes = notes or {}
    roots = {sid for sid, node in transcript.sessions.items() if node.parent_session_id is None}
    messages = transcript.messages
    for index, message in enumerate(messages):
        for note in notes.get(index, ()):
            out.print(Text.assemble(("error:", "red"), " ", note), soft_wrap=True)
        sub = message.session_id not in roots
        indent = "  " if sub else ""
        who = f"sub-agent {agents.get(message.session_id) or message.session_id}" if sub else ""
        if message.role == "user":
            label = f"task for {who}:" if sub else "user:"
            out.print(Text.assemble(indent, (label, "bold"), " ", message.text), soft_wrap=True)
        elif message.role == "assistant":
            text = message.text or ("(tool calls)", DIM)
            out.print(
                Text.assemble(indent, (f"{who}:" if sub else "assistant:", "bold"), " ", text), soft_wrap=True
            )
            for call in message.tool_calls:
                args = json.dumps(call.args, separators=(",", ":"), ensure_ascii=False)
                out.print(
                    Text.assemble(indent, "  ", ("▶ ", CYAN), (call.tool_name, CYAN), f"({clip(args, 200)})"),
                    soft_wrap=True,
                )
                output = (
                    call.result
                    if isinstance(call.result, str)
                    else json.dumps(call.result, ensure_ascii=False, default=str)
                )
                out.print(
                    Text.assemble(indent, "    ", _mark(call.is_error), " ", clip(output, 400)),
                    soft_wrap=True,
                )
        elif message.text:  # reasoning, a system note
            out.print(
                Text.assemble(indent, (f"{message.role}:", DIM), " ", (message.text, DIM)), soft_wrap=True
            )
    for note in notes.get(len(messages), ()):
        out.print(Text.assemble(("error:", "red"), " ", note), soft_wrap=True)
    for waiting in transcript.active_tools.values():  # a paused run's calls, and those of a live run
        status = waiting.status.replace("-", " ")
        out.print(
            Text.assemble("  ", ("⏸ ", "yellow"), (waiting.tool_name, CYAN), f" {status}"), soft_wrap=True
        )
