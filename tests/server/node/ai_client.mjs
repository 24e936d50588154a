// Drives a running toolwire server with the real Vercel AI SDK client and prints what it saw as JSON.
//
//   node ai_client.mjs <package: ai6 | ai6strict | ai5> <server url> [client version header]
//
// Two turns: the first asks a question that makes the (scripted) model call a tool; the second is
// sent the way useChat sends it: the whole UI message list, re-submitted. Every chunk is validated
// with the package's own uiMessageChunkSchema; convertToModelMessages runs on the result.

const [pkg, url, version] = process.argv.slice(2);
const ai = await import(pkg);
const { DefaultChatTransport, readUIMessageStream, convertToModelMessages, uiMessageChunkSchema } = ai;

const schema = typeof uiMessageChunkSchema === "function" ? uiMessageChunkSchema() : uiMessageChunkSchema;

async function validate(chunk) {
  const result = await schema.validate(chunk);
  if (!result.success) {
    throw new Error(`chunk rejected by ${pkg}'s uiMessageChunkSchema: ${JSON.stringify(chunk)}: ${result.error}`);
  }
}

const headers = version ? { "x-toolwire-ai-sdk-version": version } : {};
const transport = new DefaultChatTransport({ api: `${url}/api/chat`, headers });

async function turn(chatId, messages) {
  const stream = await transport.sendMessages({
    chatId,
    messages,
    trigger: "submit-message",
    messageId: undefined,
    abortSignal: undefined,
  });
  const chunks = [];
  const checked = stream.pipeThrough(
    new TransformStream({
      async transform(chunk, controller) {
        await validate(chunk);
        chunks.push(chunk);
        controller.enqueue(chunk);
      },
    }),
  );
  const states = [];
  let last;
  for await (const message of readUIMessageStream({ stream: checked, onError: (e) => { throw e; } })) {
    last = message;
    for (const part of message.parts) {
      if (part.type.startsWith("tool-") || part.type === "dynamic-tool") {
        const key = `${part.toolCallId}`;
        const seen = states.filter((s) => s.id === key).map((s) => s.state);
        if (seen[seen.length - 1] !== part.state) states.push({ id: key, state: part.state });
      }
    }
  }
  return { chunks, states, message: last };
}

const chatId = `node-${pkg}-${Date.now()}`;
const user1 = { id: "u1", role: "user", parts: [{ type: "text", text: "What's the status of TXN_1?" }] };
const first = await turn(chatId, [user1]);
const modelMessages = await convertToModelMessages([user1, first.message]);
const user2 = { id: "u2", role: "user", parts: [{ type: "text", text: "Who authorized it?" }] };
const second = await turn(chatId, [user1, first.message, user2]);
const modelMessages2 = await convertToModelMessages([user1, first.message, user2, second.message]);

process.stdout.write(
  JSON.stringify({ first, second, modelMessages, modelMessages2 }, null, 0) + "\n",
);
