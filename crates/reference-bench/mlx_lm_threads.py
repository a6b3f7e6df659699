"""How long MLX waits for the host in mlx-lm's own decode loops, beside how long it computes.

MLX's CPU build evaluates on a thread of its own; the process's host thread builds and queues
the graphs. A decode step's time less the evaluating thread's CPU time is how long MLX waited
for the host. This times mlx-lm's loops that way: `generate_step` for one sequence,
`BatchGenerator` for several (the same prompt each, as mlx-reference runs them), on the GGUF
converted as mlx_lm_worker.py converts it, in float32. examples/decode_steps.rs in the MLX
backend prints the same figures for ours.

Usage: python mlx_lm_threads.py MODEL.gguf [--seqs N] [--rounds N] [--prompt N] [--gen N]
(Linux: thread times come from /proc; run with the Python scripts/reference-bench makes).
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import mlx.core as mx  # noqa: E402
from mlx_lm.generate import BatchGenerator, generate_step  # noqa: E402

import mlx_lm_worker  # noqa: E402


def thread_cpu():
    """CPU seconds each thread of this process has used, by thread id."""
    out = {}
    for t in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{t}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[t] = (int(fields[11]) + int(fields[12])) / 100.0
    return out


def busiest_ms(before, steps):
    """The two busiest threads since `before`, in ms of CPU a step (MLX's evaluating thread first)."""
    used = sorted(((s - before.get(t, 0.0)) * 1e3 / steps for t, s in thread_cpu().items()), reverse=True)
    return used[:2]


def one(model, ids, gen):
    first = None
    for _ in generate_step(mx.array(ids), model, max_tokens=gen):
        if first is None:
            first, t0 = time.perf_counter(), thread_cpu()
    return (time.perf_counter() - first) * 1e3 / (gen - 1), busiest_ms(t0, gen - 1)


def several(model, ids, gen, seqs):
    g = BatchGenerator(model, max_tokens=gen, prefill_batch_size=seqs, completion_batch_size=seqs)
    try:
        got = {uid: 0 for uid in g.insert([list(ids)] * seqs, [gen] * seqs)}
        first = None
        while responses := g.next_generated():
            for r in responses:
                got[r.uid] += 1
            if first is None and all(got.values()):
                first, t0 = time.perf_counter(), thread_cpu()
        return (time.perf_counter() - first) * 1e3 / (gen - 1), busiest_ms(t0, gen - 1)
    finally:
        g.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gguf")
    ap.add_argument("--seqs", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--prompt", type=int, default=16)
    ap.add_argument("--gen", type=int, default=64)
    a = ap.parse_args()
    model, _ = mlx_lm_worker.load(a.gguf, "float32")
    ids = list(range(1000, 1000 + a.prompt))
    loop = "generate_step" if a.seqs == 1 else "BatchGenerator"
    for r in range(a.rounds + 1):
        ms, (mlx, host) = one(model, ids, a.gen) if a.seqs == 1 else several(model, ids, a.gen, a.seqs)
        if r:  # the first round warms up
            print(f"mlx-lm {loop:14s} seqs {a.seqs}  {ms:7.2f} ms a step  busiest threads, ms a step: {mlx:.1f}, {host:.1f}  (MLX waited {ms - mlx:.1f})", flush=True)


if __name__ == "__main__":
    main()
