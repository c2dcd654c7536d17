// The official `openai` JavaScript client against a running sluice, with only its base URL
// changed. Run by tests/clients.rs from the folder holding its node_modules; exits non-zero
// on the first check that fails. SLUICE_URL is the gateway, SLUICE_KEY a key it knows.
import OpenAI from "openai";

const url = process.env.SLUICE_URL;
const key = process.env.SLUICE_KEY;
const o = new OpenAI({ baseURL: `${url}/v1`, apiKey: key, maxRetries: 0 });
const hi = [{ role: "user", content: "hi" }];
const checked = [];

function check(name, ok, seen) {
  if (!ok) {
    console.error(`FAILED ${name}: ${JSON.stringify(seen)}`);
    process.exit(1);
  }
  checked.push(name);
}

async function raises(name, cls, call) {
  try {
    const got = await call();
    check(name, false, got);
  } catch (e) {
    check(name, e instanceof cls, `${e?.constructor?.name}: ${e?.message}`);
  }
}

const r = await o.chat.completions.create({ model: "ok", messages: hi });
check("chat", r.choices[0].message.content === "Hello from upstream", r);

let text = "";
const stream = await o.chat.completions.create({ model: "ok", messages: hi, stream: true });
for await (const c of stream) text += c.choices[0]?.delta?.content ?? "";
check("chat stream", text === "Hello", text);

let claude = "";
const s2 = await o.chat.completions.create({ model: "claude", messages: hi, stream: true });
for await (const c of s2) claude += c.choices[0]?.delta?.content ?? "";
check("chat stream (anthropic upstream)", claude === "Bonjour", claude);

const e = await o.embeddings.create({ model: "embed", input: ["a", "b"] });
check("embeddings (base64, decoded)", e.data.length === 2
  && JSON.stringify(Array.from(e.data[1].embedding)) === JSON.stringify([0.5, -0.25, 1.0]), e);
const f = await o.embeddings.create({ model: "embed", input: "a", encoding_format: "float" });
check("embeddings (float)", JSON.stringify(f.data[0].embedding) === JSON.stringify([0.5, -0.25, 1.0]), f);

await raises("400 (user message without content)", OpenAI.BadRequestError, () =>
  o.chat.completions.create({ model: "ok", messages: [{ role: "user" }] }));
await raises("404", OpenAI.NotFoundError, () =>
  o.chat.completions.create({ model: "no-such-model", messages: hi }));
await raises("401", OpenAI.AuthenticationError, () =>
  new OpenAI({ baseURL: `${url}/v1`, apiKey: "sk-wrong", maxRetries: 0 })
    .chat.completions.create({ model: "ok", messages: hi }));

console.log(`${checked.length} checks passed:\n${checked.join("\n")}`);
