use super::*;

fn tiny() -> GgufWriter {
    GgufWriter::new()
        .kv("general.architecture", "llama")
        .kv("general.name", "tiny")
        .kv("general.file_type", 1u32)
        .kv("llama.context_length", 128u32)
        .kv("llama.embedding_length", 8u64)
        .kv("llama.feed_forward_length", 16i32)
        .kv("llama.block_count", 2u16)
        .kv("llama.attention.head_count", 2u8)
        .kv("llama.attention.layer_norm_rms_epsilon", 1e-6f32)
        .kv("llama.rope.freq_base", 10000.0f64)
        .kv("tokenizer.ggml.tokens", vec!["<unk>", "<s>", "</s>", "a"])
        .tensor_f32("token_embd.weight", &[8, 4], &(0..32).map(|i| i as f32).collect::<Vec<_>>())
        .tensor_f16("output_norm.weight", &[8], &[1.0, 0.5, -2.0, 65504.0, 1e-8, 1.000_488_3, -0.0, 3.25])
}

fn write(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.path().join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn roundtrip_all_value_types_and_tensors() {
    let dir = tempfile::tempdir().unwrap();
    let nested = Array::Array(vec![Array::U8(vec![1, 2]), Array::String(vec!["x".into()]), Array::Array(vec![Array::F64(vec![0.5])])]);
    let w = tiny()
        .kv("t.u8", 200u8)
        .kv("t.i8", -5i8)
        .kv("t.u16", 60000u16)
        .kv("t.i16", -300i16)
        .kv("t.u32", 4_000_000_000u32)
        .kv("t.i32", -7i32)
        .kv("t.f32", 1.5f32)
        .kv("t.bool", true)
        .kv("t.str", "héllo ▁ 世界")
        .kv("t.u64", u64::MAX)
        .kv("t.i64", i64::MIN)
        .kv("t.f64", -2.25f64)
        .kv("t.nested", nested.clone())
        .kv("t.bools", vec![true, false, true])
        .kv("t.empty", Vec::<i32>::new());
    for version in [2, 3] {
        let p = dir.path().join(format!("v{version}.gguf"));
        w.clone().version(version).write(&p).unwrap();
        let g = GgufFile::open(&p).unwrap();
        assert_eq!(g.version(), version);
        assert_eq!(g.metadata("t.u8"), Some(&Value::U8(200)));
        assert_eq!(g.metadata("t.i8"), Some(&Value::I8(-5)));
        assert_eq!(g.metadata("t.u16"), Some(&Value::U16(60000)));
        assert_eq!(g.metadata("t.i16"), Some(&Value::I16(-300)));
        assert_eq!(g.get_u32("t.u32").unwrap(), 4_000_000_000);
        assert_eq!(g.get_i64("t.i32").unwrap(), -7);
        assert_eq!(g.get_f32("t.f32").unwrap(), 1.5);
        assert!(g.get_bool("t.bool").unwrap());
        assert_eq!(g.get_str("t.str").unwrap(), "héllo ▁ 世界");
        assert_eq!(g.get_u64("t.u64").unwrap(), u64::MAX);
        assert_eq!(g.get_i64("t.i64").unwrap(), i64::MIN);
        assert_eq!(g.get_f32("t.f64").unwrap(), -2.25);
        assert_eq!(g.metadata("t.nested"), Some(&Value::Array(nested.clone())));
        assert_eq!(g.metadata("t.bools"), Some(&Value::Array(Array::Bool(vec![true, false, true]))));
        assert_eq!(g.get_array("t.empty").unwrap().len(), 0);
        assert_eq!(g.get_str_array("tokenizer.ggml.tokens").unwrap()[3], "a");
        // get_u32 accepts any integer type that fits
        assert_eq!(g.get_u32("llama.block_count").unwrap(), 2);
        assert_eq!(g.get_u32("llama.attention.head_count").unwrap(), 2);
        assert_eq!(g.get_u32("llama.embedding_length").unwrap(), 8);
        assert!(matches!(g.get_u32("t.i32"), Err(GgufError::WrongType { .. })));
        assert!(matches!(g.get_u32("t.u64"), Err(GgufError::WrongType { .. })));
        assert!(matches!(g.get_str("nope"), Err(GgufError::MissingKey { .. })));
        assert_eq!(g.get_str("nope").optional().unwrap(), None);
        let msg = g.get_str("t.u8").unwrap_err().to_string();
        assert!(msg.contains("t.u8") && msg.contains("expected a string"), "{msg}");

        assert_eq!(g.tensors().len(), 2);
        let t = &g.tensors()[0];
        assert_eq!((t.name.as_str(), t.dims.as_slice(), t.ggml_type, t.offset), ("token_embd.weight", &[8u64, 4][..], GgmlType::F32, 0));
        let t2 = &g.tensors()[1];
        assert_eq!(t2.ggml_type, GgmlType::F16);
        assert_eq!(t2.offset % g.alignment(), 0);
        assert_eq!(g.data_offset() % 32, 0);
        let data = g.read_tensor_bytes("token_embd.weight").unwrap();
        let vals: Vec<f32> = data.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        assert_eq!(vals, (0..32).map(|i| i as f32).collect::<Vec<_>>());
        let h = g.read_tensor_bytes("output_norm.weight").unwrap();
        let h: Vec<u16> = h.chunks_exact(2).map(|c| u16::from_le_bytes(c.try_into().unwrap())).collect();
        assert_eq!(h, vec![0x3c00, 0x3800, 0xc000, 0x7bff, 0x0000, 0x3c00, 0x8000, 0x4280]);
    }
}

#[test]
fn facts_and_config_from_fixture() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("tiny.gguf");
    tiny().write(&p).unwrap();
    let g = GgufFile::open(&p).unwrap();
    let f = ModelFacts::from_gguf(&g).unwrap();
    assert_eq!(f.architecture, "llama");
    assert_eq!(f.name.as_deref(), Some("tiny"));
    assert_eq!(f.parameter_count, 40);
    assert_eq!(f.quantization.name, "F16");
    assert_eq!(f.quantization.tensor_types.get("F32"), Some(&1));
    assert_eq!(f.quantization.tensor_types.get("F16"), Some(&1));
    assert_eq!((f.context_length, f.embedding_length, f.block_count, f.head_count), (Some(128), Some(8), Some(2), Some(2)));
    assert_eq!(f.head_count_kv, None);
    assert_eq!(f.vocab_size, Some(4));
    let json = serde_json::to_string(&f).unwrap();
    let back: ModelFacts = serde_json::from_str(&json).unwrap();
    assert_eq!(back, f);

    let c = ModelConfig::from_gguf(&g).unwrap();
    assert_eq!(c.head_count_kv, 2);
    assert_eq!(c.key_length, 4);
    assert_eq!(c.feed_forward_length, 16);
    assert_eq!(c.layer_norm_rms_epsilon, Some(1e-6));
    assert_eq!(c.rope_freq_base, Some(10000.0));
    assert_eq!(c.sliding_window, None);
    assert_eq!(c.rope_scaling, None);
    assert_eq!(c.vocab_size, 4);
}

#[test]
fn not_gguf() {
    let dir = tempfile::tempdir().unwrap();
    for (name, bytes) in [("text.gguf", &b"hello world, not a model"[..]), ("short.gguf", b"GG"), ("empty.gguf", b"")] {
        let p = write(&dir, name, bytes);
        let err = GgufFile::open(&p).unwrap_err();
        let msg = err.to_string();
        if name == "short.gguf" {
            assert!(matches!(err, GgufError::Truncated { .. }), "{msg}");
        } else {
            assert!(matches!(err, GgufError::NotGguf { .. }), "{msg}");
            assert!(msg.contains("not a GGUF file") && msg.contains(name), "{msg}");
        }
    }
    let err = GgufFile::open(dir.path().join("absent.gguf")).unwrap_err();
    assert!(matches!(err, GgufError::Io { .. }) && err.to_string().contains("absent.gguf"));
}

#[test]
fn bad_versions() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = tiny().to_bytes().unwrap();
    bytes[4..8].copy_from_slice(&1u32.to_le_bytes());
    let err = GgufFile::open(write(&dir, "v1.gguf", &bytes)).unwrap_err();
    assert!(matches!(err, GgufError::UnsupportedVersion { version: 1, .. }), "{err}");
    bytes[4..8].copy_from_slice(&3u32.to_be_bytes());
    let err = GgufFile::open(write(&dir, "be.gguf", &bytes)).unwrap_err();
    assert!(err.to_string().contains("big-endian"), "{err}");
}

/// Seeded mutation fuzzing: thousands of corrupted copies of a valid file (bytes
/// overwritten with random, extreme or boundary values, spans deleted or duplicated)
/// must each open or fail with an error, and what opens must also summarise and build
/// a tokenizer or fail cleanly: never a panic, never a huge allocation. The seed of a
/// failing case is in the message, so it can be replayed.
#[test]
fn corrupted_files_fail_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let valid = tiny().kv("tokenizer.ggml.model", "llama").kv("tokenizer.ggml.scores", vec![0f32, 0.0, 0.0, -1.0]).to_bytes().unwrap();
    let path = dir.path().join("fuzz.gguf");
    let mut m = lx_test_support::fuzz::Mutator::new(0x9e37_79b9_7f4a_7c15);
    let (mut opened, mut refused) = (0, 0);
    for case in 0..3000u32 {
        let mut bytes = valid.clone();
        m.mutate(&mut bytes, 4);
        std::fs::write(&path, &bytes).unwrap();
        let outcome = std::panic::catch_unwind(|| match GgufFile::open(&path) {
            Ok(g) => {
                let _ = ModelFacts::from_gguf(&g);
                if let Ok(t) = crate::tokenizer::Tokenizer::from_gguf(&g) {
                    let _ = t.decode(&t.encode("a b"));
                }
                true
            }
            Err(e) => {
                assert!(!e.to_string().is_empty());
                false
            }
        });
        match outcome {
            Ok(true) => opened += 1,
            Ok(false) => refused += 1,
            Err(_) => panic!("case {case} panicked (replay: the same seed and loop, case {case}); {} bytes", bytes.len()),
        }
    }
    eprintln!("3000 corrupted copies: {opened} opened, {refused} refused with an error, none panicked");
    // Both outcomes happen: the mutations reach past the header, and they do break files.
    assert!(opened > 0 && refused > 0, "opened {opened}, refused {refused}");
}

#[test]
fn truncated_anywhere_is_an_error_naming_what_was_expected() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = tiny().to_bytes().unwrap();
    let full = write(&dir, "full.gguf", &bytes);
    GgufFile::open(&full).unwrap();
    let p = dir.path().join("cut.gguf");
    for cut in (4..bytes.len()).rev() {
        std::fs::write(&p, &bytes[..cut]).unwrap();
        match GgufFile::open(&p) {
            Err(GgufError::Truncated { what, file_len, .. }) => {
                assert_eq!(file_len, cut as u64);
                assert!(!what.is_empty());
            }
            // The final padding after the last tensor is not needed.
            Ok(_) if cut >= bytes.len() - 16 => {}
            other => panic!("cut at {cut}: {other:?}"),
        }
    }
    // The message says what was expected.
    std::fs::write(&p, &bytes[..bytes.len() - 20]).unwrap();
    let msg = GgufFile::open(&p).unwrap_err().to_string();
    assert!(msg.contains("truncated") && msg.contains("output_norm.weight") && msg.contains("cut.gguf"), "{msg}");
    std::fs::write(&p, &bytes[..30]).unwrap();
    let msg = GgufFile::open(&p).unwrap_err().to_string();
    assert!(msg.contains("truncated") && msg.contains("metadata key/value pairs"), "{msg}");
    std::fs::write(&p, &bytes[..200]).unwrap();
    let msg = GgufFile::open(&p).unwrap_err().to_string();
    assert!(msg.contains("truncated") && msg.contains("metadata key"), "{msg}");
}

#[test]
fn huge_lengths_do_not_allocate() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Vec::new();
    b.extend_from_slice(b"GGUF");
    b.extend_from_slice(&3u32.to_le_bytes());
    b.extend_from_slice(&0u64.to_le_bytes());
    b.extend_from_slice(&1u64.to_le_bytes());
    put_str(&mut b, "k");
    b.extend_from_slice(&9u32.to_le_bytes());
    b.extend_from_slice(&8u32.to_le_bytes());
    b.extend_from_slice(&(u64::MAX / 2).to_le_bytes());
    let err = GgufFile::open(write(&dir, "huge.gguf", &b)).unwrap_err();
    assert!(matches!(err, GgufError::Truncated { .. }), "{err}");
    b.extend_from_slice(&[0u8; 64]);
    let mut c = b.clone();
    let n = c.len();
    c[n - 64 - 12..n - 64 - 8].copy_from_slice(&99u32.to_le_bytes());
    let err = GgufFile::open(write(&dir, "badtype.gguf", &c)).unwrap_err();
    assert!(matches!(err, GgufError::UnknownValueType { type_id: 99, .. }), "{err}");
}

#[test]
fn unknown_tensor_type() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("unknown.gguf");
    tiny().tensor_raw("mystery.weight", &[32], 31, vec![0; 64]).write(&p).unwrap();
    let err = GgufFile::open(&p).unwrap_err();
    assert!(matches!(err, GgufError::UnknownTensorType { type_id: 31, .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("mystery.weight") && msg.contains("31"), "{msg}");
}

#[test]
fn missing_architecture() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("noarch.gguf");
    GgufWriter::new().kv("general.name", "x").tensor_f32("a", &[2], &[1.0, 2.0]).write(&p).unwrap();
    let g = GgufFile::open(&p).unwrap();
    let err = ModelFacts::from_gguf(&g).unwrap_err();
    assert!(matches!(err, GgufError::MissingKey { ref key, .. } if key == "general.architecture"), "{err}");
    assert!(err.to_string().contains("general.architecture"));
    assert!(ModelConfig::from_gguf(&g).is_err());
    // and a missing hyper-parameter names the key
    let p = dir.path().join("nohead.gguf");
    GgufWriter::new().kv("general.architecture", "llama").kv("llama.embedding_length", 8u32).write(&p).unwrap();
    let err = ModelConfig::from_gguf(&GgufFile::open(&p).unwrap()).unwrap_err();
    assert!(err.to_string().contains("llama.attention.head_count"), "{err}");
}

#[test]
fn wrong_shaped_tensors() {
    let dir = tempfile::tempdir().unwrap();
    // Writer refuses data that does not match the shape.
    let p = dir.path().join("w.gguf");
    let err = tiny().tensor_f32("bad", &[3, 2], &[0.0; 5]).write(&p).unwrap_err();
    assert!(matches!(err, GgufError::BadTensor { ref tensor, .. } if tensor == "bad"), "{err}");
    assert!(err.to_string().contains("24 bytes"), "{err}");
    // Quantized row length must be a multiple of the block size (Q4_0: 32).
    tiny().tensor_raw("q", &[20, 2], GgmlType::Q4_0.id(), vec![0; 36]).write(&p).unwrap();
    let err = GgufFile::open(&p).unwrap_err();
    assert!(matches!(err, GgufError::BadTensor { .. }) && err.to_string().contains("block size 32"), "{err}");
    // Too many dimensions.
    tiny().tensor_raw("five", &[1, 1, 1, 1, 1], 0, vec![0; 4]).write(&p).unwrap();
    let err = GgufFile::open(&p).unwrap_err();
    assert!(err.to_string().contains("5 dimensions"), "{err}");
    // Data claimed bigger than the file.
    tiny().tensor_raw("big", &[32, 1000], GgmlType::Q8_0.id(), vec![0; 34]).write(&p).unwrap();
    let err = GgufFile::open(&p).unwrap_err();
    assert!(matches!(err, GgufError::Truncated { .. }) && err.to_string().contains("\"big\""), "{err}");
}

#[test]
fn block_sizes() {
    assert_eq!(GgmlType::Q4_K.bytes_for(256), Some(144));
    assert_eq!(GgmlType::Q6_K.bytes_for(512), Some(420));
    assert_eq!(GgmlType::Q5_0.bytes_for(64), Some(44));
    assert_eq!(GgmlType::Q8_0.bytes_for(32), Some(34));
    assert_eq!(GgmlType::BF16.bytes_for(3), Some(6));
    for row in GGML_TYPES {
        assert_eq!(GgmlType::from_id(row.1), Some(row.0));
        assert_eq!(row.0.id(), row.1);
    }
    assert_eq!(GgmlType::from_id(4), None);
    assert_eq!(file_type_name(15), Some("Q4_K_M"));
}

#[test]
fn real_model() {
    let path = lx_models::default_model_path();
    assert!(
        path.exists(),
        "the real model is missing at {} (set LX_MODEL, or fetch it first: `lx models fetch default`)",
        path.display()
    );
    let t = std::time::Instant::now();
    let g = GgufFile::open(&path).unwrap();
    let elapsed = t.elapsed();
    assert_eq!(g.architecture().unwrap(), "gemma3");
    let f = ModelFacts::from_gguf(&g).unwrap();
    assert_eq!(f.block_count, Some(18));
    assert_eq!(f.quantization.file_type, Some(15));
    assert_eq!(f.quantization.name, "Q4_K_M");
    assert_eq!(f.vocab_size, Some(262_144));
    assert_eq!(f.file_size, std::fs::metadata(&path).unwrap().len());
    let c = ModelConfig::from_gguf(&g).unwrap();
    assert_eq!(c.block_count, 18);
    assert_eq!(c.vocab_size, 262_144);
    assert!(c.sliding_window.is_some());
    eprintln!("opened in {elapsed:?}: {f:#?}\n{c:#?}");
    assert!(elapsed.as_secs_f64() < 5.0, "opening took {elapsed:?}");
}
