"""mlx-lm as `mlx-reference` runs it: the same GGUF, converted as mlx-lm converts a model,
generated with mlx-lm's own loops, timed here and reported back.

Conversion, the steps `mlx_lm.convert -q` takes on a Hugging Face checkpoint, from the GGUF:
every tensor is read and dequantized by the `gguf` package (llama.cpp's Python reader),
renamed to the Hugging Face names mlx-lm's model expects, and undone where llama.cpp's
converter changed it (Gemma's norm weights are stored plus one; llama's query and key rows are
permuted for llama.cpp's rope); matrices are rounded to f16; mlx-lm's `load_model` builds its
model from a config written from the GGUF's metadata and `quantize_model` quantizes it (affine,
4 bits, group 64) exactly as our backend's `q4` mode does. `dtype` then sets what everything
else is held in (and so what mlx-lm computes in): float16 or bfloat16 as a converted model has
it, or float32 as our backend computes.

Generation: one sequence through `mlx_lm.generate.generate_step`, several through
`mlx_lm.generate.BatchGenerator` (continuous batching, all prompts prefilled together), greedy,
no stop tokens. Prefill time is until every sequence has its first token; decode time is the
rest.

Protocol: one JSON object a line on stdin, one answer a line on stdout.
  {"load": {"gguf": PATH, "dtype": "float16"}}  -> {"ok": true, "mlx": ..., "mlx_lm": ..., "how": ...}
  {"run": {"ids": [...], "batch": B, "gen": N}}   -> {"ok": true, "prefill_s": s, "decode_s": s, "tokens": [...]}
Errors answer {"ok": false, "error": "..."}.
"""

import json
from importlib import metadata
import sys
import tempfile
import time
from pathlib import Path

import gguf
import mlx.core as mx
import numpy as np
from mlx_lm import __version__ as mlx_lm_version
from mlx_lm.generate import BatchGenerator, generate_step
from mlx_lm.utils import load_model, quantize_model

GROUP, BITS = 64, 4

# llama.cpp's tensor names -> Hugging Face's, per layer.
LAYER_NAMES = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
    "attn_norm": "input_layernorm",
}
GEMMA_LAYER_NAMES = {
    "post_attention_norm": "post_attention_layernorm",
    "ffn_norm": "pre_feedforward_layernorm",
    "post_ffw_norm": "post_feedforward_layernorm",
}
LLAMA_LAYER_NAMES = {"ffn_norm": "post_attention_layernorm"}


def field(reader, key, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    value = f.parts[f.data[0]]
    if f.types[0] == gguf.GGUFValueType.STRING:
        return bytes(value).decode()
    return value.item() if value.size == 1 else value.tolist()


def config_from(reader, arch, vocab):
    g = lambda k, d=None: field(reader, f"{arch}.{k}", d)
    heads = g("attention.head_count")
    hidden = g("embedding_length")
    common = {
        "hidden_size": hidden,
        "num_hidden_layers": g("block_count"),
        "intermediate_size": g("feed_forward_length"),
        "num_attention_heads": heads,
        "num_key_value_heads": g("attention.head_count_kv", heads),
        "rms_norm_eps": g("attention.layer_norm_rms_epsilon"),
        "vocab_size": vocab,
        "rope_theta": g("rope.freq_base", 10000.0),
        "max_position_embeddings": g("context_length"),
    }
    if arch == "gemma3":
        head_dim = g("attention.key_length")
        # llama.cpp scales Gemma 3 270M's queries by 1/sqrt(head_dim), as its config's
        # query_pre_attn_scalar (256) does; local layers use rope base 10000, one global
        # layer in six (llama.cpp's fixed Gemma 3 pattern).
        return common | {
            "model_type": "gemma3_text",
            "head_dim": head_dim,
            "query_pre_attn_scalar": head_dim,
            "sliding_window": g("attention.sliding_window"),
            "sliding_window_pattern": 6,
            "rope_local_base_freq": 10000.0,
        }
    if arch in ("llama", "qwen2"):
        return common | {
            "model_type": arch,
            "head_dim": hidden // heads,
            "tie_word_embeddings": not any(t.name == "output.weight" for t in reader.tensors),
        }
    raise ValueError(f"no mlx-lm conversion here for architecture `{arch}` (gemma3, llama, qwen2)")


def unpermute(w, heads):
    """Undoes llama.cpp's converter, which interleaves each head's query/key rows for its rope."""
    rows = w.shape[0]
    return w.reshape(heads, rows // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def hf_weights(reader, arch, config):
    names = LAYER_NAMES | (GEMMA_LAYER_NAMES if arch == "gemma3" else LLAMA_LAYER_NAMES)
    out = {}
    for t in reader.tensors:
        values = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        values = values.reshape(tuple(reversed([int(d) for d in t.shape])))
        # Qwen2's query, key and value projections have biases ("blk.N.attn_q.bias").
        base, _, kind = t.name.rpartition(".")
        if base == "token_embd":
            name = "model.embed_tokens"
        elif base == "output_norm":
            name = "model.norm"
        elif base == "output":
            name = "lm_head"
        elif base.startswith("blk."):
            _, layer, part = base.split(".", 2)
            if part not in names:
                raise ValueError(f"tensor {t.name} has no mlx-lm counterpart here")
            name = f"model.layers.{layer}.{names[part]}"
        else:
            raise ValueError(f"tensor {t.name} has no mlx-lm counterpart here")
        if arch == "gemma3" and name.endswith("norm"):
            values = values - 1.0
        if arch == "llama" and part_is(base, "attn_q"):
            values = unpermute(values, config["num_attention_heads"])
        if arch == "llama" and part_is(base, "attn_k"):
            values = unpermute(values, config["num_key_value_heads"])
        # Matrices as a converted f16 checkpoint holds them; vectors (norms) exact.
        dtype = np.float16 if values.ndim == 2 else np.float32
        out[f"{name}.{kind}"] = mx.array(values.astype(dtype))
    return out


def part_is(base, part):
    return base.startswith("blk.") and base.split(".", 2)[2] == part


def load(path, dtype_name):
    reader = gguf.GGUFReader(path)
    arch = field(reader, "general.architecture")
    embd = next(t for t in reader.tensors if t.name == "token_embd.weight")
    config = config_from(reader, arch, int(embd.shape[1]))
    weights = hf_weights(reader, arch, config)
    with tempfile.TemporaryDirectory() as d:
        Path(d, "config.json").write_text(json.dumps(config))
        mx.save_safetensors(str(Path(d, "model.safetensors")), weights)
        del weights
        model, config = load_model(Path(d))
    model, _ = quantize_model(model, config, GROUP, BITS)
    dtype = getattr(mx, dtype_name)
    # What convert's --dtype does, after quantizing here so the 4-bit weights are exactly
    # those quantized from the f16 matrices (the packed integers are not floating).
    model.update(
        _tree_map(lambda v: v.astype(dtype) if mx.issubdtype(v.dtype, mx.floating) else v, model.parameters())
    )
    mx.eval(model.parameters())
    return model, {
        "mlx": mx.__version__,
        "mlx_lm": mlx_lm_version,
        # The library the Python module loads, so the bench can check it is the one ours links.
        "libmlx": str(Path(mx.__file__).resolve().parent / "lib" / "libmlx.so"),
        "how": (
            f"GGUF dequantized by the gguf package {metadata.version('gguf')}, renamed to {config['model_type']}'s Hugging Face names, matrices rounded to f16, "
            f"mlx_lm.utils.quantize_model affine {BITS}-bit group {GROUP}, other tensors {dtype_name}"
        ),
    }


def _tree_map(fn, tree):
    if isinstance(tree, dict):
        return {k: _tree_map(fn, v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_tree_map(fn, v) for v in tree]
    return fn(tree)


def run(model, ids, batch, gen):
    if batch == 1:
        t0 = time.perf_counter()
        tokens, first_at = [], None
        for token, _ in generate_step(mx.array(ids), model, max_tokens=gen):
            if first_at is None:
                first_at = time.perf_counter()
            tokens.append(int(token))
        end = time.perf_counter()
        return first_at - t0, end - first_at, tokens[:16]
    gen_batch = BatchGenerator(model, max_tokens=gen, prefill_batch_size=batch, completion_batch_size=batch)
    try:
        t0 = time.perf_counter()
        uids = gen_batch.insert([list(ids)] * batch, [gen] * batch)
        got = {uid: [] for uid in uids}
        first_at = None
        while responses := gen_batch.next_generated():
            for r in responses:
                got[r.uid].append(int(r.token))
            if first_at is None and all(got.values()):
                first_at = time.perf_counter()
        end = time.perf_counter()
    finally:
        gen_batch.close()
    if any(len(v) != gen for v in got.values()):
        raise RuntimeError(f"BatchGenerator gave {[len(v) for v in got.values()]} tokens, asked for {gen} each")
    return first_at - t0, end - first_at, got[uids[0]][:16]


def main():
    # mlx-lm prints progress to stdout; the answers keep it to themselves.
    answers, sys.stdout = sys.stdout, sys.stderr
    model = None
    for line in sys.stdin:
        try:
            request = json.loads(line)
            if "load" in request:
                model, about = load(request["load"]["gguf"], request["load"].get("dtype", "float16"))
                answer = {"ok": True} | about
            elif "run" in request:
                if model is None:
                    raise RuntimeError("no model loaded")
                r = request["run"]
                prefill_s, decode_s, tokens = run(model, r["ids"], r["batch"], r["gen"])
                answer = {"ok": True, "prefill_s": prefill_s, "decode_s": decode_s, "tokens": tokens}
            else:
                raise ValueError(f"unknown request {sorted(request)}")
        except Exception as e:  # the bench reports it and goes on with the other contenders
            answer = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        print(json.dumps(answer), file=answers, flush=True)


if __name__ == "__main__":
    main()
