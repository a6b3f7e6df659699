// An OpenAI-compatible server whose timing is known: every streamed completion sends its
// first token `firstMs` after the request arrives, then one every `gapMs`, then the usage
// (with the prompt length the test says the app sends) and [DONE]. What the app measures
// against it can be checked against that schedule.

import http from "node:http";

/**
 * Start it on a free loopback port. Returns `{ url, requests, prompt, close }`: `url` ends
 * in /v1, `requests` holds each completion request's body, `prompt.tokens` is what the
 * usage chunk reports as the prompt's length.
 */
export async function pacedServer({ model = "paced", firstMs, gapMs }) {
  const requests = [];
  const prompt = { tokens: 0 };
  const timers = new Set();
  const wait = (ms) => new Promise((resolve) => timers.add(setTimeout(resolve, ms)));
  const server = http.createServer((req, res) => {
    if (req.method === "GET" && req.url === "/v1/models") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ object: "list", data: [{ id: model, object: "model" }] }));
      return;
    }
    if (req.method !== "POST" || req.url !== "/v1/completions") {
      res.writeHead(404).end();
      return;
    }
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", async () => {
      const ask = JSON.parse(body);
      requests.push(ask);
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      const send = (v) => res.write(`data: ${JSON.stringify(v)}\n\n`);
      const n = ask.max_tokens;
      for (let i = 0; i < n && !res.destroyed; i++) {
        await wait(i === 0 ? firstMs : gapMs);
        send({ id: "c", object: "text_completion", choices: [{ index: 0, text: " tok", finish_reason: i + 1 === n ? "length" : null }] });
      }
      send({ id: "c", choices: [], usage: { prompt_tokens: prompt.tokens, completion_tokens: n, total_tokens: prompt.tokens + n } });
      res.end("data: [DONE]\n\n");
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${server.address().port}/v1`;
  const close = () => {
    for (const t of timers) clearTimeout(t);
    server.closeAllConnections();
    return new Promise((resolve) => server.close(resolve));
  };
  return { url, requests, prompt, close };
}
