// The page's transcript.js against the same golden scenarios as tests/test_transcript.py.
// Run: node --test tests/server/node/

import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
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
  });
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
    const resumed = Transcript.fromHistory(data.history, { parents: data.parents });
    assert.deepEqual(messages(resumed), persistent(data.expected.messages));
    assert.deepEqual(notifications(resumed), data.resumed_notifications || []);
    assert.deepEqual(sessionsToDict(resumed.sessions), data.expected.sessions);
  });

  for (const [index, resume] of (data.resumes || []).entries()) {
    test(`${file}: reconnect ${index} resumes from history plus the remaining events`, () => {
      const { t: full } = live(data);
      const t = Transcript.fromHistory(resume.history, { parents: data.parents, lastSeq: resume.last_seq });
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
