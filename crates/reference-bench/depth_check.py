"""Our llama.cpp backend's speed against context depth, held against llama.cpp's own
`llama-bench -d`: for each depth, a prompt of --prompt tokens prefilled after that many
cached tokens and --gen tokens decoded after both, by `lx sweep --depth` and by llama-bench
(its decode test run at the depth plus the prompt, where ours decodes),
in alternating order for --rounds rounds. Writes a `depth-reference` file that `lx show`
prints (medians, and ours ÷ llama-bench as the median of each round's ratio). Run by
scripts/depth-check.
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile


def run(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    if r.returncode != 0:
        sys.exit(f"{cmd[0]} failed ({r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}")
    return r.stdout


def llama_bench(a, depth):
    """llama-bench's prefill tok/s at `depth` and decode tok/s where ours decodes (after the
    depth and the prompt: llama-bench's own tg test starts at its depth, without the prompt),
    one repetition each."""
    def test(prompt, gen, at):
        out = run([a.bench, "-m", a.model, "-p", str(prompt), "-n", str(gen), "-d", str(at), "-r", "1",
                   "-t", str(a.threads), "-o", "json"])
        return next(t for t in json.loads(out) if t["n_prompt"] == prompt and t["n_gen"] == gen)
    pp = test(a.prompt, 0, depth)
    tg = test(0, a.gen, depth + a.prompt)
    return pp["avg_ts"], tg["avg_ts"], {"flash_attn": pp.get("flash_attn"), "n_ubatch": pp.get("n_ubatch"), "build": pp.get("build_commit")}


def ours(a, depth, tmp):
    """Our llama backend's prefill and decode tok/s (medians over --requests) at `depth`."""
    out = os.path.join(tmp, f"d{depth}.json")
    env = dict(os.environ, LX_UNTUNED="1")
    run([a.lx, "sweep", "--model", a.model, "--backend", "llama", "--prompt-tokens", str(a.prompt), "--max-tokens", str(a.gen),
         "--concurrency", "1", "--depth", str(depth), "--requests", str(a.requests), "--warmup", "1", "--threads", str(a.threads),
         "--no-ceilings", "--out", out], env)
    point = json.load(open(out))["points"][0]
    return point["prefill_tps"]["p50"], point["decode_tps"]["p50"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lx", required=True)
    ap.add_argument("--bench", required=True, help="llama-bench")
    ap.add_argument("--model", required=True)
    ap.add_argument("--depths", default="0,4096,16384,32000")
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--requests", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    depths = [int(d) for d in a.depths.split(",")]
    rounds, settings = [], None
    hardware = json.loads(run([a.lx, "hw", "--json"]))
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            for depth in depths:
                order = ["ours", "llama-bench"] if (r + depths.index(depth)) % 2 == 0 else ["llama-bench", "ours"]
                for who in order:
                    if who == "ours":
                        pp, tg = ours(a, depth, tmp)
                        name = "ours llama"
                    else:
                        pp, tg, settings = llama_bench(a, depth)
                        name = "llama-bench"
                    rounds.append({"round": r, "depth": depth, "implementation": name, "prefill_tok_s": pp, "decode_tok_s": tg})
                    print(f"round {r} depth {depth} {name}: prefill {pp:.1f} tok/s, decode {tg:.2f} tok/s", file=sys.stderr)
    result = {
        "kind": "depth-reference",
        "command": sys.argv,
        "date": datetime.date.today().isoformat(),
        "hardware": hardware,
        "model": os.path.basename(a.model),
        "prompt_tokens": a.prompt,
        "gen_tokens": a.gen,
        "decode_after": "depth + prompt tokens, in both",
        "threads": a.threads,
        "reference_settings": settings,
        "rounds": rounds,
    }
    tmp_out = a.out + ".tmp"
    with open(tmp_out, "w") as f:
        json.dump(result, f, indent=2)
    os.replace(tmp_out, a.out)


if __name__ == "__main__":
    main()
