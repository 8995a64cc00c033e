// openai_tools.mjs - tool calls through the official openai npm client
// against `blockdraft serve` (run by tests/e2e/server_tools.sh).
//
// What is forced, honestly: the models are random (qwen3 tiny with the Qwen3
// vocabulary), so the model's output is replaced by a given text through a
// test-only hook -- the request field "test_output", accepted only when the
// server was started with BLOCKDRAFT_TEST_HOOKS=1: its tokens are emitted
// as the generation (no forward pass), and then take the server's normal
// path (detokenizer, stop strings, reasoning split, tool-call parser,
// response and SSE encoding). The prompt side is real: the tools go through
// the template, and the second step's prompt (the client's own assistant
// message and tool result) is written to TWOSTEP for server_tools.py to
// compare with Python Jinja2. tool_choice "required" / named runs real
// generation: the call's opening is forced by the prompt, the rest is the
// random model's, which does not parse and must come back as content.
//
// env: JSON_URL (Qwen3 template, <tool_call> JSON), XML_URL (Qwen3.5
//      template, <function=> XML, thinking), LLAMA_URL (Llama 3.2
//      template: a bare {"name", "parameters"} object), TWOSTEP (output file)
import OpenAI from "openai";
import fs from "node:fs";
import assert from "node:assert/strict";

const json = new OpenAI({ baseURL: process.env.JSON_URL, apiKey: "none", maxRetries: 0, timeout: 60000 });
const xml = new OpenAI({ baseURL: process.env.XML_URL, apiKey: "none", maxRetries: 0, timeout: 60000 });
const llama = new OpenAI({ baseURL: process.env.LLAMA_URL, apiKey: "none", maxRetries: 0, timeout: 60000 });
const model = "q";

let failures = 0;
async function check(name, fn) {
  try {
    await fn();
    console.log("ok:", name);
  } catch (e) {
    failures++;
    console.log("FAIL:", name, "\n   ", e && e.stack ? e.stack.split("\n").slice(0, 5).join("\n    ") : e);
  }
}

const tools = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "Get the current weather for a city.",
      parameters: {
        type: "object",
        properties: { city: { type: "string" }, unit: { type: "string", enum: ["celsius", "fahrenheit"] } },
        required: ["city"],
      },
    },
  },
  {
    type: "function",
    function: {
      name: "web_search",
      description: "Search the web.",
      parameters: {
        type: "object",
        properties: { query: { type: "string" }, max_results: { type: "integer" } },
        required: ["query"],
      },
    },
  },
];
const user = [{ role: "user", content: "What is the weather in Paris?" }];
const CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n</tool_call>';
const CALL2 = '<tool_call>\n{"name": "web_search", "arguments": {"query": "Paris weather", "max_results": 3}}\n</tool_call>';

// Collect a raw stream: content, reasoning, tool calls by index, finish.
async function collect(stream) {
  const out = { content: "", reasoning: "", calls: [], finish: null, argChunks: 0, chunks: 0 };
  for await (const c of stream) {
    out.chunks++;
    for (const ch of c.choices || []) {
      const d = ch.delta || {};
      if (d.content) out.content += d.content;
      if (d.reasoning_content) out.reasoning += d.reasoning_content;
      for (const tc of d.tool_calls || []) {
        if (!out.calls[tc.index]) {
          assert.ok(tc.id && tc.type === "function" && tc.function && tc.function.name, "first delta: id, type, name");
          out.calls[tc.index] = { id: tc.id, name: tc.function.name, arguments: tc.function.arguments || "" };
        } else {
          assert.ok(!tc.id && !(tc.function && tc.function.name), "later deltas carry arguments only");
          out.calls[tc.index].arguments += tc.function.arguments;
          out.argChunks++;
        }
      }
      if (ch.finish_reason) out.finish = ch.finish_reason;
    }
  }
  return out;
}

let step1 = null;
await check("non-streaming: the output becomes message.tool_calls (finish_reason tool_calls, content null)", async () => {
  const r = await json.chat.completions.create({ model, messages: user, tools, test_output: CALL });
  const m = r.choices[0].message;
  assert.equal(r.choices[0].finish_reason, "tool_calls");
  assert.equal(m.content, null);
  assert.equal(m.tool_calls.length, 1);
  const tc = m.tool_calls[0];
  assert.equal(tc.type, "function");
  assert.match(tc.id, /^call_[0-9a-f]{24}$/);
  assert.equal(tc.function.name, "get_weather");
  assert.equal(typeof tc.function.arguments, "string");
  assert.deepEqual(JSON.parse(tc.function.arguments), { city: "Paris", unit: "celsius" });
  step1 = m;
});

await check("streaming: delta.tool_calls (index, id and name first, arguments in pieces)", async () => {
  const s = await json.chat.completions.create({ model, messages: user, tools, test_output: CALL, stream: true });
  const out = await collect(s);
  assert.equal(out.finish, "tool_calls");
  assert.equal(out.content, "");
  assert.equal(out.calls.length, 1);
  assert.equal(out.calls[0].name, "get_weather");
  assert.deepEqual(JSON.parse(out.calls[0].arguments), { city: "Paris", unit: "celsius" });
  assert.ok(out.argChunks > 1, "arguments came in " + out.argChunks + " pieces");
});

await check("streaming through the client's own accumulator (beta.chat.completions.stream)", async () => {
  const s = json.beta.chat.completions.stream({ model, messages: user, tools, test_output: CALL + "\n" + CALL2 });
  const final = await s.finalChatCompletion();
  const tc = final.choices[0].message.tool_calls;
  assert.equal(final.choices[0].finish_reason, "tool_calls");
  assert.deepEqual(tc.map((t) => t.function.name), ["get_weather", "web_search"]);
  assert.deepEqual(JSON.parse(tc[1].function.arguments), { query: "Paris weather", max_results: 3 });
});

await check("two-step conversation: the tool result goes back, the answer is content", async () => {
  assert.ok(step1, "step 1 ran");
  const messages = [
    ...user,
    step1, // the client's own assistant message, tool_calls with string arguments
    { role: "tool", tool_call_id: step1.tool_calls[0].id, content: '{"temperature": 22, "unit": "celsius"}' },
  ];
  const r = await json.chat.completions.create({
    model, messages, tools, test_output: "It is 22 degrees in Paris.", return_prompt_ids: true,
  });
  assert.equal(r.choices[0].finish_reason, "stop");
  assert.equal(r.choices[0].message.content, "It is 22 degrees in Paris.");
  assert.equal(r.choices[0].message.tool_calls, undefined);
  fs.writeFileSync(process.env.TWOSTEP, JSON.stringify({ messages, tools, prompt_ids: r.prompt_ids }));
});

await check("parallel calls: two tool_calls, indices 0 and 1 when streamed", async () => {
  const r = await json.chat.completions.create({ model, messages: user, tools, test_output: CALL + "\n" + CALL2 });
  assert.deepEqual(r.choices[0].message.tool_calls.map((t) => t.function.name), ["get_weather", "web_search"]);
  const out = await collect(await json.chat.completions.create({
    model, messages: user, tools, test_output: CALL + "\n" + CALL2, stream: true,
  }));
  assert.deepEqual(out.calls.map((c) => c.name), ["get_weather", "web_search"]);
  assert.notEqual(out.calls[0].id, out.calls[1].id);
});

await check("parallel_tool_calls false: generation ends after the first call", async () => {
  const r = await json.chat.completions.create({
    model, messages: user, tools, parallel_tool_calls: false, test_output: CALL + "\n" + CALL2,
  });
  assert.equal(r.choices[0].message.tool_calls.length, 1);
  assert.equal(r.choices[0].message.tool_calls[0].function.name, "get_weather");
  const full = await json.chat.completions.create({ model, messages: user, tools, test_output: CALL + "\n" + CALL2 });
  assert.ok(r.usage.completion_tokens < full.usage.completion_tokens, "fewer tokens generated");
});

await check("reasoning stays in reasoning_content next to a call", async () => {
  const r = await json.chat.completions.create({
    model, messages: user, tools, test_output: "<think>\nThe user wants the weather.\n</think>\n\n" + CALL,
  });
  const m = r.choices[0].message;
  assert.equal(m.reasoning_content, "The user wants the weather.");
  assert.equal(m.tool_calls[0].function.name, "get_weather");
  assert.equal(m.content, null);
});

await check("text before a call is content; a call that does not parse is content, not dropped", async () => {
  const r = await json.chat.completions.create({ model, messages: user, tools, test_output: "Let me look.\n" + CALL });
  assert.equal(r.choices[0].message.content, "Let me look.");
  assert.equal(r.choices[0].message.tool_calls.length, 1);
  const broken = 'Sure.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": }\n</tool_call>';
  const b = await json.chat.completions.create({ model, messages: user, tools, test_output: broken });
  assert.equal(b.choices[0].message.content, broken);
  assert.equal(b.choices[0].message.tool_calls, undefined);
  assert.equal(b.choices[0].finish_reason, "stop");
  const out = await collect(await json.chat.completions.create({
    model, messages: user, tools, test_output: broken, stream: true,
  }));
  assert.equal(out.content, broken);
  assert.equal(out.calls.length, 0);
  const unclosed = 'One moment.\n<tool_call>\n{"name": "get_weather"';
  const u = await json.chat.completions.create({ model, messages: user, tools, test_output: unclosed });
  assert.equal(u.choices[0].message.content, unclosed);
});

await check("tool_choice none: a call in the output stays content", async () => {
  const r = await json.chat.completions.create({ model, messages: user, tools, tool_choice: "none", test_output: CALL });
  assert.equal(r.choices[0].message.content, CALL);
  assert.equal(r.choices[0].message.tool_calls, undefined);
});

await check("tool_choice named / required (real generation): the turn starts with the call, the rest is returned", async () => {
  const named = await json.chat.completions.create({
    model, messages: user, tools, max_tokens: 6, temperature: 0,
    tool_choice: { type: "function", function: { name: "get_weather" } },
  });
  // the random model does not finish the call: it comes back as content,
  // starting with the forced opening
  const c = named.choices[0].message.content;
  assert.ok(c.startsWith('<tool_call>\n{"name": "get_weather", "arguments": '), JSON.stringify(c));
  assert.equal(named.choices[0].finish_reason, "length");
  const req = await json.chat.completions.create({ model, messages: user, tools, max_tokens: 6, temperature: 0,
    tool_choice: "required" });
  assert.ok(req.choices[0].message.content.startsWith("<tool_call>\n"), JSON.stringify(req.choices[0].message.content));
});

// Qwen3.5 template: XML calls, the prompt opens a think block
const XCALL = "<tool_call>\n<function=web_search>\n<parameter=query>\nweather in Paris\n</parameter>\n" +
  "<parameter=max_results>\n3\n</parameter>\n</function>\n</tool_call>";
await check("Qwen3.5 format: <function=...> calls with typed parameters, reasoning separate", async () => {
  const r = await xml.chat.completions.create({
    model, messages: user, tools, test_output: "I should search.\n</think>\n\n" + XCALL,
  });
  const m = r.choices[0].message;
  assert.equal(r.choices[0].finish_reason, "tool_calls");
  assert.equal(m.reasoning_content, "I should search.");
  assert.equal(m.tool_calls[0].function.name, "web_search");
  assert.deepEqual(JSON.parse(m.tool_calls[0].function.arguments), { query: "weather in Paris", max_results: 3 });
  const out = await collect(await xml.chat.completions.create({
    model, messages: user, tools, test_output: "I should search.\n</think>\n\n" + XCALL, stream: true,
  }));
  assert.equal(out.reasoning, "I should search.");
  assert.equal(out.finish, "tool_calls");
  assert.deepEqual(JSON.parse(out.calls[0].arguments), { query: "weather in Paris", max_results: 3 });
});

await check("Qwen3.5 named tool_choice: think closed, the <function=...> opening forced", async () => {
  const r = await xml.chat.completions.create({
    model, messages: user, tools, max_tokens: 6, temperature: 0,
    tool_choice: { type: "function", function: { name: "web_search" } },
  });
  const m = r.choices[0].message;
  assert.ok(m.content.startsWith("<tool_call>\n<function=web_search>\n"), JSON.stringify(m.content));
  assert.equal(m.reasoning_content, undefined);
});

// Llama 3.2 template: the whole reply is the call's JSON object, no tags
const LCALL = '{"name": "get_weather", "parameters": {"city": "Paris", "unit": "celsius"}}';
await check("Llama 3 format: a bare {name, parameters} reply becomes tool_calls, whole and streamed", async () => {
  const r = await llama.chat.completions.create({ model, messages: user, tools, test_output: LCALL });
  const m = r.choices[0].message;
  assert.equal(r.choices[0].finish_reason, "tool_calls");
  assert.equal(m.content, null);
  assert.equal(m.tool_calls[0].function.name, "get_weather");
  assert.deepEqual(JSON.parse(m.tool_calls[0].function.arguments), { city: "Paris", unit: "celsius" });
  const out = await collect(await llama.chat.completions.create({
    model, messages: user, tools, test_output: LCALL, stream: true,
  }));
  assert.equal(out.content, "");
  assert.equal(out.finish, "tool_calls");
  assert.equal(out.calls[0].name, "get_weather");
  assert.deepEqual(JSON.parse(out.calls[0].arguments), { city: "Paris", unit: "celsius" });
});

await check("Llama 3 format: JSON that is not a call, and text, stay content", async () => {
  for (const t of ['{"answer": 42}', 'It is sunny. {"name": "get_weather", "parameters": {}}']) {
    const r = await llama.chat.completions.create({ model, messages: user, tools, test_output: t });
    assert.equal(r.choices[0].message.content, t);
    assert.equal(r.choices[0].message.tool_calls, undefined);
    const out = await collect(await llama.chat.completions.create({ model, messages: user, tools, test_output: t,
      stream: true }));
    assert.equal(out.content, t);
    assert.equal(out.calls.length, 0);
  }
});

await check("Llama 3 named tool_choice (real generation): the {\"name\": ..., \"parameters\": opening forced", async () => {
  const r = await llama.chat.completions.create({
    model, messages: user, tools, max_tokens: 6, temperature: 0,
    tool_choice: { type: "function", function: { name: "get_weather" } },
  });
  const c = r.choices[0].message.content;
  assert.ok(c.startsWith('{"name": "get_weather", "parameters": '), JSON.stringify(c));
});

if (failures) {
  console.log(`${failures} check(s) failed`);
  process.exit(1);
}
console.log("all openai tool-call checks passed");
