//! Our tokenizer against llama.cpp's own, id for id.
//!
//! `lx_format::tokenizer::Tokenizer` re-implements llama.cpp's SentencePiece tokenizer so that
//! every backend sees the same prompt ids. This test tokenizes a varied text of more than
//! 10,000 tokens (prose, code, numbers, whitespace runs, six scripts, emoji sequences, and text
//! that looks like special tokens) with both and requires identical ids, plus a set of edge cases
//! one by one, the special-token ids, and every token's decoded piece.
//!
//! llama.cpp may be initialised only once per process and the llama.cpp backend crate keeps its
//! instance for the life of the process, so the llama.cpp side runs in a child process: this
//! same test binary, running only the ignored test `tokenizer::llama_cpp_child`, which reads the
//! cases from a JSON file and writes llama.cpp's answers to another.
//!
//! The text, the edge cases and the llama.cpp child are shared with `tokenizer_bpe.rs`.

use std::path::{Path, PathBuf};
use std::process::Command;

use lx_engine::backend::TokenId;
use lx_format::tokenizer::Tokenizer;
use serde_json::{json, Value};

const CHILD_IN: &str = "LX_TOKENIZER_CHILD_IN";
const CHILD_OUT: &str = "LX_TOKENIZER_CHILD_OUT";

/// One text to tokenize, and how.
pub(crate) struct Case {
    pub(crate) name: String,
    pub(crate) text: String,
    pub(crate) parse_special: bool,
}

pub(crate) fn case(name: impl Into<String>, text: impl Into<String>) -> Case {
    Case { name: name.into(), text: text.into(), parse_special: false }
}

const RUST_CODE: &str = r#"use std::collections::HashMap;

/// Counts how often each word appears, ignoring case.
pub fn word_counts(text: &str) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for word in text.split_whitespace() {
        let w = word.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase();
        if !w.is_empty() {
            *counts.entry(w).or_insert(0) += 1;
        }
    }
    counts
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Point { x: f64, y: f64 }

impl std::ops::Add for Point {
    type Output = Point;
    fn add(self, o: Point) -> Point { Point { x: self.x + o.x, y: self.y + o.y } }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
	let p = Point { x: 1.5, y: -2.25 } + Point { x: 0.5, y: 0.25 };
	println!("{p:?} {:>8.3} {:#x} {:08b}", p.x, 255u8, 5);
	let v: Vec<u64> = (1..=10).filter(|n| n % 3 != 0).map(|n| n * n).collect();
	assert_eq!(v.iter().sum::<u64>(), 259);
	if let Some(&last) = v.last() { eprintln!("last = {last}"); }
	Ok(())
}
"#;

const PYTHON_CODE: &str = r#"import json
from dataclasses import dataclass, field


@dataclass
class Reading:
    station: str
    celsius: float
    tags: list[str] = field(default_factory=list)

    @property
    def fahrenheit(self) -> float:
        return self.celsius * 9 / 5 + 32


def summarize(readings):
    """Return min/max/mean per station as a dict."""
    out = {}
    for r in readings:
        s = out.setdefault(r.station, {"n": 0, "sum": 0.0, "min": float("inf"), "max": float("-inf")})
        s["n"] += 1
        s["sum"] += r.celsius
        s["min"] = min(s["min"], r.celsius)
        s["max"] = max(s["max"], r.celsius)
    return {k: {**v, "mean": v["sum"] / v["n"]} for k, v in out.items()}


if __name__ == "__main__":
    data = [Reading("north", 3.5), Reading("north", -1.25, ["frost"]), Reading("harbour", 12.0)]
    print(json.dumps(summarize(data), indent=2))
    print(f"{data[0].fahrenheit:.1f}°F", end="\n\n")
    squares = [i ** 2 for i in range(10) if i % 2 == 0]  # [0, 4, 16, 36, 64]
    lambda_ = lambda x, *args, **kw: (x, args, kw)
"#;

const NUMBERS: &str = "Pi is about 3.14159, e is 2.718281828459045, and the golden ratio is 1.6180339887. \
A million is written 1,000,000 in English, 1.000.000 in German and 10,00,000 in India. \
Prices: $19.99, €5,50, £1,234.56, ¥100000, 99.9% uptime, -40°C equals -40°F. \
Scientific: 6.022e23, 1.6e-19, 0x7FFF_FFFF, 0b1010_1010, 0o755, 1_000_000u64. \
Dates and times: 2024-03-15T12:34:56Z, 15/03/2024, 03/15/24, 23:59:59.999, 1970-01-01. \
Phone +1 (555) 010-9999, ISBN 978-3-16-148410-0, IPv4 192.168.0.1, IPv6 2001:db8::ff00:42:8329. \
Versions v1.2.3-rc.4+build.567, 10.0.19045.3693. Ordinals: 1st 2nd 3rd 4th 21st 102nd 1000th. \
Fractions ½ ⅓ ¾, superscripts x² y³ 10⁻⁹, roman numerals Ⅻ ⅻ, and 1/2 + 1/3 = 5/6.\n";

const MULTILINGUAL: &str = "\
中文：今天早上下了一场小雨，街上的行人都撑着伞慢慢地走。我在桥边的小店里买了一杯热豆浆，看着河水流向远方。\n\
日本語：古い時計屋の店先で、少女は小さな歯車をピンセットでつまみ上げた。カタカナのテスト、ひらがなのテスト、漢字のテスト。\n\
العربية: في المساء، أضاء المنارة ضوءها فوق الصخور، وكانت السفن تبحر ببطء نحو الميناء الهادئ.\n\
Русский: Река медленно текла через долину, оставляя на берегах тонкий слой ила. Съешь же ещё этих мягких французских булок.\n\
हिन्दी: नदी के किनारे एक छोटा सा गाँव था, जहाँ लोग हर सुबह रोटी पकाते थे और बच्चे पानी में खेलते थे।\n\
한국어: 등대지기는 매일 밤 불을 켜고 바다를 바라보았다. 안개가 짙은 날에는 경적을 울렸다.\n\
Ελληνικά: Ο φάρος στέκεται στην άκρη του βράχου. עברית: הנהר זורם אל הים. ไทย: แม่น้ำไหลช้าๆ ผ่านหมู่บ้าน\n\
Tiếng Việt: Người thợ đồng hồ già lắng nghe tiếng tích tắc. Deutsch: Größere Bäcker backen früh. \
Français: « Où est l’hôpital ? » — Ça dépend. Türkçe: Işık, ılık, İstanbul. Polski: Zażółć gęślą jaźń.\n\
Combining marks: e\u{301} a\u{308} n\u{303} Z\u{35c}a\u{361}l\u{334}g\u{315}o\u{311}, zero-width\u{200b}space, soft\u{ad}hyphen, \
no\u{a0}break, bidi \u{202e}reversed\u{202c}, BOM \u{feff}here.\n";

const EMOJI: &str = "Emoji: 😀 😂 🥲 👍 👍🏽 👋🏿 ❤️ ❤ ✨ 🔥 🎉 🚀 🧑‍💻 👩🏾‍🔬 👨‍👩‍👧‍👦 👩‍❤️‍💋‍👨 🏳️‍🌈 🏴‍☠️ \
Flags: 🇯🇵 🇫🇷 🇧🇷 🇺🇸 🇮🇳 🇰🇷 🇨🇳 🇪🇬 🇷🇺 🇩🇪 🏴󠁧󠁢󠁳󠁣󠁴󠁿 Keycaps: 1️⃣ #️⃣ *️⃣ \
Mixed: the rocket🚀launched, ok👌, 🙂🙃🙂, 🐈‍⬛ and 🐕‍🦺, 🫶🏻, ☕️ vs ☕, ©️ ® ™ ♠ ♣ ♥ ♦ ⚠️ ✅ ❌.\n";

const SPECIAL_LOOKING: &str = "Text that looks like special tokens: <bos> <eos> <pad> <unk> <mask> [multimodal] \
<start_of_turn>user\nHello there!<end_of_turn>\n<start_of_turn>model\nHi!<end_of_turn>\n\
</s> <s> <unused0> <unused42> <unused6241> <0x0A> <0xFF> <start_of_image> <end_of_image> \
<table><thead><tr><th>Name</th><th>Age</th></tr></thead><tbody><tr><td>Ana</td><td>31</td></tr></tbody></table>\n\
<h1>Title</h1><h2>Sub</h2><p>Some <b>bold</b>, <i>italic</i>, <em>em</em>, <strong>strong</strong>, <u>u</u>, <sub>2</sub>, <sup>3</sup>, <code>x = 1</code>.</p>\n\
<div><span>a</span><a href=\"x\">link</a><img src=\"y.png\"/><ul><li>one</li><li>two</li></ul></div><blockquote>q</blockquote>\n\
<html><body><iframe></iframe><footer>f</footer></body></html> <bbox>1 2 3 4</bbox> <<b>> <</b>> <b<b>> </b</b>>\n\
Angle brackets alone: < > << >> <> </ /> <0x> <0x0> <0xG1> [ ] { } _ __ ___.\n";

/// Whitespace in many shapes: every sequence of up to four of ' ', '\t', '\n', '\r' between
/// letters, and long runs (longer than any whitespace token).
fn whitespace() -> String {
    let chars = [' ', '\t', '\n', '\r'];
    let mut s = String::new();
    for len in 1..=4u32 {
        for code in 0..4usize.pow(len) {
            let mut c = code;
            s.push('w');
            for _ in 0..len {
                s.push(chars[c % 4]);
                c /= 4;
            }
        }
    }
    s.push('\n');
    for n in [1usize, 2, 3, 7, 15, 16, 17, 30, 31, 32, 33, 40, 63, 65] {
        for unit in [" ", "\t", "\n", "\r\n", " \n", "\t ", "  \t"] {
            s.push('x');
            s.push_str(&unit.repeat(n));
        }
    }
    s.push_str("  leading and trailing  \n\n\n   \t\t indented\n\n\n\n\nend   \n");
    s
}

/// Digit runs and pseudo-random numbers in several formats.
fn digits(rng: &mut Rng) -> String {
    let mut s = String::new();
    for n in 1..=40 {
        s.push_str(&"1234567890".repeat(4)[..n]);
        s.push(' ');
    }
    s.push('\n');
    for i in 0..300 {
        let v = rng.next();
        match i % 6 {
            0 => s.push_str(&format!("{} ", v % 1_000_000_007)),
            1 => s.push_str(&format!("{:.5} ", (v % 100_000) as f64 / 977.0)),
            2 => s.push_str(&format!("-{}.{:03} ", v % 1000, v % 997)),
            3 => s.push_str(&format!("{:x} ", v)),
            4 => {
                let n = v % 100_000_000;
                s.push_str(&format!("{},{:03},{:03} ", n / 1_000_000, n / 1000 % 1000, n % 1000));
            }
            _ => s.push_str(&format!("{}e{} ", v % 100, (v >> 8) % 30)),
        }
    }
    s.push('\n');
    s
}

/// Pseudo-random characters from many Unicode blocks (lots of byte fallback).
fn random_unicode(rng: &mut Rng, n: usize) -> String {
    const RANGES: &[(u32, u32)] = &[
        (0x20, 0x7e),       // ASCII
        (0xa0, 0xff),       // Latin-1
        (0x100, 0x24f),     // Latin extended
        (0x370, 0x3ff),     // Greek
        (0x400, 0x4ff),     // Cyrillic
        (0x590, 0x5ff),     // Hebrew
        (0x600, 0x6ff),     // Arabic
        (0x900, 0x97f),     // Devanagari
        (0xe00, 0xe7f),     // Thai
        (0x1100, 0x11ff),   // Hangul jamo
        (0x2000, 0x206f),   // punctuation
        (0x2190, 0x23ff),   // arrows, math, technical
        (0x2500, 0x27bf),   // box drawing, dingbats
        (0x3040, 0x30ff),   // kana
        (0x4e00, 0x9fff),   // CJK
        (0xac00, 0xd7a3),   // Hangul syllables
        (0xe000, 0xe0ff),   // private use
        (0xfb00, 0xfdff),   // presentation forms
        (0xfe00, 0xfe0f),   // variation selectors
        (0xff00, 0xffef),   // fullwidth
        (0x10000, 0x1007f), // Linear B
        (0x1d400, 0x1d7ff), // math alphanumerics
        (0x1f300, 0x1faff), // emoji
        (0x20000, 0x2a6df), // CJK extension B
        (0xe0020, 0xe007f), // tags
        (0x300, 0x36f),     // combining marks
    ];
    let mut s = String::new();
    for i in 0..n {
        let (lo, hi) = RANGES[(rng.next() % RANGES.len() as u64) as usize];
        let c = char::from_u32(lo + (rng.next() % u64::from(hi - lo + 1)) as u32).unwrap_or('?');
        s.push(c);
        if i % 13 == 12 {
            s.push(' ');
        }
        if i % 97 == 96 {
            s.push('\n');
        }
    }
    s.push('\n');
    s
}

/// Deterministic splitmix64.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// The sections of the big text, in order.
pub(crate) fn sections() -> Vec<(&'static str, String)> {
    let mut rng = Rng(20240315);
    vec![
        ("prose", lx_format::workload::CORPUS.to_string()),
        ("rust", RUST_CODE.to_string()),
        ("python", PYTHON_CODE.to_string()),
        ("numbers", NUMBERS.to_string()),
        ("digits", digits(&mut rng)),
        ("whitespace", whitespace()),
        ("multilingual", MULTILINGUAL.to_string()),
        ("emoji", EMOJI.to_string()),
        ("special-looking", SPECIAL_LOOKING.to_string()),
        ("random-unicode", random_unicode(&mut rng, 1500)),
    ]
}

pub(crate) fn edge_cases() -> Vec<Case> {
    let mut v: Vec<Case> = [
        "", " ", "  ", "   ", "\n", "\n\n", "\t", "\r\n", "a", " a", "a ", "  a", "hello world", "Hello, World!",
        "Once upon a time, in a small village,", "<bos>", "<bos>hi", "<eos>", "</s>", "<s>", "<end_of_turn>",
        "<start_of_turn>", "<unused0>", "<0x41>", "▁", "▁▁▁", " ▁ ", "a▁b", "_▁_", "[multimodal]", "<table>", "x<table>y", "<b><b>",
        "\u{0}", "a\u{0}b", "\u{7f}", "\u{1F600}", "👨‍👩‍👧‍👦", "🇯🇵🇫🇷", "é", "e\u{301}", "\u{feff}", "\u{10ffff}",
        "                                                  ", "\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n",
    ]
    .iter()
    .enumerate()
    .map(|(i, s)| case(format!("edge {i}"), *s))
    .collect();
    // parse_special = true (chat templates): control tokens are recognised too.
    for (i, s) in [
        "<start_of_turn>user\nWhat is a river?<end_of_turn>\n<start_of_turn>model\n",
        "<bos><bos>x<eos>",
        "a</s>b<unused3>c<pad><unk><mask>",
    ]
    .iter()
    .enumerate()
    {
        v.push(Case { name: format!("special {i}"), text: s.to_string(), parse_special: true });
    }
    v
}

fn pieces(t: &Tokenizer, ids: &[TokenId], around: usize, from: usize) -> String {
    let lo = from.saturating_sub(around);
    let hi = (from + around + 1).min(ids.len());
    (lo..hi)
        .map(|i| {
            let id = ids[i];
            let text = t.token_text(id).unwrap_or("<out of range>");
            let mark = if i == from { ">>" } else { "" };
            format!("{mark}[{i}] {id} {text:?}")
        })
        .collect::<Vec<_>>()
        .join("  ")
}

/// Panics with the first difference and the pieces around it.
pub(crate) fn assert_same_ids(t: &Tokenizer, name: &str, text: &str, ours: &[TokenId], llama: &[TokenId]) {
    if ours == llama {
        return;
    }
    let first = ours.iter().zip(llama).position(|(a, b)| a != b).unwrap_or(ours.len().min(llama.len()));
    // byte offset in the text where they diverge, from the agreed prefix
    let agreed = t.decode_bytes(&ours[..first]).len();
    let context: String = text.get(agreed.saturating_sub(20)..).unwrap_or("").chars().take(60).collect();
    panic!(
        "case {name:?}: ids differ at position {first} (ours {} tokens, llama.cpp {} tokens)\n\
         text near there: {context:?}\n  ours:      {}\n  llama.cpp: {}",
        ours.len(),
        llama.len(),
        pieces(t, ours, 4, first),
        pieces(t, llama, 4, first),
    );
}

/// Panics with the first differing character and its surroundings.
pub(crate) fn assert_same_text(what: &str, a: &str, b: &str) {
    if a == b {
        return;
    }
    let at = a.char_indices().zip(b.chars()).find(|((_, x), y)| x != y).map(|((i, _), _)| i).unwrap_or(a.len().min(b.len()));
    let near = |s: &str| -> String {
        let mut from = at.saturating_sub(30).min(s.len());
        while !s.is_char_boundary(from) {
            from -= 1;
        }
        s[from..].chars().take(60).collect()
    };
    panic!("{what}: texts differ at byte {at} (lengths {} and {})\n  left:  {:?}\n  right: {:?}", a.len(), b.len(), near(a), near(b));
}

/// decode(encode(text)) == text, except that U+2581 `▁` comes back as a space: SentencePiece
/// vocabularies write spaces as `▁`, so a literal `▁` in the input is indistinguishable from an
/// escaped space (in llama.cpp too). The big text has none.
fn assert_roundtrip(t: &Tokenizer, name: &str, text: &str, ids: &[TokenId]) {
    let expected = text.replace('\u{2581}', " ");
    assert_same_text(&format!("case {name:?}: decode(encode(text)) vs text"), &t.decode(ids), &expected);
}

#[test]
fn matches_llama_cpp() {
    let model = integration_tests::model_path();
    let t = Tokenizer::from_path(&model).expect("our tokenizer loads");

    let sections = sections();
    let big: String = sections.iter().map(|(_, s)| s.as_str()).collect();
    let mut cases = vec![case("big text", big.clone())];
    cases.extend(sections.iter().map(|(n, s)| case(format!("section {n}"), s.clone())));
    cases.extend(edge_cases());

    // llama.cpp's answers, from a child process.
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("cases.json");
    let output = dir.path().join("llama.json");
    let cases_json: Vec<Value> = cases.iter().map(|c| json!({"text": c.text, "parse_special": c.parse_special})).collect();
    std::fs::write(&input, serde_json::to_vec(&json!({"model": model, "cases": cases_json})).unwrap()).unwrap();
    let llama = run_child(&input, &output);

    // Special ids and end-of-generation tokens.
    let get = |k: &str| llama[k].as_i64().unwrap_or(-1);
    assert_eq!(t.vocab_size() as i64, get("n_tokens"));
    assert_eq!(t.bos().map_or(-1, i64::from), get("bos"));
    assert_eq!(t.eos().map_or(-1, i64::from), get("eos"));
    assert_eq!(t.eot().map_or(-1, i64::from), get("eot"));
    let eog: Vec<TokenId> = serde_json::from_value(llama["eog"].clone()).unwrap();
    assert_eq!(t.eos_tokens(), &eog[..], "end-of-generation tokens");

    // Every token's piece. llama.cpp renders a token it marked as control by text ("</s>" in Gemma)
    // as nothing; we keep the GGUF's user-defined text, so decode gives back the text encoded.
    let llama_pieces: Vec<String> = serde_json::from_value(llama["pieces_hex"].clone()).unwrap();
    let mut differing = Vec::new();
    for (id, hex) in llama_pieces.iter().enumerate() {
        let ours = to_hex(t.token_bytes(id as TokenId));
        if &ours != hex {
            differing.push(id as TokenId);
        }
    }
    for &id in &differing {
        assert!(
            t.is_control(id) && llama_pieces[id as usize].is_empty(),
            "token {id} {:?}: our piece {:?}, llama.cpp's {:?}",
            t.token_text(id),
            to_hex(t.token_bytes(id)),
            llama_pieces[id as usize]
        );
    }
    eprintln!("pieces: {} tokens, {} differ by design: {:?}", llama_pieces.len(), differing.len(),
        differing.iter().map(|&id| t.token_text(id).unwrap()).collect::<Vec<_>>());

    // Ids, case by case.
    let answers = llama["ids"].as_array().unwrap();
    for (c, answer) in cases.iter().zip(answers) {
        let theirs: Vec<TokenId> = serde_json::from_value(answer.clone()).unwrap();
        let ours = t.encode_with(&c.text, true, c.parse_special);
        assert_same_ids(&t, &c.name, &c.text, &ours, &theirs);
        if !c.parse_special {
            assert_roundtrip(&t, &c.name, &c.text, &ours);
        }
    }

    // The big text: long enough, and the reference prompt from FACTS.md.
    let ours = t.encode(&big);
    eprintln!("big text: {} bytes, {} tokens, identical to llama.cpp", big.len(), ours.len());
    assert!(ours.len() >= 10_000, "the comparison text is only {} tokens", ours.len());
    assert!(!big.contains('\u{2581}'));
    assert_same_text("decode(encode(big text)) vs big text", &t.decode(&ours), &big);
    let llama_detok = String::from_utf8(hex_to_bytes(llama["big_detokenized_hex"].as_str().unwrap())).unwrap();
    assert_same_text("our decode vs llama_detokenize of the big text", &t.decode(&ours), &llama_detok);
    assert_eq!(
        t.encode("Once upon a time, in a small village,"),
        vec![2, 14946, 3324, 496, 990, 236764, 528, 496, 1944, 9744, 236764]
    );
}

pub(crate) fn to_hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

pub(crate) fn hex_to_bytes(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

pub(crate) fn run_child(input: &Path, output: &Path) -> Value {
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(&exe)
        .args(["tokenizer::llama_cpp_child", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
        .env(CHILD_IN, input)
        .env(CHILD_OUT, output)
        .output()
        .expect("run the llama.cpp child");
    assert!(
        out.status.success() && output.is_file(),
        "llama.cpp child failed ({})\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&std::fs::read(output).unwrap()).unwrap()
}

/// The llama.cpp side, run in its own process by `matches_llama_cpp`; does nothing otherwise.
#[test]
#[ignore = "run by tokenizer::matches_llama_cpp in a child process"]
fn llama_cpp_child() {
    use llama_cpp_2::llama_backend::LlamaBackend;
    use llama_cpp_2::model::params::LlamaModelParams;
    use llama_cpp_2::model::LlamaModel;
    use llama_cpp_2::token::LlamaToken;

    let (Some(input), Some(output)) = (std::env::var_os(CHILD_IN), std::env::var_os(CHILD_OUT)) else {
        return;
    };
    let req: Value = serde_json::from_slice(&std::fs::read(PathBuf::from(input)).unwrap()).unwrap();
    let mut backend = LlamaBackend::init().expect("llama.cpp backend");
    backend.void_logs();
    let params = LlamaModelParams::default().with_vocab_only(true);
    let model = LlamaModel::load_from_file(&backend, req["model"].as_str().unwrap(), &params).expect("load the model");
    let vocab = model.vocab();

    let mut ids = Vec::new();
    let mut big_detok = String::new();
    for (i, c) in req["cases"].as_array().unwrap().iter().enumerate() {
        let text = c["text"].as_str().unwrap();
        let toks = vocab.tokenize(text.as_bytes(), true, c["parse_special"].as_bool().unwrap());
        if i == 0 {
            big_detok = to_hex(&vocab.detokenize(&toks, true, false));
        }
        ids.push(toks.iter().map(|t| t.0).collect::<Vec<i32>>());
    }
    let n = vocab.n_tokens();
    let eog: Vec<i32> = (0..n).filter(|&i| vocab.is_eog(LlamaToken::new(i))).collect();
    let pieces: Vec<String> = (0..n).map(|i| to_hex(&vocab.token_to_piece(LlamaToken::new(i), false, None))).collect();
    let answer = json!({
        "n_tokens": n,
        "bos": vocab.bos().0,
        "eos": vocab.eos().0,
        "eot": vocab.eot().0,
        "eog": eog,
        "pieces_hex": pieces,
        "ids": ids,
        "big_detokenized_hex": big_detok,
    });
    std::fs::write(PathBuf::from(output), serde_json::to_vec(&answer).unwrap()).unwrap();
}
