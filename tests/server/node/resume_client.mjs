// Drives a running toolwire server with the real AI SDK chat client (AbstractChat, as useChat's Chat)
// through a stream it loses mid-run, then re-attaches with chat.resumeStream() (GET /api/chat/{id}/stream),
// and prints what it saw as JSON.
//
//   node resume_client.mjs <package: ai6 | ai6strict | ai5> <server url> <scenario> [chat id] [version header]
//
// Scenarios: "plain" (one uninterrupted turn); "stop" (chat.stop() once a tool runs: the client stops
// reading, the server's run goes on; then resumeStream()); "reload" (as "stop", but the chat resumes with
// the messages a reloaded page gets from its storage: the user's message only, the partial answer dropped,
// which is what clients before ai 6.0.2xx's replaying resume need); "gate" (once a tool runs, create
// "<RESUME_GATE>.running" and wait for "<RESUME_GATE>.go" — the test kills the replica meanwhile — then
// resumeStream()). Every scenario ends with one more resumeStream(), which finds no running turn (204).
// Every chunk is validated by the package's own uiMessageChunkSchema (DefaultChatTransport does it).

import { existsSync, writeFileSync } from "node:fs";
import { chatClass } from "./chat_class.mjs";

const [pkg, url, scenario, chatId, version] = process.argv.slice(2);
const ai = await import(pkg);
const { AbstractChat, DefaultChatTransport } = ai;

const Chat = chatClass(AbstractChat);

const requests = [];
const transport = new DefaultChatTransport({
  api: `${url}/api/chat`,
  headers: version ? { "x-toolwire-ai-sdk-version": version } : {},
  fetch: async (input, init) => {
    const response = await fetch(input, init);
    requests.push({ method: init.method, url: String(input).slice(url.length), status: response.status });
    return response;
  },
});
const errors = [];
const chat = new Chat({ id: chatId ?? `resume-${Date.now()}`, transport, onError: (e) => errors.push(String(e)) });

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const toolRunning = () =>
  chat.messages.some(
    (m) => m.role === "assistant" && m.parts.some((p) => p.type.startsWith("tool-") && p.state === "input-available"),
  );

async function untilToolRuns() {
  for (let i = 0; i < 600 && !toolRunning(); i++) await sleep(50);
  if (!toolRunning()) throw new Error("the tool never started on the client's stream");
}

const sending = chat.sendMessage({ text: process.env.RESUME_PROMPT ?? "do the long work" });
let partial = null;
if (scenario === "stop" || scenario === "reload") {
  await untilToolRuns();
  partial = structuredClone(chat.messages);
  await chat.stop();
  await sending;
  if (scenario === "reload") chat.messages = chat.messages.filter((m) => m.role === "user");
} else if (scenario === "gate") {
  await untilToolRuns();
  partial = structuredClone(chat.messages);
  const gate = process.env.RESUME_GATE;
  writeFileSync(`${gate}.running`, "");
  for (let i = 0; i < 1200 && !existsSync(`${gate}.go`); i++) await sleep(50);
  await sending.catch((e) => errors.push(String(e)));
} else {
  await sending;
}
const statusBeforeResume = chat.status;
if (scenario !== "plain") await chat.resumeStream();
const statusAfterResume = chat.status;
const afterResume = structuredClone(chat.messages);
await chat.resumeStream(); // the turn has ended: 204, nothing changes
process.stdout.write(
  JSON.stringify({
    partial,
    statusBeforeResume,
    statusAfterResume,
    messages: afterResume,
    final: chat.messages,
    status: chat.status,
    requests,
    errors,
  }) + "\n",
);
