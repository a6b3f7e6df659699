use super::*;
use crate::gguf::GgufWriter;
use lx_models::default_model_path;

/// A toy SPM vocabulary: control 0-2, bytes, some pieces with scores, user-defined tokens.
fn toy(extra: impl FnOnce(GgufWriter) -> GgufWriter) -> (tempfile::TempDir, Tokenizer) {
    let mut tokens: Vec<String> = vec!["<unk>".into(), "<s>".into(), "</s>".into()];
    let mut types = vec![2, 3, 3];
    let mut scores = vec![0.0f32, 0.0, 0.0];
    for b in 0..=255u8 {
        tokens.push(format!("<0x{b:02X}>"));
        types.push(6);
        scores.push(0.0);
    }
    let pieces: &[(&str, f32)] = &[
        ("▁", -1.0),
        ("a", -2.0),
        ("b", -2.0),
        ("c", -2.0),
        ("h", -3.0),
        ("e", -3.0),
        ("l", -3.0),
        ("o", -3.0),
        ("ab", -1.5),
        ("bc", -1.2),
        ("abc", -1.1),
        ("▁a", -1.3),
        ("he", -2.5),
        ("ll", -2.5),
        ("hell", -2.0),
        ("hello", -0.5),
        ("▁hello", -0.4),
        ("é", -4.0),
    ];
    for (p, s) in pieces {
        tokens.push(p.to_string());
        types.push(1);
        scores.push(*s);
    }
    for u in ["\n\n", "  ", "<br>", "<end_of_turn>"] {
        tokens.push(u.to_string());
        types.push(4);
        scores.push(0.0);
    }
    let w = GgufWriter::new()
        .kv("general.architecture", "llama")
        .kv("tokenizer.ggml.model", "llama")
        .kv("tokenizer.ggml.tokens", Value::Array(Array::String(tokens)))
        .kv("tokenizer.ggml.scores", scores)
        .kv("tokenizer.ggml.token_type", types)
        .kv("tokenizer.ggml.bos_token_id", 1u32)
        .kv("tokenizer.ggml.eos_token_id", 2u32);
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("toy.gguf");
    extra(w).write(&p).unwrap();
    let t = Tokenizer::from_path(&p).unwrap();
    (dir, t)
}

fn texts(t: &Tokenizer, ids: &[TokenId]) -> Vec<String> {
    ids.iter().map(|&id| t.token_text(id).unwrap().to_string()).collect()
}

#[test]
fn merges_by_score_then_leftmost() {
    let (_d, t) = toy(|w| w.kv("tokenizer.ggml.add_space_prefix", false));
    // "abc": bc (-1.2) beats ab (-1.5); then a+bc = "abc" is a token.
    assert_eq!(texts(&t, &t.encode("abc")), ["<s>", "abc"]);
    // "hello" merges through he/ll/hell to hello.
    assert_eq!(texts(&t, &t.encode("hello")), ["<s>", "hello"]);
    assert_eq!(texts(&t, &t.encode(" hello")), ["<s>", "▁hello"]);
    // equal scores: leftmost first. "abab" -> ab ab
    assert_eq!(texts(&t, &t.encode("abab")), ["<s>", "ab", "ab"]);
    assert_eq!(t.encode_with("ab", false, false).len(), 1);
}

#[test]
fn byte_fallback_and_roundtrip() {
    let (_d, t) = toy(|w| w.kv("tokenizer.ggml.add_space_prefix", false));
    let ids = t.encode("x\u{1F600}é");
    assert_eq!(texts(&t, &ids), ["<s>", "<0x78>", "<0xF0>", "<0x9F>", "<0x98>", "<0x80>", "é"]);
    for s in ["x\u{1F600}é", "hello  world\n\n<br> a b", "", "  ", "\t\n", "a\u{0}b"] {
        assert_eq!(t.decode(&t.encode(s)), s, "{s:?}");
    }
}

#[test]
fn user_defined_tokens_split_first_and_control_text_does_not() {
    let (_d, t) = toy(|w| w.kv("tokenizer.ggml.add_space_prefix", false));
    let ids = t.encode("ab\n\nab<br>c");
    assert_eq!(texts(&t, &ids), ["<s>", "ab", "\n\n", "ab", "<br>", "c"]);
    // "<end_of_turn>" is user-defined in the GGUF but llama.cpp marks it control (end of
    // generation), so plain text containing it is not split there.
    let ids = t.encode("a<end_of_turn>");
    assert!(!ids.contains(&t.token_id("<end_of_turn>").unwrap()), "{:?}", texts(&t, &ids));
    assert!(t.encode_with("a<end_of_turn>", true, true).contains(&t.token_id("<end_of_turn>").unwrap()));
    assert!(t.is_control(t.token_id("<end_of_turn>").unwrap()));
    assert_eq!(t.eot(), t.token_id("<end_of_turn>"));
    assert_eq!(t.eos_tokens(), &[2, t.token_id("<end_of_turn>").unwrap()]);
    // three newlines: the two-newline token, then the newline byte
    assert_eq!(texts(&t, &t.encode("\n\n\n")), ["<s>", "\n\n", "<0x0A>"]);
}

#[test]
fn space_prefix() {
    let (_d, t) = toy(|w| w);
    assert!(t.add_space_prefix());
    assert_eq!(texts(&t, &t.encode("hello")), ["<s>", "▁hello"]);
    // after a user-defined token the next fragment gets a space too
    assert_eq!(texts(&t, &t.encode("hello<br>hello")), ["<s>", "▁hello", "<br>", "▁hello"]);
    for s in ["hello", "hello<br>hello", " a", "a  b"] {
        assert_eq!(t.decode(&t.encode(s)), s, "{s:?}");
    }
}

#[test]
fn other_vocab_types_are_unsupported() {
    let dir = tempfile::tempdir().unwrap();
    for model in ["bert", "t5", "rwkv"] {
        let p = dir.path().join(format!("{model}.gguf"));
        GgufWriter::new()
            .kv("general.architecture", "x")
            .kv("tokenizer.ggml.model", model)
            .kv("tokenizer.ggml.tokens", vec!["a", "b"])
            .write(&p)
            .unwrap();
        let err = Tokenizer::from_path(&p).unwrap_err();
        assert!(matches!(err, TokenizerError::Unsupported { model: ref m, .. } if m == model), "{err}");
        let msg = err.to_string();
        assert!(msg.contains(&format!("{model:?}")) && msg.contains("\"llama\"") && msg.contains("\"gpt2\""), "{msg}");
    }
    let p = dir.path().join("none.gguf");
    GgufWriter::new().kv("general.architecture", "x").write(&p).unwrap();
    let err = Tokenizer::from_path(&p).unwrap_err();
    assert!(err.to_string().contains("tokenizer.ggml.model"), "{err}");
}

pub(crate) fn real() -> Tokenizer {
    let path = default_model_path();
    assert!(
        path.exists(),
        "the real model is missing at {} (set LX_MODEL, or fetch it first: `lx models fetch default`)",
        path.display()
    );
    Tokenizer::from_path(&path).unwrap()
}

#[test]
fn real_model_reference_prompt() {
    let t = real();
    assert_eq!(t.vocab_size(), 262_144);
    assert_eq!(t.bos(), Some(2));
    assert!(t.add_bos());
    assert_eq!(
        t.encode("Once upon a time, in a small village,"),
        vec![2, 14946, 3324, 496, 990, 236764, 528, 496, 1944, 9744, 236764]
    );
    assert_eq!(t.eos(), Some(1));
    assert_eq!(t.eot(), Some(106));
    assert!(t.eos_tokens().contains(&1) && t.eos_tokens().contains(&106));
    assert_eq!(t.decode(&[2, 14946, 3324, 496, 990, 236764]), "Once upon a time,");
    assert_eq!(t.encode(""), vec![2]);
}

#[test]
fn real_model_speed() {
    let t = real();
    let para = "The lighthouse keeper climbed the spiral stairs at dusk, counting each step as her \
        father had, and trimmed the wick before the first ship rounded the headland. 1,234.5 — ok?\n\n";
    let text = para.repeat(1200);
    let start = std::time::Instant::now();
    let ids = t.encode(&text);
    let took = start.elapsed();
    assert!(ids.len() >= 40_000, "{}", ids.len());
    assert_eq!(t.decode(&ids), text);
    eprintln!("encoded {} tokens ({} bytes) in {took:?}", ids.len(), text.len());
    assert!(took.as_secs_f64() < 1.0, "encoding {} tokens took {took:?}", ids.len());
}

/// A toy byte-level BPE vocabulary: the 256 byte characters (ids 0-255, in byte order), a few
/// merged tokens, `Ġhello` that no merge produces, and special tokens.
fn toy_bpe(pre: &str, extra: impl FnOnce(GgufWriter) -> GgufWriter) -> (tempfile::TempDir, Tokenizer) {
    let mut tokens: Vec<String> = bpe::BYTE_TO_CHAR.iter().map(|c| c.to_string()).collect();
    let mut types = vec![1i32; 256];
    let merges = ["h e", "l l", "Ġ t", "ll o", "he llo", "Ġt he", "Ġ h", "a b", "1 2", "12 3"];
    for m in merges {
        tokens.push(m.replace(' ', ""));
        types.push(1);
    }
    for (t, ty) in [("Ġhello", 1), ("<|endoftext|>", 3), ("<|im_start|>", 3), ("[PAD1]", 4)] {
        tokens.push(t.to_string());
        types.push(ty);
    }
    let id = |t: &str| tokens.iter().position(|x| x == t).unwrap() as u32;
    let eot = id("<|endoftext|>");
    let w = GgufWriter::new()
        .kv("general.architecture", "qwen2")
        .kv("tokenizer.ggml.model", "gpt2")
        .kv("tokenizer.ggml.pre", pre)
        .kv("tokenizer.ggml.tokens", Value::Array(Array::String(tokens.clone())))
        .kv("tokenizer.ggml.token_type", types)
        .kv("tokenizer.ggml.merges", merges.to_vec())
        .kv("tokenizer.ggml.bos_token_id", eot)
        .kv("tokenizer.ggml.eos_token_id", eot);
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("toy-bpe.gguf");
    extra(w).write(&p).unwrap();
    let t = Tokenizer::from_path(&p).unwrap();
    (dir, t)
}

#[test]
fn bpe_merges_by_rank() {
    let (_d, t) = toy_bpe("qwen2", |w| w);
    // h e -> he; l l -> ll; ll o -> llo; he llo -> hello
    assert_eq!(texts(&t, &t.encode("hello")), ["hello"]);
    // " the": Ġ t (rank 2) before Ġt he (5): Ġt + he
    assert_eq!(texts(&t, &t.encode(" the")), ["Ġthe"]);
    // " hello": h e (0) is taken before Ġ h (6), so "Ġhello" is never reached by merges
    assert_eq!(texts(&t, &t.encode(" hello")), ["Ġ", "hello"]);
    // equal ranks: the leftmost pair first
    assert_eq!(texts(&t, &t.encode("abab")), ["ab", "ab"]);
    // Qwen2 splits digits one by one, so 12 never merges
    assert_eq!(texts(&t, &t.encode("123")), ["1", "2", "3"]);
    // bytes outside ASCII: each UTF-8 byte is one character of the alphabet
    assert_eq!(texts(&t, &t.encode("é")), ["Ã", "©"]);
}

#[test]
fn bpe_llama3_ignores_merges_for_whole_tokens_and_adds_bos() {
    let (_d, t) = toy_bpe("llama-bpe", |w| w);
    assert!(t.add_bos());
    assert_eq!(texts(&t, &t.encode(" hello")), ["<|endoftext|>", "Ġhello"]);
    assert_eq!(texts(&t, &t.encode_with("123 1234", false, false)), ["123", "Ġ", "123", "4"]);
    let (_d, t) = toy_bpe("llama-bpe", |w| w.kv("tokenizer.ggml.add_bos_token", false));
    assert!(!t.add_bos());
    assert_eq!(texts(&t, &t.encode(" hello")), ["Ġhello"]);
    let (_d, t) = toy_bpe("qwen2", |w| w);
    assert!(!t.add_bos());
    assert_eq!(t.encode(""), Vec::<TokenId>::new());
}

#[test]
fn bpe_special_tokens() {
    let (_d, t) = toy_bpe("qwen2", |w| w);
    let im_start = t.token_id("<|im_start|>").unwrap();
    let pad = t.token_id("[PAD1]").unwrap();
    // control tokens only with parse_special; user-defined ones always
    let plain = t.encode("<|im_start|>hello[PAD1]");
    assert!(!plain.contains(&im_start) && plain.ends_with(&[pad]), "{:?}", texts(&t, &plain));
    assert_eq!(texts(&t, &plain)[..2], ["<", "|"]);
    let special = t.encode_with("<|im_start|>hello[PAD1]", false, true);
    assert_eq!(texts(&t, &special), ["<|im_start|>", "hello", "[PAD1]"]);
    // decoding skips control tokens and keeps user-defined text
    assert_eq!(t.decode(&special), "hello[PAD1]");
    assert_eq!(t.eos_tokens(), &[t.token_id("<|endoftext|>").unwrap()]);
    assert_eq!(t.eot(), t.token_id("<|endoftext|>"));
    assert!(!t.add_space_prefix());
}

#[test]
fn bpe_roundtrip() {
    for pre in ["llama-bpe", "qwen2", "gpt-2", "default"] {
        let (_d, t) = toy_bpe(pre, |w| w);
        for s in ["hello  world\n\n\tthe end ", "x\u{1F600}é 123456", "", " ", "\r\n", "a\u{0}b", "it's 'RE ünï", "<|im_start|>"] {
            let ids = t.encode_with(s, false, false);
            assert_eq!(t.decode(&ids), s, "{pre} {s:?}");
            assert_eq!(t.decode_bytes(&ids), s.as_bytes(), "{pre} {s:?}");
        }
        assert_eq!(t.token_bytes(t.token_id("Ġhello").unwrap()), b" hello");
        assert_eq!(t.token_bytes(t.token_id("<|endoftext|>").unwrap()), b"");
        assert_eq!(t.token_to_piece(t.token_id("Ċ").unwrap()), "\n");
    }
}

#[test]
fn bpe_unsupported_pre_tokenizer_and_missing_merges() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("tekken.gguf");
    GgufWriter::new()
        .kv("general.architecture", "llama")
        .kv("tokenizer.ggml.model", "gpt2")
        .kv("tokenizer.ggml.pre", "tekken")
        .kv("tokenizer.ggml.tokens", vec!["a", "b"])
        .kv("tokenizer.ggml.merges", vec!["a b"])
        .write(&p)
        .unwrap();
    let err = Tokenizer::from_path(&p).unwrap_err();
    assert!(matches!(err, TokenizerError::UnsupportedPreTokenizer { ref pre, .. } if pre == "tekken"), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("\"tekken\"") && msg.contains("llama-bpe") && msg.contains("qwen2") && msg.contains("gpt-2"), "{msg}");

    let p = dir.path().join("nomerges.gguf");
    GgufWriter::new()
        .kv("general.architecture", "llama")
        .kv("tokenizer.ggml.model", "gpt2")
        .kv("tokenizer.ggml.pre", "llama-bpe")
        .kv("tokenizer.ggml.tokens", vec!["a", "b"])
        .write(&p)
        .unwrap();
    let err = Tokenizer::from_path(&p).unwrap_err();
    assert!(err.to_string().contains("tokenizer.ggml.merges"), "{err}");
}

/// Any text encodes to ids inside the vocabulary, and any ids (out of range ones too) decode,
/// on the toy vocabulary and the real default model's: never a panic. Texts are random bytes
/// made valid UTF-8 and random runs of characters from several scripts, spaces and controls.
#[test]
fn any_text_encodes_and_any_ids_decode() {
    let (_dir, toy) = toy(|w| w);
    let real = Tokenizer::from_path(default_model_path()).expect("the default model's tokenizer");
    let alphabet: Vec<char> = "ab c\n\t\r  é漢字🙂\u{0}\u{200b}ءक<>/".chars().collect();
    let mut m = lx_test_support::fuzz::Mutator::new(0x0007_0ce2);
    for (name, t) in [("toy", &toy), ("default model", &real)] {
        let vocab = t.vocab_size() as TokenId;
        for case in 0..500 {
            let text = if case % 2 == 0 {
                let bytes: Vec<u8> = (0..m.below(64)).map(|_| m.next_u64() as u8).collect();
                String::from_utf8_lossy(&bytes).into_owned()
            } else {
                (0..m.below(64)).map(|_| alphabet[m.below(alphabet.len())]).collect()
            };
            let ids = std::panic::catch_unwind(|| t.encode(&text)).unwrap_or_else(|_| panic!("{name}: encoding case {case} panicked: {text:?}"));
            assert!(ids.iter().all(|&id| id < vocab), "{name}, case {case}: an id outside the vocabulary for {text:?}");
            let random: Vec<TokenId> = (0..m.below(16)).map(|_| m.next_u64() as TokenId % (vocab + 10)).collect();
            for list in [&ids, &random] {
                std::panic::catch_unwind(|| t.decode(list)).unwrap_or_else(|_| panic!("{name}: decoding case {case} panicked: {list:?}"));
            }
        }
    }
}

/// Streamed text continues what came before it: token by token through the piece decoder,
/// a generated "▁hello" keeps its space, where `decode` of the same ids starts a new text
/// and drops the space the encoder would have added (SPM with a space prefix).
#[test]
fn streamed_pieces_continue_a_text_where_decode_starts_one() {
    let (_dir, t) = toy(|w| w);
    let ids = t.encode_with("hello hello", false, false);
    assert_eq!(t.decode(&ids), "hello hello");
    let mut d = PieceDecoder::default();
    let streamed: String = ids.iter().map(|&id| d.push(t.token_bytes(id))).collect();
    assert_eq!(streamed, " hello hello");
}
