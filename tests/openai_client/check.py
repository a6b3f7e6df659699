"""`lx serve` driven by the official `openai` Python client: models, completions and chat,
streamed and whole, concurrent streams, a cancelled stream that frees its slot, clear errors.

Usage: python check.py BASE_URL API_KEY   (BASE_URL like http://127.0.0.1:PORT/v1)
Exits non-zero with the failing check's message.
"""

import sys
import threading
import time
import urllib.request

import openai

base, key = sys.argv[1], sys.argv[2]
client = openai.OpenAI(base_url=base, api_key=key, max_retries=0, timeout=120)
EXACT = {"ignore_eos": True}


def metric(name):
    text = urllib.request.urlopen(base.removesuffix("/v1") + "/metrics").read().decode()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    raise AssertionError(f"no {name} in /metrics")


def check(what, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {what} {detail}")
    if not ok:
        sys.exit(1)


model = client.models.list().data[0].id
check("models lists the served model", model == "gemma-3-270m-q4_k_m", model)

c = client.completions.create(model=model, prompt="Once upon a time", max_tokens=8, extra_body=EXACT)
check("completion, whole", c.usage.completion_tokens == 8 and c.choices[0].finish_reason == "length" and c.choices[0].text, repr(c.choices[0].text))

chunks = list(client.completions.create(model=model, prompt="Once upon a time", max_tokens=8, stream=True,
                                        stream_options={"include_usage": True}, extra_body=EXACT))
text = "".join(ch.choices[0].text for ch in chunks if ch.choices)
usage = [ch.usage for ch in chunks if ch.usage]
check("completion, streamed, same text as whole (greedy)", text == c.choices[0].text, repr(text))
check("completion, streamed usage", len(usage) == 1 and usage[0].completion_tokens == 8, str(usage))

chat = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Say hello."}], max_tokens=12)
check("chat, whole", chat.choices[0].message.role == "assistant" and chat.usage.prompt_tokens > 5, repr(chat.choices[0].message.content))
deltas = list(client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Say hello."}], max_tokens=12, stream=True))
streamed = "".join(d.choices[0].delta.content or "" for d in deltas if d.choices)
check("chat, streamed, same text as whole", streamed == chat.choices[0].message.content, repr(streamed))

results = []


def one(i):
    s = client.completions.create(model=model, prompt=f"Story {i}: once", max_tokens=16, stream=True, extra_body=EXACT)
    results.append(sum(1 for ch in s if ch.choices and ch.choices[0].text))


threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
[t.start() for t in threads]
[t.join() for t in threads]
check("four concurrent streams of 16 tokens", sorted(results) == [16] * 4, str(results))

cancelled = metric('lx_requests_total{outcome="cancelled"}')
stream = client.completions.create(model=model, prompt="Once upon a time", max_tokens=400, stream=True, extra_body=EXACT)
for i, _ in enumerate(stream):
    if i == 2:
        break
stream.close()
deadline = time.time() + 10
while metric('lx_requests_total{outcome="cancelled"}') <= cancelled and time.time() < deadline:
    time.sleep(0.05)
check("a closed stream is cancelled and frees its slot",
      metric('lx_requests_total{outcome="cancelled"}') == cancelled + 1 and metric("lx_running_sequences") == 0)

try:
    client.completions.create(model=model, prompt="word " * 600, max_tokens=8)
    check("a prompt longer than the context is refused", False)
except openai.BadRequestError as e:
    check("a prompt longer than the context is refused", "do not fit the context" in str(e), str(e)[:120])

try:
    openai.OpenAI(base_url=base, api_key="wrong", max_retries=0).models.list()
    check("a wrong API key is refused", False)
except openai.AuthenticationError:
    check("a wrong API key is refused", True)
