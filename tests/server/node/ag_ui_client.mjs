// Drives a running toolwire server with the official AG-UI client (@ag-ui/client's HttpAgent, which checks
// every event against the protocol's schemas and ordering rules) and prints what it saw as JSON.
//
//   node ag_ui_client.mjs <server url> <scenario> <thread id> [bearer token]
//
// Scenarios: "text" (one user turn), "tool" (a server tool's call and result), "frontend" (a front-end tool
// the model calls: the run ends with it pending, the client answers it with a tool message in a second
// run), "approve" (a call awaiting approval: the run ends with an interrupt, the second run resumes it),
// "turn" (one user turn with the prompt in AGUI_PROMPT; used to try another user's thread). A run the
// server refuses (an HTTP error) is reported as {status, payload}.

import { HttpAgent } from "@ag-ui/client";

const [url, scenario, threadId, token] = process.argv.slice(2);
const headers = token ? { authorization: `Bearer ${token}` } : {};
const agent = new HttpAgent({ url: `${url}/api/ag-ui`, headers, threadId });

const runs = [];
let current = null;
const subscriber = {
  onEvent: ({ event }) => {
    current.events.push(event.type);
  },
  onRunFinishedEvent: (params) => {
    current.outcome = params.outcome;
    current.result = params.result ?? null;
    current.pendingToolCallIds = params.pendingToolCallIds ?? null;
    current.interrupts = params.interrupts ?? null;
  },
  onRunErrorEvent: ({ event }) => {
    current.runError = event.message;
  },
};

async function run(parameters = {}) {
  current = { events: [], outcome: null, runError: null };
  runs.push(current);
  await agent.runAgent(parameters, subscriber);
  return current;
}

const PICK_COLOR = {
  name: "pick_color",
  description: "Asks the user to pick a color in the page",
  parameters: { type: "object", properties: { hint: { type: "string" } }, required: ["hint"] },
};

let error = null;
try {
  if (scenario === "text") {
    agent.addMessage({ id: "u1", role: "user", content: "hello there" });
    await run();
  } else if (scenario === "tool") {
    agent.addMessage({ id: "u1", role: "user", content: "lookup T9" });
    await run();
  } else if (scenario === "frontend") {
    agent.addMessage({ id: "u1", role: "user", content: "color" });
    const first = await run({ tools: [PICK_COLOR] });
    for (const id of first.pendingToolCallIds ?? []) {
      // what a CopilotKit front-end action does: run it here, add its result, run the agent again
      agent.addMessage({ id: `r-${id}`, role: "tool", toolCallId: id, content: JSON.stringify({ color: "teal" }) });
    }
    await run({ tools: [PICK_COLOR] });
  } else if (scenario === "approve") {
    agent.addMessage({ id: "u1", role: "user", content: "refund A7" });
    const first = await run();
    const resume = (first.interrupts ?? []).map((i) => ({
      interruptId: i.id,
      status: "resolved",
      payload: { approved: true },
    }));
    await run({ resume });
  } else if (scenario === "turn") {
    agent.addMessage({ id: "u1", role: "user", content: process.env.AGUI_PROMPT ?? "hello" });
    await run();
  } else {
    throw new Error(`unknown scenario ${scenario}`);
  }
} catch (e) {
  error = { message: String(e?.message ?? e), status: e?.status ?? null, payload: e?.payload ?? null };
}

const messages = agent.messages.map((m) => ({
  id: m.id,
  role: m.role,
  content: m.content ?? null,
  toolCalls: (m.toolCalls ?? []).map((c) => ({ id: c.id, name: c.function.name, arguments: c.function.arguments })),
  toolCallId: m.toolCallId ?? null,
}));
process.stdout.write(JSON.stringify({ runs, messages, error }));
