// openai_client.mjs - drives `blockdraft serve` with the official openai npm
// client. Run by tests/e2e/server_openai.sh, which starts the server on the
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
  assert.equal(t.prompt_n, usage.prompt_tokens, name + ": timings.prompt_n");
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

if (failures) {
  console.log(`${failures} check(s) failed`);
  process.exit(1);
}
console.log("all openai client checks passed");
