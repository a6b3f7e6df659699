//! The server-stream reader on damaged and oddly cut input: a valid stream cut into random
//! pieces gives exactly the events it gives whole, and damaged streams give events that parse
//! or are refused with a message quoting them, never a panic.

use lx_test_support::fuzz::Mutator;
use lx_openai::{Api, Chunk, SseParser};

const STREAM: &str = concat!(
    "data: {\"id\":\"c\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,\"text\":\" Once\",\"finish_reason\":null}]}\n\n",
    ": keep-alive\n\n",
    "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" upon é\"},\"finish_reason\":null}]}\r\n\r\n",
    "event: message\ndata: {\"id\":\"c\",\"choices\":[{\"index\":0,\"text\":\" a\",\n",
    "data: \"finish_reason\":\"length\"}]}\n\n",
    "data: {\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":8,\"completion_tokens\":3,\"total_tokens\":11}}\n\n",
    "data: {\"error\":{\"message\":\"overloaded\"}}\n\n",
    "data: [DONE]\n\n",
);

/// Every event of `bytes`, fed in pieces cut at `cuts`.
fn events(bytes: &[u8], cuts: &[usize]) -> Vec<String> {
    let mut p = SseParser::default();
    let mut out = Vec::new();
    let mut from = 0;
    for &cut in cuts.iter().chain([bytes.len()].iter()) {
        out.extend(p.push(&bytes[from..cut]));
        from = cut;
    }
    out.extend(p.finish());
    out
}

fn random_cuts(m: &mut Mutator, len: usize) -> Vec<usize> {
    let mut cuts: Vec<usize> = (0..m.below(12)).map(|_| m.below(len + 1)).collect();
    cuts.sort_unstable();
    cuts
}

#[test]
fn a_stream_cut_anywhere_reads_as_it_does_whole() {
    let whole = events(STREAM.as_bytes(), &[]);
    assert_eq!(whole.len(), 6, "{whole:?}");
    assert_eq!(whole[5], "[DONE]");
    let mut m = Mutator::new(0x055e_0c07);
    for case in 0..3000 {
        let cuts = random_cuts(&mut m, STREAM.len());
        assert_eq!(events(STREAM.as_bytes(), &cuts), whole, "case {case}: cuts {cuts:?}");
    }
}

#[test]
fn damaged_streams_give_chunks_or_errors_never_a_panic() {
    let mut m = Mutator::new(0x0da3_a9ed);
    let (mut parsed, mut refused) = (0, 0);
    for case in 0..3000 {
        let mut bytes = STREAM.as_bytes().to_vec();
        m.mutate(&mut bytes, 0);
        let cuts = random_cuts(&mut m, bytes.len());
        let outcome = std::panic::catch_unwind(|| {
            let mut counts = (0, 0);
            for data in events(&bytes, &cuts) {
                for api in [Api::Completions, Api::Chat] {
                    match Chunk::parse(&data, api) {
                        Ok(_) => counts.0 += 1,
                        Err(e) => {
                            assert!(!e.is_empty(), "an empty error for {data:?}");
                            counts.1 += 1;
                        }
                    }
                }
            }
            counts
        });
        match outcome {
            Ok((p, r)) => {
                parsed += p;
                refused += r;
            }
            Err(_) => panic!("case {case} panicked"),
        }
    }
    eprintln!("3000 damaged streams: {parsed} events parsed, {refused} refused");
    assert!(parsed > 0 && refused > 0);
}
