"""What mlx-lm's overlap of graph building with evaluation is worth in decode.

mlx-lm's `generate_step` builds the next step's graph while MLX evaluates this one
(`mx.async_eval`); our MLX backend builds, evaluates and reads back in turn. This runs mlx-lm's
own model both ways on the same weights (the GGUF converted as mlx_lm_worker.py converts it,
held in float32) and the same cache type: its `generate_step`, and a plain loop that
evaluates each step before building the next. Rounds alternate which goes first.

Usage: python mlx_lm_overlap.py MODEL.gguf [--rounds N] [--gen N] [--out FILE.json]
(run with the Python scripts/reference-bench makes: mlx-lm 0.32.2 on mlx[cpu] 0.32.2).
"""

import argparse
import json
import os
import platform
import resource
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import mlx.core as mx  # noqa: E402
from mlx_lm.generate import generate_step  # noqa: E402
from mlx_lm.models.cache import make_prompt_cache  # noqa: E402

import mlx_lm_worker  # noqa: E402


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def overlapped(model, ids, gen):
    """mlx-lm's own loop: decode tok/s after the first token, and cores kept busy."""
    tokens, first, c0 = [], None, 0.0
    for token, _ in generate_step(mx.array(ids), model, max_tokens=gen):
        if first is None:
            first, c0 = time.perf_counter(), cpu_seconds()
        tokens.append(int(token))
    end = time.perf_counter()
    return (gen - 1) / (end - first), (cpu_seconds() - c0) / (end - first), tokens


def in_turn(model, ids, gen):
    """Each step evaluated and read back before the next is built, as our backend does."""
    cache = make_prompt_cache(model)
    y = mx.argmax(model(mx.array(ids)[None], cache=cache)[:, -1, :], axis=-1)
    mx.eval(y)
    tokens = [y.item()]
    first, c0 = time.perf_counter(), cpu_seconds()
    for _ in range(gen - 1):
        y = mx.argmax(model(y[None], cache=cache)[:, -1, :], axis=-1)
        mx.eval(y)
        tokens.append(y.item())
    end = time.perf_counter()
    return (gen - 1) / (end - first), (cpu_seconds() - c0) / (end - first), tokens


def async_eval_share(model, ids, gen):
    """The share of a decode step's evaluation that `mx.async_eval` takes before it returns: host
    work an overlap hides has to fit in the rest of the step."""
    cache = make_prompt_cache(model)
    y = mx.argmax(model(mx.array(ids)[None], cache=cache)[:, -1, :], axis=-1)
    mx.eval(y)
    blocked = total = 0.0
    for _ in range(gen - 1):
        y = mx.argmax(model(y[None], cache=cache)[:, -1, :], axis=-1)
        t0 = time.perf_counter()
        mx.async_eval(y)
        t1 = time.perf_counter()
        y.item()
        blocked, total = blocked + t1 - t0, total + time.perf_counter() - t0
    return blocked / total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gguf")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--gen", type=int, default=32)
    ap.add_argument("--out")
    a = ap.parse_args()
    model, about = mlx_lm_worker.load(a.gguf, "float32")
    # Timing does not depend on which tokens; both loops get the same ones.
    ids = list(range(1000, 1000 + a.prompt))
    loops = {"overlapped (generate_step)": overlapped, "in turn": in_turn}
    for run in loops.values():  # unmeasured warm-up
        run(model, ids, a.gen)
    rounds = {name: [] for name in loops}
    busy = {name: [] for name in loops}
    for r in range(a.rounds):
        order = list(loops) if r % 2 == 0 else list(reversed(loops))
        for name in order:
            tps, cores, tokens = loops[name](model, ids, a.gen)
            rounds[name].append(tps)
            busy[name].append(cores)
            print(f"round {r}: {name:27s} decode {tps:6.2f} tok/s, {cores:.2f} cores busy, tokens {tokens[:4]}...", flush=True)
    share = async_eval_share(model, ids, a.gen)
    print(f"mx.async_eval returned after {share:.0%} of each step's evaluation", flush=True)
    medians = {name: statistics.median(v) for name, v in rounds.items()}
    ratios = [o / t for o, t in zip(rounds["overlapped (generate_step)"], rounds["in turn"])]
    result = {
        "what": "mlx-lm's decode with its overlap of graph building and evaluation (generate_step) and without it (each step evaluated before the next is built); same model, weights, cache type and process",
        "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cpu": platform.processor() or platform.machine(),
        "model": os.path.basename(a.gguf),
        "conversion": about,
        "prompt_tokens": a.prompt,
        "gen_tokens": a.gen,
        "decode_tok_s": rounds,
        "cores_busy": busy,
        "decode_median": medians,
        "overlapped_over_in_turn_per_round": ratios,
        "overlapped_over_in_turn_median": statistics.median(ratios),
        "async_eval_share_of_step": share,
    }
    print(json.dumps({k: result[k] for k in ("decode_median", "overlapped_over_in_turn_median")}))
    if a.out:
        tmp = a.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")
        os.replace(tmp, a.out)


if __name__ == "__main__":
    main()
