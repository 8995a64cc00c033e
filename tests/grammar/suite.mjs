// suite.mjs - the JSON Schema side of tests/e2e/grammar_schema.sh, with a
// real validator (ajv 2020-12 + ajv-formats).
//
//   node suite.mjs prepare SUITE DIR   write DIR/s<i>.json (schema) and
//                                      DIR/s<i>.inst (each instance as one
//                                      JSON string line: its compact text)
//   node suite.mjs validate SUITE DIR  check, for every schema:
//     - the grammar's verdict on each instance (DIR/s<i>.verdict, one 0/1
//       line per instance) equals ajv's, and ajv's equals the suite's label;
//     - every generated output DIR/o<i>-<mode>.json (blockdraft run --json)
//       stopped by itself (the grammar was complete), parses as JSON and is
//       valid for the schema;
//     - temperature 0 outputs with and without a drafter are identical.
import fs from "node:fs";
import path from "node:path";
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";

const [mode, suitePath, dir] = process.argv.slice(2);
const suite = JSON.parse(fs.readFileSync(suitePath, "utf8"));

if (mode === "prepare") {
  suite.forEach((s, i) => {
    fs.writeFileSync(path.join(dir, `s${i}.json`), JSON.stringify(s.schema));
    const lines = [...s.valid, ...s.invalid].map((v) => JSON.stringify(JSON.stringify(v)));
    fs.writeFileSync(path.join(dir, `s${i}.inst`), lines.join("\n") + "\n");
  });
  process.exit(0);
}

const MODES = ["q-t0", "q-t0-dflash", "q-t1", "q-t1-dflash", "s-t0", "s-t0-dflash"];
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats.default ? addFormats.default(ajv) : addFormats(ajv);
let failures = 0, outputs = 0, instances = 0, pairs = 0, drafted = 0, accepted = 0;
const fail = (msg) => { failures++; console.log("FAIL " + msg); };
suite.forEach((s, i) => {
  const validate = ajv.compile(s.schema);
  const verdicts = fs.readFileSync(path.join(dir, `s${i}.verdict`), "utf8").trim().split("\n");
  const all = [...s.valid.map((v) => [v, true]), ...s.invalid.map((v) => [v, false])];
  all.forEach(([v, label], k) => {
    const a = validate(v), g = verdicts[k] === "1";
    if (a !== label) fail(`${s.name}: suite label ${label} but ajv says ${a} for ${JSON.stringify(v)}`);
    if (g !== a) fail(`${s.name}: grammar ${g} but ajv ${a} for ${JSON.stringify(v)}`);
    instances++;
  });
  const files = fs.readdirSync(dir).filter((f) => f.startsWith(`o${i}-`) && f.endsWith(".json"));
  if (s.generate ?? true)
    for (const m of MODES)
      if (!files.includes(`o${i}-${m}.json`)) fail(`${s.name}: no output for ${m} (the run failed)`);
  const byMode = {};
  for (const f of files) {
    const o = JSON.parse(fs.readFileSync(path.join(dir, f), "utf8"));
    const m = f.slice(`o${i}-`.length, -".json".length);
    byMode[m] = o;
    outputs++;
    drafted += o.stats.spec.n_drafted; accepted += o.stats.spec.n_accepted;
    if (!o.stats.stopped_eog) { fail(`${s.name}/${m}: did not end by itself (${o.stats.n_gen} tokens): ${JSON.stringify(o.text.slice(0, 200))}`); continue; }
    let v;
    try { v = JSON.parse(o.text); } catch (e) { fail(`${s.name}/${m}: not JSON: ${JSON.stringify(o.text)}`); continue; }
    if (!validate(v)) fail(`${s.name}/${m}: invalid ${JSON.stringify(o.text)}: ${ajv.errorsText(validate.errors)}`);
  }
  for (const [a, b] of [["q-t0", "q-t0-dflash"], ["s-t0", "s-t0-dflash"]]) {
    if (!byMode[a] || !byMode[b]) continue;
    pairs++;
    if (JSON.stringify(byMode[a].generated_ids) !== JSON.stringify(byMode[b].generated_ids))
      fail(`${s.name}: ${a} and ${b} differ:\n  ${JSON.stringify(byMode[a].text)}\n  ${JSON.stringify(byMode[b].text)}`);
  }
});
console.log(`${suite.length} schemas; ${instances} instances: grammar == ajv; ${outputs} generated outputs valid; ` +
            `${pairs} temperature-0 pairs identical with and without the drafter; drafts ${drafted}, accepted ${accepted}`);
if (failures) { console.log(`${failures} failures`); process.exit(1); }
// accepted drafts advance the grammar state within a verify step: make sure
// that path really ran (the trained stories260K drafter is right often)
if (accepted < 100) { console.log(`FAIL: only ${accepted} drafts accepted: the speculative path under a grammar was hardly exercised`); process.exit(1); }
