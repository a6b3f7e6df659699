"""Speculative decoding, ours against llama.cpp's own: `lx generate --spec lookup` and
llama.cpp's `llama-lookup`, and (with --speculative) `lx generate --spec draft` and
`llama-speculative-simple` with the same draft model (both built from llama.cpp's sources by
scripts/llama-cpp-tools), on the same prompt, the same model, threads and output length,
greedy, each held against its own plain decoding (`lx generate`, and `llama-lookup
--draft-max 0`, which drafts nothing). Two prompts: a passage to copy (the output repeats
the input) and free continuation. Rounds alternate the two sides, so a drifting machine
moves them alike. Writes a `spec-compare` file that `lx show` prints. Run by
scripts/spec-compare.
"""

import argparse
import datetime
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "format", "corpus", "lighthouses.txt")


def copy_prompt(words):
    """An instruction, a passage of `words` words from the corpus, and the start of its repeat."""
    with open(CORPUS, encoding="utf-8") as f:
        text = " ".join(f.read().split()[:words])
    first = " ".join(text.split()[:3])
    return f"Repeat the passage below exactly, word for word.\n\nPassage:\n{text}\n\nThe passage, repeated exactly:\n{first}"


PROSE = "Once upon a time, in a small village,"


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        sys.exit(f"{cmd[0]} failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return r.stdout, r.stderr


def number(pattern, text, what):
    m = re.search(pattern, text)
    if not m:
        sys.exit(f"no {what} in the output:\n{text[-3000:]}")
    return m.groups()


def ours(args, prompt, spec):
    """`lx generate` with `spec` (none, lookup or draft)."""
    cmd = [args.lx, "generate", "--model", args.model, "--prompt", prompt, "--max-tokens", str(args.tokens), "--ignore-eos", "--threads", str(args.threads), "--spec", spec]
    if spec == "draft":
        cmd += ["--spec-draft-model", args.draft_model]
    out, err = run(cmd)
    (decode,) = number(r"decode ([\d.]+) tok/s", err, "decode rate")
    drafted = accepted = 0
    m = re.search(r"(\d+) of (\d+) drafted tokens accepted", err)
    if m:
        accepted, drafted = int(m.group(1)), int(m.group(2))
    return {"decode_tok_s": float(decode), "drafted": drafted, "accepted": accepted, "text": out[len(prompt):].rstrip("\n")}


def theirs(args, prompt, draft_max, draft_model=False):
    """llama-lookup, or llama-speculative-simple with the draft model, greedy; `draft_max` None
    leaves the tool's own default draft length."""
    tool = [args.speculative, "-md", args.draft_model, "--spec-type", "draft-simple"] if draft_model else [args.lookup]
    cmd = tool + ["-m", args.model, "-p", prompt, "-n", str(args.tokens), "-t", str(args.threads), "-c", "2048", "--temp", "0", "--ignore-eos"]
    if draft_max is not None:
        cmd += ["--spec-draft-n-max", str(draft_max)]
    out, err = run(cmd)
    log = out + err
    n, _, speed = number(r"decoded\s+(\d+) tokens in\s+([\d.]+) seconds, speed:\s+([\d.]+) t/s", log, "decode rate")
    (n_draft,) = number(r"n_draft\s*=\s*(\d+)", log, "n_draft")
    (drafted,) = number(r"n_drafted\s*=\s*(\d+)", log, "n_drafted")
    (accepted,) = number(r"n_accept\s*=\s*(\d+)", log, "n_accept")
    text = out[out.find(prompt) + len(prompt):] if prompt in out else out
    return {"decode_tok_s": float(speed), "drafted": int(drafted), "accepted": int(accepted), "tokens": int(n), "draft_max": int(n_draft), "text": text.split("\n\nencoded")[0].rstrip("\n")}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lx", required=True)
    p.add_argument("--lookup", required=True, help="llama.cpp's llama-lookup")
    p.add_argument("--speculative", help="llama.cpp's llama-speculative-simple: also compare drafting with --draft-model")
    p.add_argument("--draft-model", help="the draft model both sides load (lx models draft)")
    p.add_argument("--model", required=True)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--tokens", type=int, default=128)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--draft-max", type=int, default=None, help="llama-lookup's draft length (default: its own, --spec-draft-n-max)")
    p.add_argument("--passage-words", type=int, default=150)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    if bool(args.speculative) != bool(args.draft_model):
        sys.exit("--speculative and --draft-model go together")

    prompts = {"copy": copy_prompt(args.passage_words), "prose": PROSE}
    hw = json.loads(run([args.lx, "hw", "--json"])[0])
    rounds = []
    for i in range(args.rounds):
        for name, prompt in prompts.items():
            r = {"round": i + 1, "prompt": name}
            # Alternate which tool goes first, round by round.
            order = ["ours", "theirs"] if i % 2 == 0 else ["theirs", "ours"]
            for side in order:
                if side == "ours":
                    r["ours_plain"] = ours(args, prompt, "none")
                    r["ours_lookup"] = ours(args, prompt, "lookup")
                    if args.draft_model:
                        r["ours_draft"] = ours(args, prompt, "draft")
                else:
                    r["theirs_plain"] = theirs(args, prompt, 0)
                    r["theirs_lookup"] = theirs(args, prompt, args.draft_max)
                    if args.draft_model:
                        r["theirs_draft"] = theirs(args, prompt, args.draft_max, draft_model=True)
            print(
                f"round {i + 1}, {name}: ours {r['ours_lookup']['decode_tok_s']:.1f} vs plain {r['ours_plain']['decode_tok_s']:.1f} tok/s "
                f"({r['ours_lookup']['accepted']}/{r['ours_lookup']['drafted']} accepted); llama-lookup {r['theirs_lookup']['decode_tok_s']:.1f} vs "
                f"{r['theirs_plain']['decode_tok_s']:.1f} ({r['theirs_lookup']['accepted']}/{r['theirs_lookup']['drafted']})",
                file=sys.stderr,
            )
            if args.draft_model:
                print(
                    f"  draft model: ours {r['ours_draft']['decode_tok_s']:.1f} ({r['ours_draft']['accepted']}/{r['ours_draft']['drafted']}); "
                    f"llama-speculative-simple {r['theirs_draft']['decode_tok_s']:.1f} ({r['theirs_draft']['accepted']}/{r['theirs_draft']['drafted']})",
                    file=sys.stderr,
                )
            rounds.append(r)
    result = {
        "kind": "spec-compare",
        "command": ["scripts/spec-compare"] + sys.argv[1:],
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "hardware": hw,
        "threads": args.threads,
        "tokens": args.tokens,
        "their_draft_max": rounds[0]["theirs_lookup"]["draft_max"] if rounds else None,
        **({"draft_model": os.path.basename(args.draft_model)} if args.draft_model else {}),
        "prompts": prompts,
        "rounds": rounds,
    }
    tmp = args.out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    os.replace(tmp, args.out)


if __name__ == "__main__":
    main()
