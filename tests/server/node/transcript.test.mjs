// The page's transcript.js against the same golden scenarios as tests/test_transcript.py.
// Run: node --test tests/server/node/

import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import {
  Transcript,
  changeToDict,
  mergeHistories,
  messageToDict,
  notificationToDict,
  sessionsToDict,
} from "../../../src/toolwire/server/static/transcript.js";

const here = dirname(fileURLToPath(import.meta.url));
const golden = join(here, "..", "..", "golden", "transcript");
const scenarios = readdirSync(golden)
  .filter((f) => f.endsWith(".json"))
  .map((f) => ({ file: f, data: JSON.parse(readFileSync(join(golden, f), "utf8")) }))
  .filter(({ data }) => !("mapping" in data));

// Agent C streams are mapped to toolwire events on the Python side only (the page reads toolwire events).
const toolwire = scenarios.filter(({ data }) => "events" in data);

const messages = (t) => t.messages.map(messageToDict);
const notifications = (t) => t.activeTools.map(notificationToDict);
const persistent = (list) => list.filter((m) => !m.ephemeral);

function live(scenario) {
  const changes = [];
  const t = new Transcript({ onChange: (c) => changes.push(c) });
  const checkpoints = new Map((scenario.checkpoints || []).map((c) => [c.after, c]));
  scenario.events.forEach((event, i) => {
    t.apply(event);
    const checkpoint = checkpoints.get(i + 1);
    if (!checkpoint) return;
    if (checkpoint.notifications) assert.deepEqual(notifications(t), checkpoint.notifications, `after event ${i + 1}`);
    if (checkpoint.messages) assert.deepEqual(messages(t), checkpoint.messages, `after event ${i + 1}`);
    if (checkpoint.pending_calls) {
      const pending = Object.fromEntries(Object.entries(t.pendingCalls).map(([s, calls]) => [s, calls.map((c) => c.tool_call_id)]));
      assert.deepEqual(pending, checkpoint.pending_calls, `after event ${i + 1}`);
    }
    checkpoints.delete(i + 1);
  });
  assert.equal(checkpoints.size, 0, "checkpoints beyond the end of the stream");
  return { t, changes };
}

test("every toolwire-event golden scenario is covered", () => {
  assert.ok(toolwire.length >= 10, `only ${toolwire.length} scenarios`);
});

for (const { file, data } of toolwire) {
  test(`${file}: live stream builds the expected transcript`, () => {
    const { t, changes } = live(data);
    assert.deepEqual(messages(t), data.expected.messages);
    assert.deepEqual(notifications(t), data.expected.notifications);
    assert.deepEqual(sessionsToDict(t.sessions), data.expected.sessions);
    if (data.expected.changes) assert.deepEqual(changes.map(changeToDict), data.expected.changes);
    if (data.expected.pending_calls) {
      const pending = Object.fromEntries(Object.entries(t.pendingCalls).map(([s, calls]) => [s, calls.map((c) => c.tool_call_id)]));
      assert.deepEqual(pending, data.expected.pending_calls);
    }
  });

  test(`${file}: history rebuilds the same transcript`, () => {
    const resumed = Transcript.fromHistory(data.history, { parents: data.parents, awaiting: data.awaiting, ended: !!data.ended, titles: data.titles });
    assert.deepEqual(messages(resumed), persistent(data.expected.messages));
    assert.deepEqual(notifications(resumed), data.resumed_notifications || []);
    assert.deepEqual(sessionsToDict(resumed.sessions), data.expected.sessions);
    const { t: full } = live(data);
    assert.deepEqual(notifications(resumed), notifications(full)); // live snapshot, persistent part == resumed
  });

  for (const [index, resume] of (data.resumes || []).entries()) {
    test(`${file}: reconnect ${index} resumes from history plus the remaining events`, () => {
      const { t: full } = live(data);
      const t = Transcript.fromHistory(resume.history, { parents: data.parents, lastSeq: resume.last_seq, awaiting: resume.awaiting, ended: !!resume.ended });
      if (index === 0 && data.resumed_checkpoint) {
        assert.deepEqual(messages(t), data.resumed_checkpoint.messages);
        assert.deepEqual(notifications(t), data.resumed_checkpoint.notifications);
      }
      t.applyAll(data.events.slice(resume.events_from));
      assert.deepEqual(persistent(messages(t)), persistent(messages(full)));
      assert.deepEqual(notifications(t), notifications(full));
      assert.deepEqual(sessionsToDict(t.sessions), sessionsToDict(full.sessions));
    });
  }
}

// An Agent C stream is mapped on the Python side, but its stored history is toolwire messages: same rules.
for (const { file, data } of scenarios.filter(({ data }) => "agent_c_events" in data && data.history)) {
  test(`${file}: history rebuilds the same transcript`, () => {
    const resumed = Transcript.fromHistory(data.history, { parents: data.parents });
    assert.deepEqual(messages(resumed), persistent(data.expected.messages));
    assert.deepEqual(notifications(resumed), data.resumed_notifications || []);
    assert.deepEqual(sessionsToDict(resumed.sessions), data.expected.sessions);
  });
}

test("mergeHistories puts the sub-sessions of nested_sub_sessions.json where they happened", () => {
  const { data } = scenarios.find(({ file }) => file === "nested_sub_sessions.json");
  const perSession = ["B", "R", "A"].map((sid) => data.history.filter((m) => m.session_id === sid));
  assert.deepEqual(mergeHistories(perSession), data.history);
  const resumed = Transcript.fromHistory(mergeHistories(perSession), { parents: data.parents });
  assert.deepEqual(messages(resumed), data.expected.messages);
});

test("messageAt(change.index) is the bubble the change names", () => {
  const { data } = scenarios.find(({ file }) => file === "nested_sub_sessions.json");
  const seen = [];
  const t = new Transcript({ onChange: (c) => c.index !== undefined && seen.push([c.index, c.message_id]) });
  t.applyAll(data.events);
  assert.ok(seen.length > 5);
  for (const [index, id] of seen) assert.equal(t.messageAt(index).id, id);
  assert.equal(t.messageAt(t.messages.length), null);
});

test("odd input never throws", () => {
  const t = new Transcript();
  for (const junk of [null, 3, "x", {}, { session_id: 5 }, { session_id: "a", type: "tool-call-complete" }, { session_id: "a", type: "nope", seq: -1 }]) {
    t.apply(junk);
  }
  assert.equal(t.messages.length, 0);
});

test("mergeHistories interleaves by created_at and keeps ties in order", () => {
  const a = [{ id: "a1", created_at: 1 }, { id: "a2", created_at: 3 }];
  const b = [{ id: "b1", created_at: 2 }, { id: "b2", created_at: 3 }];
  assert.deepEqual(mergeHistories([a, b]).map((m) => m.id), ["a1", "b1", "a2", "b2"]);
});

// -- differential fuzz: the same random streams through this module and the Python one ---------------------
//
// The golden files pin the cases someone thought of; random streams (interleaved sessions, reused call ids,
// replays, duplicate completions, cycles in the parent links, odd histories) find the ones nobody did.
// The Python side is the real package, through its public API, in a subprocess of the project's venv.

const PYTHON = join(here, "..", "..", "..", ".venv", "bin", "python");
const PY_RUNNER = `
import json, sys
from toolwire.events import event_from_dict
from toolwire.messages import MessageAdapter
from toolwire.transcript import (Transcript, change_to_dict, message_to_dict, notification_to_dict,
    sessions_to_dict)

def dump(t, changes):
    return {
        "messages": [message_to_dict(m) for m in t.messages],
        "notifications": [notification_to_dict(n) for n in t.active_tools.values()],
        "sessions": sessions_to_dict(tuple(t.sessions.values())),
        "pending": {s: [c.tool_call_id for c in calls] for s, calls in t.pending_calls.items()},
        "changes": [change_to_dict(c) for c in changes],
    }

out = []
for case in json.load(sys.stdin):
    changes = []
    if case["history"] is None:
        t = Transcript(on_change=changes.append)
    else:
        history = [MessageAdapter.validate_python(m) for m in case["history"]]
        awaiting = {(a["session_id"], a["tool_call_id"]): a["kind"] for a in case.get("awaiting") or []}
        t = Transcript.from_history(history, parents=case["parents"], last_seq=case["last_seq"],
                                    awaiting=awaiting, ended=case["ended"], titles=case["titles"],
                                    on_change=changes.append)
    for raw in case["events"]:
        t.apply(event_from_dict(raw))
    out.append(dump(t, changes))
json.dump(out, sys.stdout)
`;

function rng(seed) {
  let a = seed >>> 0; // mulberry32: small, seedable, good enough to pick among a few choices
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

function randomCase(seed) {
  const r = rng(seed);
  const pick = (list) => list[Math.floor(r() * list.length)];
  const parents = { "R.a": "R", "R.a.b": "R.a", "R.c": "R", "S.x": "S" };
  if (r() < 0.1) parents.R = "R.a.b"; // a cycle: the first link wins, nothing loops
  const sessions = ["R", "R", "R.a", "R.a.b", "R.c", "S", "S.x"];
  const seq = Object.fromEntries(sessions.map((s) => [s, 0]));
  let now = 1000;
  const callIds = ["c1", "c2", "c3", "c4"];
  const toolNames = ["search", "fetch", ""];
  const messageIds = ["m1", "m2", "m3", ""];

  const userMessage = (sid) => {
    const parts = r() < 0.15 ? [] : [{ type: "text", text: pick(["hi", "again", ""]) }];
    if (r() < 0.2) parts.push({ type: "file", media_type: "image/png", data: "iVBORw0KGgo=" });
    return { role: "user", id: pick(["u1", "u2", "u3", `u-${seed}-${now}`, ""]), parts, session_id: sid, created_at: now };
  };

  const event = () => {
    const sid = pick(sessions);
    now += pick([0, 0.25, 0.5, 1]);
    const base = { session_id: sid, timestamp: now };
    if (parents[sid] && r() < 0.85) base.parent_session_id = parents[sid];
    if (sid.includes(".") && r() < 0.5) base.user_session_id = sid.split(".")[0];
    const roll = r();
    if (roll < 0.75) base.seq = ++seq[sid];
    else if (roll < 0.9) base.seq = Math.max(0, seq[sid] - Math.floor(r() * 4)); // a replay
    // A call's events may name its message (reused ids across messages are told apart by it) or not.
    const call = () => ({ tool_call_id: pick(callIds), tool_name: pick(toolNames), message_id: pick(messageIds) });
    const args = () => (r() < 0.3 ? {} : { q: pick(["x", "y"]), n: Math.floor(r() * 3) });
    switch (pick(["user", "text", "text", "text", "reasoning", "input-start", "input", "active", "active",
      "heartbeat", "progress", "complete", "complete", "complete", "end", "step", "system", "error", "media",
      "start", "persisted", "awaiting", "resolved", "renamed"])) {
      case "user": return { ...base, type: "user-turn-start", message: userMessage(sid) };
      case "text": return { ...base, type: "text-delta", id: "t", delta: pick(["a", "b ", "", "ç"]), message_id: pick(messageIds) };
      case "reasoning": return { ...base, type: "reasoning-delta", id: "r", delta: pick(["hm", ""]), message_id: pick(messageIds) };
      case "input-start": return { ...base, type: "tool-input-start", ...call() };
      case "input": return { ...base, type: "tool-input-available", ...call(), args: args() };
      case "active": return { ...base, type: "tool-call-active", ...call(), args: args(), started_at: pick([0, now - 0.5]) };
      case "heartbeat": return { ...base, type: "tool-call-heartbeat", ...call(), elapsed: pick([0.25, 3]) };
      case "progress": return { ...base, type: "tool-progress", tool_call_id: pick(callIds), fraction: pick([null, 0.5]), message: pick(["", "half"]) };
      case "complete": return { ...base, type: "tool-call-complete", ...call(), args: args(), output: pick(["ok", 3, null, { a: [1] }]), is_error: r() < 0.3 };
      case "end": return { ...base, type: "interaction-end", status: pick(["completed", "cancelled", "error", "paused"]) };
      case "step": return { ...base, type: "step-finish", step: 1, finish_reason: "stop" };
      case "system": return { ...base, type: "system-message", text: "note", level: pick(["info", "warning", "error"]), tool_call_id: pick([null, "c1"]) };
      case "error": return { ...base, type: "error", error_type: "boom", message: "it broke" };
      case "media": return { ...base, type: "media", content_type: "image/png", data: pick([null, "AAAA"]), url: pick([null, "https://x/y.png"]), tool_call_id: pick([null, "c2"]) };
      case "start": return { ...base, type: "interaction-start", prompt: "p" };
      case "awaiting": return { ...base, type: "tool-call-awaiting", ...call(), args: args(), kind: pick(["approval", "output", "subagent"]) };
      case "resolved": return { ...base, type: "tool-call-resolved", ...call(), resolution: pick(["approved", "denied", "unanswered"]) };
      case "renamed": return { ...base, type: "session-renamed", title: pick(["Trip", "Lisbon in May"]) };
      default: return { ...base, type: "message-persisted", message_id: pick(messageIds) || "m9", role: "assistant" };
    }
  };

  const storedMessage = (i) => {
    const sid = pick(sessions);
    now += pick([0, 1]);
    const id = pick(["m1", "m2", "m3", `h${i}`]);
    const role = pick(["user", "assistant", "assistant", "tool", "system"]);
    const parts = [];
    for (let k = Math.floor(r() * 4); k > 0; k--) {
      const kind = role === "tool" ? "tool-result" : role === "assistant" ? pick(["text", "reasoning", "tool-call", "tool-result"]) : pick(["text", "file"]);
      if (kind === "text") parts.push({ type: "text", text: pick(["hello", "", "world"]) });
      else if (kind === "reasoning") parts.push({ type: "reasoning", text: pick(["think", ""]) });
      else if (kind === "file") parts.push({ type: "file", media_type: "text/plain", url: "https://x/f.txt" });
      else if (kind === "tool-call") parts.push({ type: "tool-call", tool_call_id: pick(callIds), tool_name: pick(["search", "fetch"]), args: { q: "x" }, provider_executed: r() < 0.2 });
      else parts.push({ type: "tool-result", tool_call_id: pick(callIds), tool_name: pick(["search", "fetch"]), output: pick(["done", 1]), is_error: r() < 0.3 });
    }
    return { role, id: role === "user" && r() < 0.1 ? "" : id, parts, session_id: sid, created_at: now };
  };

  const resumed = seed % 3 !== 0;
  const history = resumed ? Array.from({ length: Math.floor(r() * 12) }, (_, i) => storedMessage(i)) : null;
  const lastSeq = resumed ? Object.fromEntries(sessions.filter(() => r() < 0.5).map((s) => [s, Math.floor(r() * 4)])) : null;
  if (lastSeq) for (const [s, n] of Object.entries(lastSeq)) seq[s] = Math.max(seq[s], n - 1);
  const awaiting = resumed && r() < 0.5 ? [] : null; // the awaited rows of a paused run: one per call
  for (let k = awaiting ? 1 + Math.floor(r() * 3) : 0; k > 0; k--) {
    const row = { session_id: pick(sessions), tool_call_id: pick(callIds), kind: pick(["approval", "output", "subagent"]) };
    if (!awaiting.some((a) => a.session_id === row.session_id && a.tool_call_id === row.tool_call_id)) awaiting.push(row);
  }
  // Stored titles, one for a session no message names (no session is made up for it).
  const titles = resumed && r() < 0.4 ? { [pick(sessions)]: "Stored", "Q.none": "Nobody" } : null;
  const events = Array.from({ length: 20 + Math.floor(r() * 60) }, event);
  return { history, parents: resumed ? parents : null, last_seq: lastSeq, awaiting, ended: resumed && r() < 0.5, titles, events };
}

function runJs(c) {
  const changes = [];
  const onChange = (change) => changes.push(change);
  const t = c.history === null
    ? new Transcript({ onChange })
    : Transcript.fromHistory(c.history, { parents: c.parents, lastSeq: c.last_seq, awaiting: c.awaiting, ended: c.ended, titles: c.titles, onChange });
  t.applyAll(c.events);
  return {
    messages: messages(t),
    notifications: notifications(t),
    sessions: sessionsToDict(t.sessions),
    pending: Object.fromEntries(Object.entries(t.pendingCalls).map(([s, calls]) => [s, calls.map((x) => x.tool_call_id)])),
    changes: changes.map(changeToDict),
  };
}

test("random streams and histories: the JavaScript and Python transcripts agree", () => {
  assert.ok(existsSync(PYTHON), `the project venv is needed at ${PYTHON}`);
  const cases = Array.from({ length: 300 }, (_, seed) => randomCase(seed));
  const done = spawnSync(PYTHON, ["-c", PY_RUNNER], { input: JSON.stringify(cases), encoding: "utf8", timeout: 60_000, maxBuffer: 1 << 28 });
  assert.equal(done.status, 0, done.stderr.slice(-3000));
  const expected = JSON.parse(done.stdout);
  assert.equal(expected.length, cases.length);
  let bubbles = 0;
  let calls = 0;
  cases.forEach((c, seed) => {
    const actual = runJs(c);
    for (const field of ["messages", "notifications", "sessions", "pending", "changes"]) {
      assert.deepEqual(actual[field], expected[seed][field], `seed ${seed}: ${field}`);
    }
    bubbles += actual.messages.length;
    calls += actual.messages.reduce((n, m) => n + m.tool_calls.length, 0);
  });
  // the generator must actually exercise the rules, not produce empty transcripts
  assert.ok(bubbles > 3000 && calls > 300, `bubbles ${bubbles}, attached calls ${calls}`);
});
