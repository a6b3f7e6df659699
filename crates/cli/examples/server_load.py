"""Closed-loop streaming load on llama.cpp's own server, for the batching benchmark (batching.rs).

Reads one JSON job on stdin: {"url", "clients", "warmup", "max_tokens", "prompts": [[ids], ...]}.
`clients` threads each send their next request when the previous one has finished; the first
`warmup` requests are not measured. Every request streams (Server-Sent Events) and every event
is stamped on receipt with this process's monotonic clock, as lx stamps its worker's tokens.
Writes {"records": [{"ttft_ms", "token_ms": [...], "tokens"}], "window_ms"} on stdout.

Standard library only, so it runs with any python3.
"""

import http.client
import json
import sys
import threading
import time
from urllib.parse import urlparse


def one_request(host, port, prompt, max_tokens):
    body = json.dumps({
        "prompt": prompt,
        "n_predict": max_tokens,
        "ignore_eos": True,
        "stream": True,
        "cache_prompt": False,
        "temperature": 0.0,
        "return_tokens": True,
    })
    conn = http.client.HTTPConnection(host, port, timeout=600)
    submit = time.perf_counter()
    conn.request("POST", "/completion", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"server answered {resp.status}: {resp.read()[:200]!r}")
    stamps = []  # (ms since submit, tokens in the event)
    for raw in resp:
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("data: "):
            continue
        now = time.perf_counter()
        event = json.loads(line[6:])
        n = len(event.get("tokens") or [])
        if n:
            stamps.append(((now - submit) * 1000.0, n))
        if event.get("stop"):
            break
    conn.close()
    done = time.perf_counter()
    token_ms = [t for t, n in stamps for _ in range(n)]
    return submit, done, token_ms


def run_phase(url, prompts, indices, clients, max_tokens, results, errors):
    """`clients` threads take the next request of `indices` as each finishes its last."""
    lock = threading.Lock()
    pending = list(reversed(indices))

    def client():
        while True:
            with lock:
                if not pending or errors:
                    return
                i = pending.pop()
            try:
                results[i] = one_request(url.hostname, url.port, prompts[i], max_tokens)
            except Exception as e:  # reported by the benchmark, which then stops
                with lock:
                    errors.append(f"request {i}: {e}")

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def main():
    job = json.load(sys.stdin)
    url = urlparse(job["url"])
    prompts = job["prompts"]
    warmup = job["warmup"]
    results = [None] * len(prompts)
    errors = []
    for indices in (range(0, warmup), range(warmup, len(prompts))):
        run_phase(url, prompts, indices, job["clients"], job["max_tokens"], results, errors)
    if errors:
        print(json.dumps({"error": "; ".join(errors)}))
        return
    measured = results[warmup:]
    start = min(r[0] for r in measured)
    end = max(r[1] for r in measured)
    print(json.dumps({
        "records": [{"ttft_ms": r[2][0], "token_ms": r[2], "tokens": len(r[2])} for r in measured],
        "window_ms": (end - start) * 1000.0,
    }))


if __name__ == "__main__":
    main()
