// Drives a running toolwire server with the real AI SDK chat client (AbstractChat, the class useChat's
// Chat wraps; here with a plain in-memory state) through a paused run, and prints what it saw as JSON.
//
//   node hitl_client.mjs <package: ai6 | ai6strict | ai5> <server url> <scenario> [client version header]
//
// Scenarios: "approve" / "deny" (ai@6: the tool-approval-request is answered with addToolApprovalResponse
// and re-submitted by lastAssistantMessageIsCompleteWithApprovalResponses); "output" / "output-error" (a
// client tool answered in onToolCall with addToolOutput, re-submitted by
// lastAssistantMessageIsCompleteWithToolCalls). The same scenarios answer a sub-agent's call when the
// server's agent delegates (it arrives as a dynamic-tool part). "edit": two turns, regenerate() the last
// answer, then sendMessage({text, messageId}) replacing the first message. The client validates every
// chunk with its own schema (strict in ai@5 and ai@6.0.230): a chunk it rejects ends the chat in an error,
// reported here. Environment: HITL_PROMPT (the first message), HITL_SECOND_URL (where every later request
// goes: another replica), HITL_GATE (a path: once paused the client creates "<gate>.paused" and waits for
// "<gate>.go").

import { existsSync, writeFileSync } from "node:fs";
import { chatClass } from "./chat_class.mjs";

const [pkg, url, scenario, version] = process.argv.slice(2);
const ai = await import(pkg);
const {
  AbstractChat,
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  lastAssistantMessageIsCompleteWithToolCalls,
} = ai;

const Chat = chatClass(AbstractChat);

const requests = [];
const headers = version ? { "x-toolwire-ai-sdk-version": version } : {};
const transport = new DefaultChatTransport({
  api: `${url}/api/chat`,
  headers,
  fetch: async (input, init) => {
    requests.push(JSON.parse(init.body));
    // HITL_SECOND_URL: every request after the first goes to another replica of the server
    const second = process.env.HITL_SECOND_URL;
    return fetch(requests.length > 1 && second ? String(input).replace(url, second) : input, init);
  },
});

const approving = scenario === "approve" || scenario === "deny";
const toolCalls = [];
const chatId = `hitl-${pkg}-${scenario}-${Date.now()}`;
const chat = new Chat({
  id: chatId,
  transport,
  sendAutomaticallyWhen: approving
    ? lastAssistantMessageIsCompleteWithApprovalResponses
    : lastAssistantMessageIsCompleteWithToolCalls,
  onToolCall: ({ toolCall }) => {
    toolCalls.push(toolCall.toolName);
    if (toolCall.toolName !== "browser_time_zone") return; // the server runs its own tools
    const answer =
      scenario === "output-error"
        ? { state: "output-error", errorText: "no clock in this client" }
        : { output: { timeZone: "Europe/Paris" } };
    // not awaited (the AI SDK's advice: it would wait for the running stream)
    chat.addToolOutput({ tool: toolCall.toolName, toolCallId: toolCall.toolCallId, ...answer });
  },
});

async function settle(count) {
  for (let i = 0; i < 600; i++) {
    if (requests.length >= count && (chat.status === "ready" || chat.status === "error")) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`the chat did not settle: status ${chat.status}, ${requests.length} requests`);
}

if (scenario === "edit") {
  // Regenerate the last answer, then edit the first message (useChat's two ways of replacing a turn).
  const texts = () => chat.messages.map((m) => `${m.role}: ${m.parts.filter((p) => p.type === "text").map((p) => p.text).join("")}`);
  const views = [];
  await chat.sendMessage({ text: "first" });
  await settle(1);
  await chat.sendMessage({ text: "second" });
  await settle(2);
  views.push(texts());
  await chat.regenerate();
  await settle(3);
  views.push(texts());
  await chat.sendMessage({ text: "first, edited", messageId: chat.messages[0].id });
  await settle(4);
  views.push(texts());
  process.stdout.write(
    JSON.stringify({ chatId, views, requests, status: chat.status, error: chat.error ? String(chat.error) : null }) + "\n",
  );
  process.exit(0);
}

const prompt = process.env.HITL_PROMPT ?? (approving ? "Refund order A1" : "What time zone am I in?");
await chat.sendMessage({ text: prompt });
await settle(1);
const paused = structuredClone(chat.messages);
const gate = process.env.HITL_GATE; // paused: tell the test, wait until it says go (it may kill a replica)
if (gate) {
  writeFileSync(`${gate}.paused`, "");
  while (!existsSync(`${gate}.go`)) await new Promise((resolve) => setTimeout(resolve, 25));
}
if (approving && chat.status === "ready") {
  const part = chat.messages.at(-1).parts.find((p) => p.state === "approval-requested");
  if (part) {
    await chat.addToolApprovalResponse(
      scenario === "approve"
        ? { id: part.approval.id, approved: true }
        : { id: part.approval.id, approved: false, reason: "too large" },
    );
  }
}
await settle(2);
await new Promise((resolve) => setTimeout(resolve, 100));
await settle(2);

process.stdout.write(
  JSON.stringify({
    chatId,
    paused,
    messages: chat.messages,
    requests,
    toolCalls,
    status: chat.status,
    error: chat.error ? String(chat.error) : null,
  }) + "\n",
);
