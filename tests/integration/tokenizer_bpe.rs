//! Our byte-level BPE tokenizer against llama.cpp's, id for id, on real vocabularies.
//!
//! llama.cpp ships vocabulary-only GGUF files of real models with texts (`.inp`) and the ids
//! its own test (`tests/test-tokenizer-0.cpp`, `add_special = false`, `parse_special = false`)
//! expects for them (`.out`, made with the models' Hugging Face tokenizers). For Llama 3
//! (`llama-bpe`), Qwen2, GPT-2 and StarCoder (digits cut out one by one before the GPT-2
//! split, as SmolLM's pre-tokenizer does), each test here checks:
//! 1. every `.inp` text encodes to the `.out` ids, and decodes back to the text;
//! 2. on the varied text of `tokenizer.rs` (its sections and edge cases) plus chat-template and
//!    BPE-specific cases, our ids equal llama.cpp's (loaded through llama-cpp-2, in a child
//!    process), decoding gives the text back, and every token's piece and the special ids agree.
//!
//! SmolLM2's own vocabulary (the real model in the catalog) is compared with llama.cpp the same
//! way, without `.out` ids. A further test rewrites the GPT-2 vocabulary with `tokenizer.ggml.pre = "default"` (llama.cpp's
//! fallback pre-tokenizer) and compares the same way.
//!
//! The files are other projects' data, fetched by `scripts/fetch-vocabs` into
//! `~/.cache/latency-explorer/vocabs` (or `$LX_VOCAB_DIR`). Without them these tests fail and
//! say so.

use std::path::{Path, PathBuf};

use lx_engine::backend::TokenId;
use lx_format::gguf::{GgufFile, GgufWriter, Value};
use lx_format::tokenizer::Tokenizer;
use serde_json::json;

use super::tokenizer::{assert_same_ids, assert_same_text, case, edge_cases, hex_to_bytes, run_child, sections, to_hex, Case};

/// Where `scripts/fetch-vocabs` puts the files.
fn vocab_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("LX_VOCAB_DIR") {
        return PathBuf::from(dir);
    }
    lx_models::cache_dir().join("vocabs")
}

/// The `.gguf` of a vocabulary (its `.inp` and `.out` beside it). Panics with what to do
/// when they are missing: these tests never pass without them.
fn vocab(name: &str) -> PathBuf {
    let dir = vocab_dir();
    let gguf = dir.join(format!("ggml-vocab-{name}.gguf"));
    let missing: Vec<String> = ["", ".inp", ".out"]
        .iter()
        .map(|ext| PathBuf::from(format!("{}{ext}", gguf.display())))
        .filter(|p| !p.is_file())
        .map(|p| p.display().to_string())
        .collect();
    assert!(
        missing.is_empty(),
        "llama.cpp's test vocabularies are missing ({}): run scripts/fetch-vocabs (scripts/test does)",
        missing.join(", ")
    );
    gguf
}

/// llama.cpp's own expectations: `.inp` texts separated by `\n__ggml_vocab_test__\n` (as
/// `read_tests` in test-tokenizer-0.cpp splits them), `.out` one line of ids per text.
fn expectations(gguf: &Path) -> Vec<(String, Vec<TokenId>)> {
    let inp = std::fs::read_to_string(format!("{}.inp", gguf.display())).unwrap();
    let out = std::fs::read_to_string(format!("{}.out", gguf.display())).unwrap();
    const SEP: &str = "\n__ggml_vocab_test__\n";
    let mut texts = Vec::new();
    let mut pos = 0;
    while pos < inp.len() {
        match inp[pos..].find(SEP) {
            Some(rel) => {
                texts.push(inp[pos..pos + rel].to_string());
                pos += rel + SEP.len();
            }
            None => {
                texts.push(inp[pos..].to_string());
                break;
            }
        }
    }
    let ids: Vec<Vec<TokenId>> =
        out.lines().map(|l| l.split_whitespace().map(|t| t.parse().unwrap()).collect()).collect();
    assert_eq!(texts.len(), ids.len(), "{}: .inp and .out disagree on the number of tests", gguf.display());
    assert!(texts.len() >= 40, "{}: only {} tests", gguf.display(), texts.len());
    texts.into_iter().zip(ids).collect()
}

/// Cases only a byte-level BPE vocabulary makes interesting, on top of `tokenizer.rs`'s.
fn bpe_cases() -> Vec<Case> {
    let mut v: Vec<Case> = [
        "I'M HERE, YOU'RE 'LL'VE 'D'S we'Ve a'lL it''s '",
        "don't won’t can't y'all o'clock rock'n'roll 's 'S",
        "1 12 123 1234 12345 123456 1234567 3.14159 1,000,000 ١٢٣٤٥ १२३४ ²³ ½ Ⅻ",
        "a \t\n \r\n  b   \n\n\n   c\u{3000}d\u{a0}e\u{85}f\u{2028}g\u{200b}h   ",
        "   leading spaces\tand\ttabs\t\t\n\n",
        "!!!??? ... --- === ''' \"\"\" ``` ;; :: ,, // \\\\ @@ ## $$ %% ^^ && ** (( )) [[ ]] {{ }} <> || ~~",
        "$var @user #tag 50% a+b=c x^2 ~home <html> |pipe| \u{2014}dash\u{2014} \u{ab}quote\u{bb}",
        "e\u{301}t\u{e9} na\u{ef}ve \u{928}\u{926}\u{940} \u{915}\u{947} Z\u{35c}a\u{361}l\u{334}g\u{315}o",
        "\u{10D40}\u{10D41}ab \u{1FAE9} \u{2EBF0}\u{2EBF1} \u{378}x \u{E000}y",
        "[PAD151646]x[PAD151647]",
        "<|begin_of_text|><|eot_id|><|im_start|><|im_end|><|endoftext|>",
    ]
    .iter()
    .enumerate()
    .map(|(i, s)| case(format!("bpe {i}"), *s))
    .collect();
    for (i, s) in [
        "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nWhat is a river?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n",
        "<|endoftext|>a<|endoftext|> <|endoftext|>\n",
        "x[PAD151646]y <|im_end|>",
    ]
    .iter()
    .enumerate()
    {
        v.push(Case { name: format!("bpe special {i}"), text: s.to_string(), parse_special: true });
    }
    v
}

/// `.inp`/`.out`, then the comparison with llama.cpp, for one vocabulary file.
/// `llama_detok_is_exact`: llama.cpp's detokenizer does not clean up spaces for this vocabulary
/// (Qwen2), so its output must equal the text too.
fn check(name: &str, gguf: &Path, llama_detok_is_exact: bool) {
    let start = std::time::Instant::now();
    let t = Tokenizer::from_path(gguf).unwrap_or_else(|e| panic!("{name}: our tokenizer does not load: {e}"));
    eprintln!("{name}: loaded in {:?}: {t:?}", start.elapsed());
    let expected = expectations(gguf);
    for (i, (text, ids)) in expected.iter().enumerate() {
        let ours = t.encode_with(text, false, false);
        assert_same_ids(&t, &format!("{name} .inp #{i}"), text, &ours, ids);
        assert_same_text(&format!("{name} .inp #{i}: decode(encode(text)) vs text"), &t.decode(&ours), text);
    }
    eprintln!("{name}: {} .inp texts tokenize as .out says", expected.len());
    let texts: Vec<String> = expected.into_iter().map(|(text, _)| text).collect();
    check_against_llama(name, gguf, &t, &texts, llama_detok_is_exact);
}

/// Our ids, pieces and special tokens against llama.cpp's for the same file, on the shared
/// text, its sections, the edge cases, [`bpe_cases`] and `more` texts.
fn check_against_llama(name: &str, gguf: &Path, t: &Tokenizer, more: &[String], llama_detok_is_exact: bool) {
    let sections = sections();
    let big: String = sections.iter().map(|(_, s)| s.as_str()).collect();
    let mut cases = vec![case("big text", big.clone())];
    cases.extend(sections.iter().map(|(n, s)| case(format!("section {n}"), s.clone())));
    cases.extend(edge_cases());
    cases.extend(bpe_cases());
    cases.extend(more.iter().enumerate().map(|(i, text)| case(format!(".inp #{i} with add_special"), text.clone())));

    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("cases.json");
    let output = dir.path().join("llama.json");
    let cases_json: Vec<serde_json::Value> = cases.iter().map(|c| json!({"text": c.text, "parse_special": c.parse_special})).collect();
    std::fs::write(&input, serde_json::to_vec(&json!({"model": gguf, "cases": cases_json})).unwrap()).unwrap();
    let llama = run_child(&input, &output);

    let get = |k: &str| llama[k].as_i64().unwrap_or(-1);
    assert_eq!(t.vocab_size() as i64, get("n_tokens"), "{name}: vocabulary size");
    assert_eq!(t.bos().map_or(-1, i64::from), get("bos"), "{name}: BOS");
    assert_eq!(t.eos().map_or(-1, i64::from), get("eos"), "{name}: EOS");
    let eog: Vec<TokenId> = serde_json::from_value(llama["eog"].clone()).unwrap();
    assert_eq!(t.eos_tokens(), &eog[..], "{name}: end-of-generation tokens");
    // With several end-of-turn candidates in the vocabulary (SmolLM2: <|im_end|> and
    // <|endoftext|>), llama.cpp takes the first its hash map yields, an order C++ leaves
    // unspecified; we take the first of its list (lx_format::tokenizer's docs). Then both
    // must be end-of-generation tokens, so generation stops at the same place either way.
    let (ours_eot, llama_eot) = (t.eot().map_or(-1, i64::from), get("eot"));
    if ours_eot != llama_eot {
        let ends = |id: i64| u32::try_from(id).is_ok_and(|id| eog.contains(&id));
        assert!(ends(ours_eot) && ends(llama_eot), "{name}: EOT {ours_eot} vs llama.cpp's {llama_eot}, not both end-of-generation tokens {eog:?}");
        eprintln!("{name}: EOT {ours_eot} {:?}, llama.cpp's {llama_eot} (hash order); both end generation", t.token_text(ours_eot as TokenId));
    }

    let llama_pieces: Vec<String> = serde_json::from_value(llama["pieces_hex"].clone()).unwrap();
    for (id, hex) in llama_pieces.iter().enumerate() {
        let id = id as TokenId;
        let ours = to_hex(t.token_bytes(id));
        // As in tokenizer.rs: a token llama.cpp made control by its text renders as nothing there.
        assert!(
            &ours == hex || (t.is_control(id) && hex.is_empty()),
            "{name}: token {id} {:?}: our piece {ours:?}, llama.cpp's {hex:?}",
            t.token_text(id)
        );
    }

    let answers = llama["ids"].as_array().unwrap();
    assert_eq!(answers.len(), cases.len());
    for (c, answer) in cases.iter().zip(answers) {
        let theirs: Vec<TokenId> = serde_json::from_value(answer.clone()).unwrap();
        let ours = t.encode_with(&c.text, true, c.parse_special);
        assert_same_ids(t, &format!("{name} {}", c.name), &c.text, &ours, &theirs);
        if !c.parse_special {
            assert_same_text(&format!("{name} {}: decode(encode(text)) vs text", c.name), &t.decode(&ours), &c.text);
        }
    }

    let start = std::time::Instant::now();
    let ours = t.encode(&big);
    let took = start.elapsed();
    eprintln!("{name}: big text: {} bytes, {} tokens in {took:?}, identical to llama.cpp", big.len(), ours.len());
    // generous (a shared 2-core machine): about 10 ms here
    assert!(took.as_secs_f64() < 1.0, "{name}: encoding {} tokens took {took:?}", ours.len());
    assert!(ours.len() >= 10_000, "{name}: the comparison text is only {} tokens", ours.len());
    assert_same_text(&format!("{name}: decode(encode(big text)) vs big text"), &t.decode(&ours), &big);
    if llama_detok_is_exact {
        let detok = String::from_utf8(hex_to_bytes(llama["big_detokenized_hex"].as_str().unwrap())).unwrap();
        assert_same_text(&format!("{name}: our decode vs llama_detokenize of the big text"), &t.decode(&ours), &detok);
    }
}

#[test]
fn llama3_matches_llama_cpp() {
    let gguf = vocab("llama-bpe");
    check("llama-bpe", &gguf, false);
    // Llama 3 puts BOS (<|begin_of_text|>) first; its chat markers are control tokens.
    let t = Tokenizer::from_path(&gguf).unwrap();
    assert!(t.add_bos());
    assert_eq!(t.encode("Hello world"), [128000, 9906, 1917]);
    assert_eq!(t.encode_with("<|eot_id|>", false, true), [t.token_id("<|eot_id|>").unwrap()]);
}

#[test]
fn qwen2_matches_llama_cpp() {
    let gguf = vocab("qwen2");
    check("qwen2", &gguf, true);
    // Qwen2 adds no BOS.
    let t = Tokenizer::from_path(&gguf).unwrap();
    assert!(!t.add_bos());
    assert_eq!(t.encode("Hello world"), [9707, 1879]);
}

#[test]
fn gpt2_matches_llama_cpp() {
    let gguf = vocab("gpt-2");
    check("gpt-2", &gguf, false);
}

#[test]
fn starcoder_matches_llama_cpp() {
    check("starcoder", &vocab("starcoder"), false);
}

/// SmolLM2 135M (`tokenizer.ggml.pre = "smollm"`), from the real model file: no `.out` ids exist
/// for it, so llama.cpp is the reference, on the `.inp` texts among the other cases.
#[test]
fn smollm2_matches_llama_cpp() {
    let gguf = lx_models::catalog_model_path("smollm2").unwrap();
    assert!(gguf.is_file(), "SmolLM2 is missing at {}: run `lx models fetch smollm2` (scripts/test does)", gguf.display());
    let t = Tokenizer::from_path(&gguf).unwrap();
    assert!(!t.add_bos(), "SmolLM2's GGUF says add_bos_token = false");
    let texts: Vec<String> = expectations(&vocab("starcoder")).into_iter().map(|(text, _)| text).collect();
    check_against_llama("smollm2", &gguf, &t, &texts, true);
}

/// llama.cpp's `default` pre-tokenizer (four regex passes), on the GPT-2 vocabulary rewritten
/// with `tokenizer.ggml.pre = "default"`. The GPT-2 `.out` ids do not apply to another
/// pre-tokenizer, so only the comparison with llama.cpp runs (the `.inp` texts among its cases).
#[test]
fn default_pre_tokenizer_matches_llama_cpp() {
    let gguf = vocab("gpt-2");
    let src = GgufFile::open(&gguf).unwrap();
    let mut w = GgufWriter::new();
    for (k, v) in src.metadata_pairs() {
        let v = if k == "tokenizer.ggml.pre" { Value::from("default") } else { v.clone() };
        w = w.kv(k, v);
    }
    let dir = tempfile::tempdir().unwrap();
    let rewritten = dir.path().join("ggml-vocab-gpt-2-default.gguf");
    w.write(&rewritten).unwrap();
    let t = Tokenizer::from_path(&rewritten).unwrap();
    eprintln!("gpt-2 as default: {t:?}");
    // it really is another split: punctuation runs and digit triples are cut out first
    let gpt2 = Tokenizer::from_path(&gguf).unwrap();
    assert_ne!(t.encode("x 12345 a...b!!"), gpt2.encode("x 12345 a...b!!"));
    let texts: Vec<String> = expectations(&gguf).into_iter().map(|(text, _)| text).collect();
    check_against_llama("gpt-2 as default", &rewritten, &t, &texts, false);
}
