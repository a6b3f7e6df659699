"""A bare greedy loop over llama-cpp-python's low-level API: the independent native build of
llama.cpp that the `overhead` example compares our llama.cpp backend with
(`--reference llama-cpp-python`; scripts/llama-cpp-python builds it from source).

It loads the model once, then reads one JSON request per line on stdin,
{"prompt": [token ids], "gen": N}, prefills the prompt in one pass, decodes N - 1 more tokens
one pass each (greedy, EOS ignored), and answers one JSON line with the figures timed the
way our engine defines them. Only llama.cpp calls and an argmax over the logits (a view, no
copy) are inside the timed region, as in our bare Rust loop.

usage: python llama_cpp_python_loop.py MODEL.gguf --threads N --ctx N --batch N
"""

import argparse
import json
import sys
import time

import llama_cpp
import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--ctx", type=int, required=True)
    ap.add_argument("--batch", type=int, required=True)
    args = ap.parse_args()

    llama_cpp.llama_backend_init()
    # Kept in a variable: llama.cpp calls it for as long as the process lives.
    quiet = llama_cpp.llama_log_callback(lambda *_: None)
    llama_cpp.llama_log_set(quiet, None)
    model = llama_cpp.llama_model_load_from_file(args.model.encode(), llama_cpp.llama_model_default_params())
    if not model:
        sys.exit(f"llama-cpp-python could not load {args.model}")
    # The same context shape as our worker's (crates/backend-llamacpp): one sequence,
    # flash attention left to llama.cpp, one KV stream per sequence.
    params = llama_cpp.llama_context_default_params()
    params.n_ctx = args.ctx
    params.n_batch = args.batch
    params.n_ubatch = min(args.batch, 512)
    params.n_seq_max = 1
    params.n_threads = args.threads
    params.n_threads_batch = args.threads
    params.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_AUTO
    params.kv_unified = False
    ctx = llama_cpp.llama_init_from_model(model, params)
    if not ctx:
        sys.exit("llama-cpp-python could not create a context")
    n_vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(model))
    batch = llama_cpp.llama_batch_init(args.batch, 0, 1)
    memory = llama_cpp.llama_get_memory(ctx)

    def append(tokens, pos):
        n = len(tokens)
        for i, t in enumerate(tokens):
            batch.token[i] = t
            batch.pos[i] = pos + i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = i == n - 1
        batch.n_tokens = n
        if llama_cpp.llama_decode(ctx, batch) != 0:
            raise RuntimeError("llama_decode failed")
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, n - 1), shape=(n_vocab,))
        return int(logits.argmax())

    print(json.dumps({"ready": True, "version": llama_cpp.__version__,
                      "system": llama_cpp.llama_print_system_info().decode().strip()}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        prompt, gen = req["prompt"], req["gen"]
        llama_cpp.llama_memory_clear(memory, True)
        t0 = time.perf_counter()
        token = append(prompt, 0)
        first = time.perf_counter() - t0
        for i in range(gen - 1):
            token = append([token], len(prompt) + i)
        end = time.perf_counter() - t0
        print(json.dumps({
            "ttft_ms": first * 1e3,
            "prefill_tps": len(prompt) / first,
            "decode_tps": (gen - 1) / (end - first) if gen > 1 else 0.0,
        }), flush=True)


if __name__ == "__main__":
    main()
