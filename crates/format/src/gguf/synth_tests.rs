use super::*;
use crate::tokenizer::Tokenizer;

/// IEEE half to single (normal numbers, zero and subnormals; no NaN in what we write).
fn f16(bits: u16) -> f32 {
    let sign = if bits & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((bits >> 10) & 0x1f);
    let mant = f32::from(bits & 0x3ff);
    sign * match exp {
        0 => mant * 2f32.powi(-24),
        31 => f32::INFINITY,
        e => (1.0 + mant / 1024.0) * 2f32.powi(e - 15),
    }
}

/// A small shape of every architecture, small enough to write in a unit test.
fn small(architecture: &'static str, tied: bool) -> Shape {
    Shape { architecture, hidden: 256, layers: 3, ffn: 512, heads: 4, kv_heads: 2, head_dim: 64, vocab: 600, context: 2048, tied }
}

#[test]
fn every_fillable_type_writes_whole_blocks_with_sane_scales() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("types.gguf");
    let types: Vec<GgmlType> = GGML_TYPES.iter().map(|r| r.0).filter(|&t| can_fill(t)).collect();
    assert_eq!(types.len(), 13);
    let mut w = GgufWriter::new().kv("general.architecture", "llama");
    for (i, &ty) in types.iter().enumerate() {
        w = w.tensor_synthetic(format!("t{i}.{}", ty.name()), &[512, 300], ty, Fill::for_tensor(&format!("t{i}")));
    }
    w = w.tensor_synthetic("n.norm.weight", &[512], GgmlType::F32, Fill::for_tensor("n.norm.weight"));
    w.write(&path).unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), w.file_size(), "file_size() is what write() writes");
    let g = GgufFile::open(&path).unwrap();
    for (i, &ty) in types.iter().enumerate() {
        let t = g.tensor(&format!("t{i}.{}", ty.name())).unwrap();
        assert_eq!((t.ggml_type, t.dims.clone()), (ty, vec![512, 300]));
        let bytes = g.read_tensor_bytes(&t.name).unwrap();
        assert_eq!(bytes.len() as u64, ty.bytes_for(512 * 300).unwrap());
        // Where each type keeps its block scale(s): every one is a normal, small, positive f16
        // (the Q4_1/Q5_1 minimum is negative).
        let scales: &[usize] = match ty {
            GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0 => &[0],
            GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q4_K | GgmlType::Q5_K => &[0, 2],
            GgmlType::Q2_K => &[80, 82],
            GgmlType::Q3_K => &[108],
            GgmlType::Q6_K => &[208],
            _ => &[],
        };
        for block in bytes.chunks(ty.type_size() as usize) {
            for &at in scales {
                let d = f16(u16::from_le_bytes([block[at], block[at + 1]])).abs();
                assert!(d >= 6.1e-5 && d < 0.05, "{ty}: scale {d} at byte {at}");
            }
        }
        if ty == GgmlType::Q8_0 {
            let w_max = bytes.chunks(34).map(|b| f16(u16::from_le_bytes([b[0], b[1]])).abs() * 128.0).fold(0.0f32, f32::max);
            assert!(w_max < 0.06, "Q8_0 weights reach {w_max}");
        }
        if ty == GgmlType::F32 {
            assert!(bytes.chunks(4).all(|b| f32::from_le_bytes(b.try_into().unwrap()).abs() < 0.031));
        }
    }
    // Norm weights sit near 1, as a trained model's do.
    let norm = g.read_tensor_bytes("n.norm.weight").unwrap();
    assert!(norm.chunks(4).all(|b| (f32::from_le_bytes(b.try_into().unwrap()) - 1.0).abs() < 0.031));
}

#[test]
fn a_type_that_cannot_be_made_up_is_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let w = GgufWriter::new().kv("general.architecture", "llama").tensor_synthetic("t", &[256, 2], GgmlType::IQ2_XXS, Fill::for_tensor("t"));
    let err = w.write(dir.path().join("x.gguf")).unwrap_err().to_string();
    assert!(err.contains("cannot hold IQ2_XXS"), "{err}");
    assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none(), "no file, not even a temporary one, is left");
}

#[test]
fn every_architecture_reads_back_with_its_shape_and_a_synthetic_vocabulary() {
    let dir = tempfile::tempdir().unwrap();
    for (arch, tied) in [("gemma3", true), ("llama", false), ("qwen2", true)] {
        let path = dir.path().join(format!("{arch}.gguf"));
        small(arch, tied).writer(Quant::Q8_0, arch).write(&path).unwrap();
        let g = GgufFile::open(&path).unwrap();
        let facts = ModelFacts::from_gguf(&g).unwrap();
        assert_eq!((facts.architecture.as_str(), facts.block_count, facts.vocab_size, facts.head_count_kv), (arch, Some(3), Some(600), Some(2)));
        assert_eq!(facts.synthetic.as_deref(), Some(arch));
        assert!(facts.synthetic_note().unwrap().starts_with("synthetic: timings only, text is noise"));
        assert_eq!(g.tensor("output.weight").is_some(), !tied);
        assert_eq!(g.tensor("blk.2.attn_q.bias").is_some(), arch == "qwen2");
        assert_eq!(g.tensor("blk.0.post_ffw_norm.weight").is_some(), arch == "gemma3");
        let config = ModelConfig::from_gguf(&g).unwrap();
        assert_eq!((config.key_length, config.feed_forward_length), (64, 512));
        // Any text has tokens (one per byte, after BOS), and they decode back.
        let tok = Tokenizer::from_gguf(&g).unwrap();
        let ids = tok.encode("Once upon a time");
        assert_eq!(ids.len(), 1 + 1 + "Once upon a time".len(), "BOS, the space prefix, then a token per letter or space: {ids:?}");
        assert_eq!(tok.decode(&ids[1..]).trim_start(), "Once upon a time");
    }
}

#[test]
fn q4_k_m_follows_llama_cpp_mix_and_fallbacks() {
    let (p, q) = preset("gemma3-270m").unwrap();
    assert_eq!((p.name, q), ("gemma3-270m", Quant::Q4KM));
    let w = p.shape.writer(q, p.name);
    let bytes_of = |name: &str| w.planned_tensors().find(|t| t.0 == name).and_then(|t| t.2).unwrap();
    // 640-wide rows are not whole K-quant blocks: Q6_K falls back to Q8_0, Q4_K to Q5_0.
    assert_eq!(bytes_of("token_embd.weight"), GgmlType::Q8_0, "tied: the embedding is the output");
    assert_eq!(bytes_of("blk.5.attn_q.weight"), GgmlType::Q5_0);
    assert_eq!(bytes_of("blk.5.attn_output.weight"), GgmlType::Q4_K, "1024-wide rows");
    // More bits in the first and last eighth and every third layer between.
    let down: Vec<GgmlType> = (0..18).map(|l| bytes_of(&format!("blk.{l}.ffn_down.weight"))).collect();
    let six: Vec<usize> = (0..18).filter(|&l| down[l] == GgmlType::Q6_K).collect();
    assert_eq!(six, vec![0, 1, 4, 7, 10, 13, 15, 16, 17], "llama.cpp's use_more_bits, in integers: i < n/8, i >= 7n/8, (i - n/8) % 3 == 2");
    assert!(down.iter().all(|&t| t == GgmlType::Q6_K || t == GgmlType::Q4_K));
    let (p, q) = preset("llama3.1-8b-q8_0").unwrap();
    let w = p.shape.writer(q, p.name);
    assert!(w.planned_tensors().all(|(_, dims, ty)| dims.len() == 1 || ty == Some(GgmlType::Q8_0)));
    assert!(preset("gpt-5").unwrap_err().contains("gemma3-1b-q4_k_m"));
}

#[test]
fn presets_are_the_sizes_people_run() {
    // Parameter counts from the published configurations, within 2% (biases and norms).
    for (name, billions) in [("smollm2-135m", 0.135), ("gemma3-270m", 0.268), ("gemma3-1b", 1.0), ("llama3.2-1b", 1.236), ("llama3.2-3b", 3.21), ("llama3.1-8b", 8.03), ("qwen2.5-0.5b", 0.494), ("qwen2.5-7b", 7.62)] {
        let (p, q) = preset(name).unwrap();
        let w = p.shape.writer(q, name);
        let params: u64 = w.planned_tensors().map(|(_, dims, _)| dims.iter().product::<u64>()).sum();
        let got = params as f64 / 1e9;
        assert!((got / billions - 1.0).abs() < 0.02, "{name}: {got:.3}B parameters, published {billions}B");
        // A Q4_K_M file is about 4.8-5.5 bits per weight, more where the embedding (Q6_K, or
        // Q8_0 when its rows are not whole K-quant blocks) is a large part of the model.
        let bits = w.file_size() as f64 * 8.0 / params as f64;
        assert!((4.5..8.0).contains(&bits), "{name}: {bits:.2} bits per weight");
    }
}

#[test]
fn a_twin_has_the_real_files_tensors_and_metadata_but_its_own_vocabulary() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real.gguf");
    small("llama", true).writer(Quant::Q4KM, "stand-in").kv("general.name", "Stand-in 1M").kv("tokenizer.chat_template", "{{ x }}").write(&real).unwrap();
    let real = GgufFile::open(&real).unwrap();
    let twin_path = dir.path().join("twin.gguf");
    twin_of(&real).unwrap().write(&twin_path).unwrap();
    let twin = GgufFile::open(&twin_path).unwrap();
    let shapes = |g: &GgufFile| g.tensors().iter().map(|t| (t.name.clone(), t.dims.clone(), t.ggml_type)).collect::<Vec<_>>();
    assert_eq!(shapes(&twin), shapes(&real));
    assert_eq!(twin.get_u32("llama.block_count").unwrap(), 3);
    assert_eq!(twin.get_str("general.name").unwrap(), "synthetic twin of Stand-in 1M");
    assert_eq!(twin.get_str(SYNTHETIC_KEY).unwrap(), "twin of Stand-in 1M");
    assert!(twin.metadata("tokenizer.chat_template").is_none(), "nothing of the real tokenizer is kept");
    assert_eq!(twin.vocab_size(), real.vocab_size());
    assert_eq!(twin.file_size() - twin.data_offset(), real.file_size() - real.data_offset(), "the same data, byte for byte in size");
}

#[test]
fn a_vocabulary_has_the_size_asked_and_byte_pieces_where_they_fit() {
    let dir = tempfile::tempdir().unwrap();
    for (size, bytes) in [(96u64, false), (3 + 256 + 1, true), (600, true)] {
        let path = dir.path().join(format!("v{size}.gguf"));
        spm_vocabulary(small("llama", true).header("vocabulary"), size as usize).write(&path).unwrap();
        let g = GgufFile::open(&path).unwrap();
        assert_eq!(g.vocab_size(), Some(size));
        let has_bytes = matches!(g.metadata("tokenizer.ggml.tokens"), Some(Value::Array(Array::String(t))) if t.iter().any(|p| p == "<0x41>"));
        assert_eq!(has_bytes, bytes, "{size} tokens");
    }
}

#[test]
fn a_header_carries_the_shape_and_a_test_can_change_any_pair() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.gguf");
    let shape = small("gemma3", true);
    shape.header("tiny").kv("gemma3.attention.sliding_window", 4u32).write(&path).unwrap();
    let g = GgufFile::open(&path).unwrap();
    let u = |k: &str| g.get_u32(&format!("gemma3.{k}")).unwrap();
    assert_eq!(g.architecture().unwrap(), "gemma3");
    assert_eq!([u("block_count"), u("embedding_length"), u("attention.head_count_kv"), u("context_length"), u("rope.dimension_count")], [3, 256, 2, 2048, 64]);
    assert_eq!(g.get_u32("gemma3.attention.sliding_window").unwrap(), 4, "written again, replaced");
    assert_eq!(g.metadata("general.name").and_then(Value::as_str), Some("tiny"));
}
