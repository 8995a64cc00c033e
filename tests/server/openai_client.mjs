// openai_client.mjs - drives `blockdraft serve` with the official openai npm
// client: models (list, retrieve), completions, chat, responses (plain,
// streamed, the stream helper). Run by tests/e2e/server_openai.sh, which starts the server on the
// stories260K + DFlash fixture pair and writes EXPECT: the outputs of
// `blockdraft run --json` (an independent path through the engine) for the
// same prompts at temperature 0.
//
// env: BASE_URL (http://127.0.0.1:PORT/v1), MODEL, EXPECT (JSON file),
//      API_KEY (optional)
import OpenAI from "openai";
import fs from "node:fs";
import assert from "node:assert/strict";

const expect = JSON.parse(fs.readFileSync(process.env.EXPECT, "utf8"));
const model = process.env.MODEL;
const client = new OpenAI({ baseURL: process.env.BASE_URL, apiKey: process.env.API_KEY || "none", maxRetries: 0, timeout: 60000 });

let failures = 0;
async function check(name, fn) {
  try {
    await fn();
    console.log("ok:", name);
  } catch (e) {
    failures++;
    console.log("FAIL:", name, "\n   ", e && e.stack ? e.stack.split("\n").slice(0, 4).join("\n    ") : e);
  }
}

// The speculative object must be present and agree with itself and usage.
function checkSpec(sp, nGen, name) {
  assert.ok(sp, name + ": no speculative object");
  assert.equal(sp.type, "draft-dflash", name + ": speculative.type");
  assert.ok(Number.isInteger(sp.n_drafted) && Number.isInteger(sp.n_accepted), name + ": counts are integers");
  assert.ok(sp.n_accepted >= 0 && sp.n_accepted <= sp.n_drafted, name + ": accepted <= drafted");
  assert.ok(sp.target_forwards >= 1, name + ": target_forwards");
  // tau = tokens emitted per target forward (llama.cpp's mean acceptance length)
  assert.ok(Math.abs(sp.tau - nGen / sp.target_forwards) < 1e-9, `${name}: tau ${sp.tau} != ${nGen}/${sp.target_forwards}`);
  assert.ok(sp.tau >= 1 && sp.tau <= 1 + sp.n_max, name + ": tau in [1, n_max+1]");
}

function checkTimings(t, usage, name) {
  assert.ok(t, name + ": no timings");
  // llama-server's meanings: prompt_n tokens processed, cache_n kept from the slot's cache
  assert.equal(t.prompt_n + t.cache_n, usage.prompt_tokens, name + ": timings.prompt_n + cache_n");
  assert.equal(t.predicted_n, usage.completion_tokens, name + ": timings.predicted_n");
  assert.ok(t.prompt_ms > 0 && t.predicted_ms > 0, name + ": positive times");
  assert.ok(Math.abs(t.predicted_per_second - (1000 * t.predicted_n) / t.predicted_ms) / t.predicted_per_second < 1e-6,
    name + ": predicted_per_second = n / ms");
}

await check("models.list contains the served model", async () => {
  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  assert.ok(ids.includes(model), `model list ${JSON.stringify(ids)} lacks ${model}`);
});

const exp = expect.completion;
await check("completions (non-streaming) equal `blockdraft run` at temperature 0", async () => {
  const r = await client.completions.create({ model, prompt: exp.prompt, max_tokens: exp.n, temperature: 0 });
  assert.equal(r.object, "text_completion");
  assert.equal(r.choices[0].text, exp.text);
  assert.equal(r.choices[0].finish_reason, "length");
  assert.equal(r.usage.prompt_tokens, exp.prompt_ids.length);
  assert.equal(r.usage.completion_tokens, exp.generated_ids.length);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  checkTimings(r.timings, r.usage, "completion");
  checkSpec(r.speculative, r.usage.completion_tokens, "completion");
  // the trained drafter predicts this story well: same statistics as `run`
  assert.equal(r.speculative.n_drafted, exp.spec.n_drafted, "n_drafted equals run's");
  assert.equal(r.speculative.n_accepted, exp.spec.n_accepted, "n_accepted equals run's");
  assert.ok(r.speculative.tau > 2, "tau > 2 with the trained drafter, got " + r.speculative.tau);
  // llama-server's names for the same counts
  assert.equal(r.timings.draft_n, r.speculative.n_drafted, "timings.draft_n");
  assert.equal(r.timings.draft_n_accepted, r.speculative.n_accepted, "timings.draft_n_accepted");
});

await check("completions (streaming) concatenate to the same text", async () => {
  const stream = await client.completions.create({ model, prompt: exp.prompt, max_tokens: exp.n, temperature: 0, stream: true });
  let text = "", chunks = 0, finish = null, spec = null;
  for await (const c of stream) {
    chunks++;
    if (c.choices && c.choices.length) {
      text += c.choices[0].text || "";
      if (c.choices[0].finish_reason) finish = c.choices[0].finish_reason;
    }
    if (c.speculative) spec = c.speculative;
  }
  assert.equal(text, exp.text);
  assert.equal(finish, "length");
  assert.ok(chunks > 3, "streamed in several chunks, got " + chunks);
  checkSpec(spec, exp.generated_ids.length, "completion stream");
});

await check("stop strings end the completion before the stop text", async () => {
  const stop = expect.stop.stop;
  const r = await client.completions.create({ model, prompt: exp.prompt, max_tokens: exp.n, temperature: 0, stop: [stop] });
  assert.equal(r.choices[0].text, expect.stop.text);
  assert.equal(r.choices[0].finish_reason, "stop");
  // streamed: text that could be the start of the stop string is held back, never sent
  const stream = await client.completions.create({ model, prompt: exp.prompt, max_tokens: exp.n, temperature: 0, stop, stream: true });
  let text = "", finish = null;
  for await (const c of stream) {
    for (const ch of c.choices || []) {
      text += ch.text || "";
      if (ch.finish_reason) finish = ch.finish_reason;
    }
  }
  assert.equal(text, expect.stop.text);
  assert.equal(finish, "stop");
});

const chat = expect.chat;
let chatContent = null;
await check("chat (non-streaming) equals `blockdraft run` on the ChatML prompt", async () => {
  const r = await client.chat.completions.create({ model, messages: chat.messages, max_tokens: chat.n, temperature: 0 });
  assert.equal(r.object, "chat.completion");
  assert.equal(r.choices[0].message.role, "assistant");
  chatContent = r.choices[0].message.content;
  assert.equal(chatContent, chat.text);
  assert.equal(r.usage.prompt_tokens, chat.prompt_ids.length);
  assert.equal(r.usage.completion_tokens, chat.generated_ids.length);
  checkTimings(r.timings, r.usage, "chat");
  checkSpec(r.speculative, r.usage.completion_tokens, "chat");
  assert.equal(r.speculative.n_accepted, chat.spec.n_accepted);
});

await check("chat (streaming, include_usage) gives the same content, usage and statistics", async () => {
  const stream = await client.chat.completions.create({
    model, messages: chat.messages, max_tokens: chat.n, temperature: 0, stream: true, stream_options: { include_usage: true },
  });
  let content = "", role = null, usage = null, finish = null, spec = null, deltas = 0;
  for await (const c of stream) {
    if (c.usage) {
      usage = c.usage;
      assert.equal(c.choices.length, 0, "usage chunk has no choices");
      assert.ok(c.speculative && c.timings, "usage chunk carries timings and speculative");
    }
    for (const ch of c.choices || []) {
      if (ch.delta && ch.delta.role) role = ch.delta.role;
      if (ch.delta && ch.delta.content) { content += ch.delta.content; deltas++; }
      if (ch.finish_reason) { finish = ch.finish_reason; spec = c.speculative; }
    }
  }
  assert.equal(role, "assistant");
  assert.equal(content, chat.text);
  assert.ok(deltas > 1, "content arrived in several deltas");
  assert.equal(finish, "length");
  assert.ok(usage, "usage chunk present");
  assert.equal(usage.completion_tokens, chat.generated_ids.length);
  checkSpec(spec, usage.completion_tokens, "chat stream");
});

await check("sampling parameters are accepted and seeded sampling is reproducible", async () => {
  const args = { model, messages: chat.messages, max_tokens: 24, temperature: 0.9, top_p: 0.9, seed: 42 };
  const a = await client.chat.completions.create({ ...args, top_k: 20, min_p: 0.05 });
  const b = await client.chat.completions.create({ ...args, top_k: 20, min_p: 0.05 });
  assert.equal(a.choices[0].message.content, b.choices[0].message.content);
  assert.equal(a.usage.completion_tokens, 24);
});

await check("unknown model is a 404 NotFoundError", async () => {
  await assert.rejects(client.chat.completions.create({ model: "no-such-model", messages: chat.messages }),
    (e) => e instanceof OpenAI.NotFoundError && e.status === 404 && /no-such-model/.test(e.message));
});

await check("bad parameters are 400 BadRequestError naming the parameter", async () => {
  await assert.rejects(client.chat.completions.create({ model, messages: chat.messages, temperature: "hot" }),
    (e) => e instanceof OpenAI.BadRequestError && /temperature/.test(e.message));
  await assert.rejects(client.chat.completions.create({ model, messages: [] }),
    (e) => e instanceof OpenAI.BadRequestError && /messages/.test(e.message));
  await assert.rejects(client.completions.create({ model, prompt: "x", max_tokens: 1e9 }),
    (e) => e instanceof OpenAI.BadRequestError && /max_tokens/.test(e.message));
});

// ---- OpenAI Responses API: the same ChatML prompt as the chat checks
// (instructions = the system message, input = the user message), so the
// expected text is `blockdraft run`'s on it.
const respArgs = { model, instructions: chat.messages[0].content, input: chat.messages[1].content,
                   max_output_tokens: chat.n, temperature: 0 };
const respStatus = chat.generated_ids.length === chat.n ? "incomplete" : "completed";

await check("responses.create (plain) equals `blockdraft run` on the ChatML prompt", async () => {
  const r = await client.responses.create(respArgs);
  assert.equal(r.object, "response");
  assert.ok(r.id.startsWith("resp_"), "id resp_...");
  assert.equal(r.output_text, chat.text, "the SDK's output_text");
  assert.equal(r.status, respStatus);
  if (respStatus === "incomplete") assert.equal(r.incomplete_details.reason, "max_output_tokens");
  assert.equal(r.output.length, 1);
  const m = r.output[0];
  assert.equal(m.type, "message");
  assert.equal(m.role, "assistant");
  assert.ok(m.id.startsWith("msg_"));
  assert.deepEqual(m.content, [{ type: "output_text", text: chat.text, annotations: [] }]);
  assert.equal(r.usage.input_tokens, chat.prompt_ids.length);
  assert.equal(r.usage.output_tokens, chat.generated_ids.length);
  assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
  assert.ok(Number.isInteger(r.usage.input_tokens_details.cached_tokens));
  assert.equal(r.instructions, chat.messages[0].content);
  assert.equal(r.max_output_tokens, chat.n);
  assert.equal(r.model, model);
  checkSpec(r.speculative, r.usage.output_tokens, "responses");
  assert.equal(r.speculative.n_accepted, chat.spec.n_accepted);
  assert.equal(r.timings.predicted_n, r.usage.output_tokens);
  assert.equal(r.timings.draft_n, r.speculative.n_drafted);
});

await check("responses.create (stream): the API's event sequence, deltas concatenate to the text", async () => {
  const stream = await client.responses.create({ ...respArgs, stream: true });
  const types = [], seqs = [];
  let text = "", final = null, doneText = null;
  for await (const e of stream) {
    types.push(e.type);
    seqs.push(e.sequence_number);
    if (e.type === "response.output_text.delta") {
      assert.equal(e.output_index, 0);
      assert.equal(e.content_index, 0);
      text += e.delta;
    }
    if (e.type === "response.output_text.done") doneText = e.text;
    if (e.type === "response.completed" || e.type === "response.incomplete") final = e.response;
  }
  const n = types.length;
  assert.deepEqual(types.slice(0, 4), ["response.created", "response.in_progress", "response.output_item.added",
                                       "response.content_part.added"]);
  assert.deepEqual(types.slice(n - 4), ["response.output_text.done", "response.content_part.done",
                                        "response.output_item.done", "response." + respStatus]);
  assert.ok(types.slice(4, n - 4).every((t) => t === "response.output_text.delta") && n - 8 > 1,
    "several output_text.delta events in between");
  assert.deepEqual(seqs, [...Array(n).keys()], "sequence_number counts from 0");
  assert.equal(text, chat.text);
  assert.equal(doneText, chat.text);
  assert.ok(final, "a final response event");
  assert.equal(final.status, respStatus);
  assert.equal(final.output[0].content[0].text, chat.text);
  assert.equal(final.usage.output_tokens, chat.generated_ids.length);
  checkSpec(final.speculative, final.usage.output_tokens, "responses stream");
});

await check("responses.stream() (the SDK's accumulating helper) builds the same response", async () => {
  const s = client.responses.stream(respArgs);
  const deltas = [];
  s.on("response.output_text.delta", (e) => deltas.push(e.delta));
  const r = await s.finalResponse(); // (this SDK version sets no output_text on it)
  assert.equal(r.output[0].content[0].text, chat.text);
  // the helper takes the response of response.completed; at the token limit
  // (response.incomplete, which this SDK does not handle) it keeps its snapshot
  assert.equal(r.status, respStatus === "completed" ? "completed" : "in_progress");
  assert.equal(deltas.join(""), chat.text);
});

await check("responses: unsupported fields are 400 naming them", async () => {
  await assert.rejects(client.responses.create({ ...respArgs, previous_response_id: "resp_x" }),
    (e) => e instanceof OpenAI.BadRequestError && /previous_response_id/.test(e.message));
  await assert.rejects(client.responses.create({ ...respArgs, tools: [{ type: "function", name: "f", parameters: {} }] }),
    (e) => e instanceof OpenAI.BadRequestError && /tools/.test(e.message));
  await assert.rejects(client.responses.create({ ...respArgs, model: "no-such-model" }),
    (e) => e instanceof OpenAI.NotFoundError);
});

await check("models.retrieve: the served model, and 404 for an unknown one", async () => {
  const m = await client.models.retrieve(model);
  assert.equal(m.id, model);
  assert.equal(m.object, "model");
  assert.equal(typeof m.owned_by, "string");
  await assert.rejects(client.models.retrieve("no-such-model"), (e) => e instanceof OpenAI.NotFoundError && e.status === 404);
});

if (failures) {
  console.log(`${failures} check(s) failed`);
  process.exit(1);
}
console.log("all openai client checks passed");
