//! The OpenAI-compatible target against a scripted server: each test scripts what the server
//! sends and when (normal streams, usage chunks, several tokens in one chunk, stalls,
//! disconnects, garbage, HTTP 429) and checks what the client loop measured and reported.

use std::net::TcpListener;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lx_engine::backend::TokenId;
use lx_client::target::TargetError;
use lx_client::traffic::{run_closed_loop, PointRun, PointSpec, Quiet, RunControl};
use lx_results::results::PointResult;
use lx_engine::scheduler::{FinishReason, Policy};
use lx_client::target::Target;
use lx_test_support::scripted_server::{done, event, serve, text, tokens, usage, Script, Scripted, Step};
use lx_openai::{Api, Server, ServerTarget, TextCodec};
use serde_json::json;

/// One word per token: the tests' tokenizer.
struct Words;
impl TextCodec for Words {
    fn prompt_text(&self, ids: &[TokenId]) -> String {
        ids.iter().map(|_| "word").collect::<Vec<_>>().join(" ")
    }
    fn tokens(&self, text: &str) -> Vec<TokenId> {
        text.split_whitespace().map(|_| 7).collect()
    }
}

fn server(s: &Scripted) -> Server {
    let mut server = Server::parse(&s.url).unwrap();
    server.idle_timeout = Duration::from_millis(1500);
    server
}

fn connect(server: Server) -> ServerTarget {
    ServerTarget::connect(server, Arc::new(Words)).unwrap()
}

fn point(requests: usize, concurrency: usize, max_tokens: u32) -> PointSpec {
    PointSpec { prompt_tokens: 8, max_tokens, concurrency, requests, warmup: 0, stop_at_eos: false, top_logprobs: 0 }
}

fn run(target: &mut ServerTarget, spec: &PointSpec) -> PointRun {
    run_closed_loop(target, spec, &|_| vec![1; 8], &[], &RunControl::default(), &mut Quiet)
}

fn summary(spec: &PointSpec, run: PointRun) -> PointResult {
    PointResult::from_run("scripted", Policy::Continuous, spec, run)
}

#[test]
fn tokens_are_stamped_as_they_arrive_and_requests_say_what_to_generate() {
    let s = serve(|_, _| Script::Stream(tokens(5, 60, 20, 8)));
    let mut target = connect(server(&s));
    assert!(target.schedules_itself());
    assert!(target.info().version.contains("model tiny"), "{:?}", target.info());
    let spec = point(4, 2, 5);
    let result = summary(&spec, run(&mut target, &spec));
    assert_eq!((result.requests, result.errors), (4, 0), "{:?}", result.error_messages);
    assert!(result.warnings.is_empty(), "{:?}", result.warnings);
    for r in &result.samples {
        assert_eq!(r.tokens.len(), 5);
        assert_eq!(r.finish, Some(FinishReason::Length));
        let ttft = r.ttft_ms().unwrap();
        assert!((60.0..120.0).contains(&ttft), "TTFT {ttft}");
    }
    // The server waits 20 ms between chunks; loopback and scheduling add little to a gap.
    let itl = result.itl_ms.p50;
    assert!((itl - 20.0).abs() < 3.0, "ITL p50 {itl}");
    let body = &s.requests.lock().unwrap()[0].body;
    assert_eq!(body["model"], "tiny");
    assert_eq!(body["max_tokens"], 5);
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"]["include_usage"], true);
    assert_eq!(body["ignore_eos"], true);
    assert_eq!(body["prompt"].as_str().unwrap().split(' ').count(), 8);
}

#[test]
fn a_chunk_with_several_tokens_records_each_at_its_arrival() {
    let s = serve(|_, _| Script::Stream(vec![Step::Wait(20), text(" a", None), Step::Wait(30), text(" b c d", None), Step::Wait(10), text(" e", Some("length")), usage(8, 5), done()]));
    let mut target = connect(server(&s));
    let spec = point(1, 1, 5);
    let result = summary(&spec, run(&mut target, &spec));
    let r = &result.samples[0];
    assert!(r.ok(), "{r:?}");
    assert_eq!(r.tokens.len(), 5);
    let t = &r.token_ms;
    assert!(t[1] == t[2] && t[2] == t[3], "{t:?}");
    // Each chunk is stamped when it arrives, which is never before the server's waits up to
    // it have passed (20, 20 + 30, 20 + 30 + 10 ms). Gaps between arrivals are no bound: a
    // chunk read late on a busy machine shortens the gap after it (a CI run measured 8.7 ms
    // after a 10 ms wait).
    assert!(t[0] >= 19.0 && t[1] >= 49.0 && t[4] >= 59.0, "{t:?}");
    assert!(t[0] < t[1] && t[3] < t[4], "{t:?}");
    assert!(result.warnings.is_empty(), "{:?}", result.warnings);
}

/// Asked for 5 tokens with `ignore_eos`, a server that stops after 1 (as llama-cpp-python's
/// server does to one request when the next arrives): recorded as the 1 token it was, and said.
#[test]
fn an_output_ended_early_is_kept_short_and_said() {
    let s = serve(|_, _| Script::Stream(vec![text(" a", None), text("", Some("stop")), usage(8, 1), done()]));
    let mut target = connect(server(&s));
    let spec = point(2, 1, 5);
    let result = summary(&spec, run(&mut target, &spec));
    assert_eq!((result.requests, result.errors), (2, 0), "{:?}", result.error_messages);
    assert!(result.samples.iter().all(|r| r.tokens.len() == 1 && r.finish == Some(FinishReason::Stop)));
    assert_eq!(result.warnings, ["2 requests: the server ended the output after 1 of 5 tokens (finish_reason stop) although asked to ignore the end of sequence"]);
}

#[test]
fn token_counts_that_disagree_with_the_server_are_warnings() {
    let s = serve(|n, _| {
        Script::Stream(match n {
            // Says 9 output and 10 prompt tokens for 3 chunks of an 8-token prompt.
            0 => vec![text(" a", None), text(" b", None), text(" c", Some("length")), usage(10, 9), done()],
            // No usage at all.
            _ => vec![text(" a", None), text(" b", None), text(" c", Some("length")), done()],
        })
    });
    let mut target = connect(server(&s));
    let spec = point(2, 1, 3);
    let result = summary(&spec, run(&mut target, &spec));
    assert_eq!(result.requests, 2);
    let w = result.warnings.join(" | ");
    assert!(w.contains("the server counted 9 output tokens; our tokenizer found 3"), "{w}");
    assert!(w.contains("the server counted 10 prompt tokens where we sent 8"), "{w}");
    assert!(w.contains("reported no usage"), "{w}");
}

#[test]
fn stalls_disconnects_garbage_and_server_errors_fail_only_their_request() {
    let s = serve(|n, _| {
        let mut steps = vec![text(" a", None), text(" b", None)];
        match n {
            0 => steps.push(Step::Wait(4000)),
            1 => {} // the connection closes here, mid-stream
            2 => steps.push(Step::Send("data: {not json\n\n".into())),
            3 => steps.push(event(json!({"error": {"message": "out of KV cache", "code": 500}}))),
            _ => return Script::Stream(tokens(3, 5, 5, 8)),
        }
        Script::Stream(steps)
    });
    let mut server = server(&s);
    server.idle_timeout = Duration::from_millis(400);
    let mut target = connect(server);
    let spec = point(6, 1, 3);
    let result = summary(&spec, run(&mut target, &spec));
    assert_eq!((result.requests, result.errors, result.samples.len()), (2, 4, 6), "{:?}", result.error_messages);
    let e = |i: usize| result.samples[i].error.clone().unwrap_or_default();
    assert!(e(0).contains("sent nothing for 0.4 s, after 2 tokens"), "{}", e(0));
    assert!(e(1).contains("closed the stream after 2 tokens without finishing"), "{}", e(1));
    assert!(e(2).contains("malformed event"), "{}", e(2));
    assert!(e(3).contains("out of KV cache"), "{}", e(3));
    // What a failed request received before it failed is kept.
    assert_eq!(result.samples[0].tokens.len(), 2);
}

#[test]
fn busy_answers_are_retried_after_retry_after_and_counted() {
    let s = serve(|n, _| match n {
        0 => Script::Status(429, vec![("Retry-After", "1".into())], r#"{"error":{"message":"busy"}}"#.into()),
        1 => Script::Stream(tokens(2, 5, 5, 8)),
        _ => Script::Status(503, vec![("Retry-After", "0".into())], "overloaded".into()),
    });
    let mut server = server(&s);
    server.max_retries = 2;
    let mut target = connect(server);
    let spec = point(2, 1, 2);
    let result = summary(&spec, run(&mut target, &spec));
    let first = &result.samples[0];
    assert!(first.ok(), "{first:?}");
    assert!(first.ttft_ms().unwrap() >= 1000.0, "the wait counts: {:?}", first.ttft_ms());
    assert_eq!(first.warnings, ["HTTP 429: retried after 1.0 s (its TTFT includes the wait)"]);
    // Busy beyond the retries: a clear per-request error, with both retries on record.
    let second = &result.samples[1];
    assert_eq!(second.error.as_deref(), Some("HTTP 503: overloaded"));
    assert_eq!(second.warnings.len(), 2);
}

#[test]
fn a_stopped_run_cancels_streams_and_the_server_sees_them_go() {
    let s = serve(|_, _| Script::Stream(tokens(200, 5, 10, 8)));
    let mut target = connect(server(&s));
    let control = RunControl::default();
    let stop = control.stop.clone();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        stop.store(true, Ordering::SeqCst);
    });
    let spec = point(4, 2, 200);
    let t0 = Instant::now();
    let run = run_closed_loop(&mut target, &spec, &|_| vec![1; 8], &[], &control, &mut Quiet);
    assert!(run.stopped && t0.elapsed() < Duration::from_secs(2));
    assert_eq!(run.records.len(), 2);
    assert!(run.records.iter().all(|r| r.finish == Some(FinishReason::Cancelled) && !r.tokens.is_empty()), "{:?}", run.records);
    let deadline = Instant::now() + Duration::from_secs(2);
    while s.abandoned.load(Ordering::SeqCst) < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(s.abandoned.load(Ordering::SeqCst), 2, "both streams closed on the server's side");
}

#[test]
fn chat_requests_send_one_user_message_and_read_deltas() {
    let s = serve(|_, _| {
        let delta = |c: &str, f: Option<&str>| event(json!({"choices": [{"index": 0, "delta": {"content": c}, "finish_reason": f}]}));
        Script::Stream(vec![delta(" hi", None), delta(" there", Some("stop")), usage(20, 2), done()])
    });
    let mut server = server(&s);
    server.api = Api::Chat;
    server.ignore_eos = false;
    let mut target = connect(server);
    let spec = point(1, 1, 8);
    let result = summary(&spec, run(&mut target, &spec));
    let r = &result.samples[0];
    assert!(r.ok(), "{r:?}");
    // Stopped at end of sequence before max_tokens: recorded as short, not padded.
    assert_eq!((r.tokens.len(), r.finish), (2, Some(FinishReason::Stop)));
    // The chat template's extra prompt tokens are expected, not a warning.
    assert!(result.warnings.is_empty(), "{:?}", result.warnings);
    let body = &s.requests.lock().unwrap()[0].body;
    assert_eq!(body["messages"][0]["role"], "user");
    assert!(body.get("ignore_eos").is_none());
}

#[test]
fn unreachable_servers_and_unknown_models_fail_to_connect_clearly() {
    let s = serve(|_, _| Script::Stream(Vec::new()));
    let mut asked = server(&s);
    asked.model = Some("llama-70b".into());
    let err = ServerTarget::connect(asked, Arc::new(Words)).err().unwrap();
    assert!(matches!(&err, TargetError::Load(m) if m.contains("does not serve model 'llama-70b'; it lists: tiny")), "{err}");
    // A port nobody listens on.
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let err = ServerTarget::connect(Server::parse(&format!("http://127.0.0.1:{port}/v1")).unwrap(), Arc::new(Words)).err().unwrap();
    assert!(matches!(&err, TargetError::Load(m) if m.contains("cannot reach")), "{err}");
}
