"""Our fidelity figures held against llama.cpp's own tool: `lx fidelity --backends llama`
(llama.cpp's KV cache types against an f16 cache, or the model against --reference-model)
and `llama-perplexity --kl-divergence` on the same text, model, context and chunks. For each
candidate: mean KL divergence, its 99th percentile, top-1 agreement and perplexity, ours and
llama-perplexity's, and whether ours is within 1% of theirs. Writes a `fidelity-check` file
that `lx show` prints; exits 1 where a figure is not within 1%. Run by scripts/fidelity-check.
"""

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TEXT = os.path.join(HERE, "..", "run", "texts", "devils-dictionary.txt")
# What llama-perplexity prints, and the name our file gives the same figure.
FIGURES = {
    "mean_kl": r"Mean\s+KLD:\s+([-0-9.e]+)",
    "p99_kl": r"99\.0%\s+KLD:\s+([-0-9.e]+)",
    "top1_agreement": r"Same top p:\s+([-0-9.e]+)",
    "perplexity": r"Mean PPL\(Q\)\s+:\s+([-0-9.e]+)",
}
WITHIN = 0.01


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        sys.exit(f"{cmd[0]} failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return r.stdout + r.stderr


def parse(out):
    got = {}
    for name, pattern in FIGURES.items():
        m = re.search(pattern, out)
        if not m:
            sys.exit(f"llama-perplexity printed no {name}:\n{out[-3000:]}")
        got[name] = float(m.group(1))
    got["top1_agreement"] /= 100.0
    return got


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lx", required=True)
    ap.add_argument("--perplexity", required=True, help="llama-perplexity")
    ap.add_argument("--model", required=True)
    ap.add_argument("--model-name", required=True, help="the model as lx names it (catalog name or path)")
    ap.add_argument("--reference-model", help="measure the model against this file instead of KV types against f16")
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--chunks", type=int)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        ours_file = os.path.join(tmp, "ours.json")
        cmd = [a.lx, "fidelity", "--model", a.model_name, "--backends", "llama", "--no-drafts", "--context", str(a.context),
               "--threads", str(a.threads), "--out", ours_file]
        if a.chunks:
            cmd += ["--chunks", str(a.chunks)]
        if a.reference_model:
            cmd += ["--reference-model", a.reference_model]
        run(cmd)
        with open(ours_file, encoding="utf-8") as f:
            ours = json.load(f)

        base = os.path.join(tmp, "base.kld")
        common = ["-f", TEXT, "-c", str(a.context), "-b", str(a.context), "-t", str(a.threads)]
        if a.chunks:
            common += ["--chunks", str(a.chunks)]
        run([a.perplexity, "-m", a.reference_model or a.model, *common, "--kl-divergence-base", base])
        rows = []
        for c in ours["candidates"]:
            s = c.get("settings", {})
            kv = s.get("kv_type_k", "f16")
            cmd = [a.perplexity, "-m", a.model, *common, "--kl-divergence-base", base, "--kl-divergence", "-ctk", kv, "-ctv", s.get("kv_type_v", "f16")]
            if kv != "f16":
                cmd += ["-fa", "on"]
            theirs = parse(run(cmd))
            mine = c["fidelity"]
            # The reference against itself: ours is exactly nothing, llama-perplexity's is
            # the rounding of the log-probabilities it stores (16 bits each), not a gap.
            itself = not a.reference_model and kv == "f16"
            figures = {}
            for name in FIGURES:
                o, t = mine[name], theirs[name]
                if itself and name.endswith("_kl"):
                    within = o == 0.0
                else:
                    within = abs(o - t) <= WITHIN * abs(t)
                figures[name] = {"ours": o, "theirs": t, "within": within}
            rows.append({"setting": c["setting"], "itself": itself, "figures": figures})

    check = {
        "kind": "fidelity-check",
        "date": datetime.date.today().isoformat(),
        "command": sys.argv,
        "machine": f'{ours["hardware"]["cpu"]} ({ours["hardware"]["physical_cores"]} cores)',
        "model": ours["model"]["name"],
        "reference_model": ours["reference"]["model"]["name"],
        "text_sha256": ours["text"]["sha256"],
        "context": ours["context"],
        "chunks": ours["text"]["chunks"],
        "positions": ours["text"]["positions"],
        "within": WITHIN,
        "rows": rows,
    }
    tmp_out = a.out + ".tmp"
    with open(tmp_out, "w", encoding="utf-8") as f:
        json.dump(check, f, indent=2)
        f.write("\n")
    os.replace(tmp_out, a.out)
    bad = [(r["setting"], n) for r in rows for n, v in r["figures"].items() if not v["within"]]
    for r in rows:
        print(r["setting"], {n: (round(v["ours"], 6), round(v["theirs"], 6)) for n, v in r["figures"].items()})
    if bad:
        sys.exit(f"not within {WITHIN:.0%} of llama-perplexity: {bad}")


if __name__ == "__main__":
    main()
