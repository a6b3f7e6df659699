//! Hub downloads against a tiny HTTP/1.1 server on 127.0.0.1 that answers the requests a Hub
//! download makes for one file: `HEAD` then `GET {endpoint}/{owner}/{repo}/resolve/{revision}/{file}`, with
//! the headers it reads (ETag, X-Repo-Commit, Content-Length; If-None-Match → 304; Range → 206).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::*;

const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";
/// Bounds on the server: connections served, and how long it lives.
const MAX_CONNECTIONS: usize = 200;
const LIFETIME: Duration = Duration::from_secs(120);

#[derive(Default)]
struct Counts {
    head: AtomicUsize,
    get: AtomicUsize,
    /// The GET (counted from 1) whose body the server cuts off halfway, as a dropped link would.
    cut_get: AtomicUsize,
}

struct HubServer {
    url: String,
    counts: Arc<Counts>,
    log: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl HubServer {
    /// Serve `files`: URL path (`/owner/repo/resolve/main/file.gguf`) → (body, etag).
    fn start(files: HashMap<String, (Vec<u8>, String)>) -> HubServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let counts = Arc::new(Counts::default());
        let log = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (c, l, st) = (counts.clone(), log.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let deadline = Instant::now() + LIFETIME;
            let mut served = 0;
            while !st.load(Ordering::Relaxed)
                && Instant::now() < deadline
                && served < MAX_CONNECTIONS
            {
                match listener.accept() {
                    Ok((stream, _)) => {
                        served += 1;
                        let _ = serve(stream, &files, &c, &l);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(5))
                    }
                    Err(_) => break,
                }
            }
        });
        HubServer {
            url,
            counts,
            log,
            stop,
            thread: Some(thread),
        }
    }

    fn gets(&self) -> usize {
        self.counts.get.load(Ordering::SeqCst)
    }
    fn heads(&self) -> usize {
        self.counts.head.load(Ordering::SeqCst)
    }
    fn cut_get(&self, n: usize) {
        self.counts.cut_get.store(n, Ordering::SeqCst)
    }
    fn ranges(&self) -> Vec<String> {
        let log = self.log.lock().unwrap();
        log.iter().filter_map(|l| l.split_once(" range=").map(|(_, r)| r.to_string())).collect()
    }
}

impl Drop for HubServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One request per connection (we answer `Connection: close`).
fn serve(
    stream: TcpStream,
    files: &HashMap<String, (Vec<u8>, String)>,
    counts: &Counts,
    log: &Mutex<Vec<String>>,
) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.set_write_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut headers = HashMap::new();
    for _ in 0..100 {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let mut parts = request_line.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let path = parts
        .next()
        .unwrap_or("")
        .split('?')
        .next()
        .unwrap_or("")
        .to_string();
    let range = headers.get("range").map(|r| format!(" range={r}")).unwrap_or_default();
    log.lock().unwrap().push(format!("{method} {path}{range}"));
    let mut out = stream;
    let is_head = method == "HEAD";
    let nth = match method.as_str() {
        "HEAD" => counts.head.fetch_add(1, Ordering::SeqCst) + 1,
        "GET" => counts.get.fetch_add(1, Ordering::SeqCst) + 1,
        _ => 0,
    };
    let cut = !is_head && nth == counts.cut_get.load(Ordering::SeqCst);
    let Some((body, etag)) = files.get(&path) else {
        let msg = "Entry not found";
        write!(
            out,
            "HTTP/1.1 404 Not Found\r\nx-error-code: EntryNotFound\r\nx-error-message: {msg}\r\n\
             content-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            msg.len()
        )?;
        if !is_head {
            out.write_all(msg.as_bytes())?;
        }
        return out.flush();
    };
    let common = format!("etag: \"{etag}\"\r\nx-repo-commit: {COMMIT}\r\naccept-ranges: bytes\r\nconnection: close\r\n");
    if headers.get("if-none-match").map(|v| v.trim_matches('"')) == Some(etag.as_str()) {
        write!(out, "HTTP/1.1 304 Not Modified\r\n{common}\r\n")?;
        return out.flush();
    }
    let (status, slice, range_header) = match headers
        .get("range")
        .and_then(|r| parse_range(r, body.len()))
    {
        Some((a, b)) => (
            "206 Partial Content",
            &body[a..=b],
            format!("content-range: bytes {a}-{b}/{}\r\n", body.len()),
        ),
        None => ("200 OK", &body[..], String::new()),
    };
    write!(
        out,
        "HTTP/1.1 {status}\r\n{common}{range_header}content-type: application/octet-stream\r\ncontent-length: {}\r\n\r\n",
        slice.len()
    )?;
    if cut {
        // Promise the whole slice, send half, hang up.
        out.write_all(&slice[..slice.len() / 2])?;
        out.flush()?;
        return out.shutdown(std::net::Shutdown::Both);
    }
    if !is_head {
        out.write_all(slice)?;
    }
    out.flush()
}

fn parse_range(r: &str, len: usize) -> Option<(usize, usize)> {
    let spec = r.strip_prefix("bytes=")?;
    let (a, b) = spec.split_once('-')?;
    let a: usize = a.parse().ok()?;
    let b: usize = if b.is_empty() {
        len.checked_sub(1)?
    } else {
        b.parse().ok()?
    };
    (a <= b && b < len).then_some((a, b))
}

fn hub_opts(server: &HubServer, models: &Path) -> Options {
    Options {
        model_dir: Some(models.to_path_buf()),
        hf_endpoint: Some(server.url.clone()),
        pip: Some(vec!["/nonexistent/pip".into()]),
        ..Options::default()
    }
}

fn spec(file: &str) -> HfSpec {
    HfSpec {
        owner: "test-org".into(),
        repo: "tiny-GGUF".into(),
        file: file.into(),
        revision: None,
    }
}

#[test]
fn hub_download_cache_and_no_redownload() {
    let content = bytes(200_000, 42);
    let sha = sha_hex(&content);
    let server = HubServer::start(HashMap::from([(
        "/test-org/tiny-GGUF/resolve/main/tiny.gguf".to_string(),
        (content.clone(), sha.clone()),
    )]));
    let dir = tempfile::tempdir().unwrap();
    let opts = hub_opts(&server, dir.path());
    let spec = ModelSpec::Hf(spec("tiny.gguf"));

    let mut events = Vec::new();
    let r = resolve(&spec, &opts, &mut |p| events.push(p)).expect("hub download");
    assert_eq!(
        fs::read(&r.path).unwrap(),
        content,
        "log: {:?}",
        server.log.lock().unwrap()
    );
    assert!(
        r.path.starts_with(dir.path().join(HF_CACHE_SUBDIR)),
        "{}",
        r.path.display()
    );
    assert_eq!(r.sha256.as_deref(), Some(sha.as_str()));
    assert_eq!(r.size, 200_000);
    assert!(!r.already_present);
    assert_eq!(server.gets(), 1);
    assert!(
        matches!(events.first(), Some(Progress::Downloading { .. })),
        "{events:?}"
    );
    assert!(
        events.iter().any(|e| matches!(
            e,
            Progress::Transferring {
                bytes_done: 200_000,
                ..
            }
        )),
        "{events:?}"
    );
    assert!(matches!(
        events.last(),
        Some(Progress::Done {
            already_present: false,
            ..
        })
    ));

    // Resolving again uses the cache without any request.
    let (heads, gets) = (server.heads(), server.gets());
    let mut events = Vec::new();
    let again = resolve(&spec, &opts, &mut |p| events.push(p)).unwrap();
    assert!(again.already_present);
    assert_eq!(again.path, r.path);
    assert_eq!((server.heads(), server.gets()), (heads, gets));
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, Progress::Verifying { .. })),
        "sidecar should spare the hash"
    );

    // Fetching explicitly asks the Hub (HEAD) but does not download the same file again.
    let ModelSpec::Hf(h) = &spec else {
        unreachable!()
    };
    let fetched = fetch_hf(h, &opts, &mut |_| {}).unwrap();
    assert!(fetched.already_present);
    assert!(server.heads() > heads);
    assert_eq!(server.gets(), gets);
    assert_eq!(fs::read(&fetched.path).unwrap(), content);

    // Offline resolution of a cached file works; of an uncached one it is a clear error.
    let offline = Options {
        allow_fetch: false,
        ..opts.clone()
    };
    assert!(resolve(&spec, &offline, &mut |_| {}).is_ok());
    let err = resolve(
        &ModelSpec::Hf(self::spec("other.gguf")),
        &offline,
        &mut |_| {},
    )
    .unwrap_err();
    assert!(matches!(err, Error::NotPresent { .. }), "{err}");
}

#[test]
fn hub_404_is_a_clear_error() {
    let server = HubServer::start(HashMap::new());
    let dir = tempfile::tempdir().unwrap();
    let opts = hub_opts(&server, dir.path());
    let err = resolve(&ModelSpec::Hf(spec("missing.gguf")), &opts, &mut |_| {}).unwrap_err();
    assert!(matches!(err, Error::Hub { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("file missing.gguf not found in Hugging Face repository test-org/tiny-GGUF"),
        "{msg}"
    );
    assert!(msg.contains(&server.url), "{msg}");
    assert_eq!(server.gets(), 0);
}

#[test]
fn hub_unreachable_is_a_clear_error() {
    // Bind and free a port: nothing listens there.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        model_dir: Some(dir.path().to_path_buf()),
        hf_endpoint: Some(format!("http://127.0.0.1:{port}")),
        ..Options::default()
    };
    let err = resolve(&ModelSpec::Hf(spec("tiny.gguf")), &opts, &mut |_| {}).unwrap_err();
    assert!(
        err.to_string()
            .contains("cannot reach the Hugging Face Hub"),
        "{err}"
    );
}

#[test]
fn hub_sha_mismatch_is_detected_and_not_kept() {
    let content = bytes(10_000, 3);
    let wrong = "cd".repeat(32);
    let server = HubServer::start(HashMap::from([(
        "/test-org/tiny-GGUF/resolve/main/bad.gguf".to_string(),
        (content, wrong.clone()),
    )]));
    let dir = tempfile::tempdir().unwrap();
    let opts = hub_opts(&server, dir.path());
    let err = resolve(&ModelSpec::Hf(spec("bad.gguf")), &opts, &mut |_| {}).unwrap_err();
    assert!(
        matches!(&err, Error::HashMismatch { expected, .. } if expected == &wrong),
        "{err}"
    );
    // The bad blob is gone, so a retry downloads again rather than trusting it.
    let offline = Options {
        allow_fetch: false,
        ..opts
    };
    assert!(resolve(&ModelSpec::Hf(spec("bad.gguf")), &offline, &mut |_| {}).is_err());
}

#[test]
fn hub_revision_is_used_in_the_url() {
    let content = bytes(5_000, 9);
    let server = HubServer::start(HashMap::from([(
        "/test-org/tiny-GGUF/resolve/v2/sub/tiny.gguf".to_string(),
        (content.clone(), sha_hex(&content)),
    )]));
    let dir = tempfile::tempdir().unwrap();
    let cat = Catalog::embedded();
    let spec = cat
        .parse_spec("hf:test-org/tiny-GGUF/sub/tiny.gguf@v2")
        .unwrap();
    let r = cat
        .resolve(&spec, &hub_opts(&server, dir.path()), &mut |_| {})
        .unwrap();
    assert_eq!(fs::read(&r.path).unwrap(), content);
    assert!(r.path.ends_with("sub/tiny.gguf"));
}

#[test]
fn catalog_entry_fetched_from_the_hub() {
    let content = bytes(30_000, 5);
    let sha = sha_hex(&content);
    let server = HubServer::start(HashMap::from([(
        "/test-org/tiny-GGUF/resolve/main/tiny-q8.gguf".to_string(),
        // A non-sha256 etag, like a file kept in git rather than LFS: the catalog's sha256 still applies.
        (content.clone(), "deadbeef".to_string()),
    )]));
    let text = format!(
        "{TINY_HEADER}[[model]]\nname = \"hubtiny\"\ndescription = \"d\"\nfile = \"hubtiny.gguf\"\nsize = 30000\n\
         sha256 = \"{sha}\"\nlicense = \"l\"\narchitecture = \"a\"\nquantization = \"Q8_0\"\n[model.fetch]\n\
         method = \"hf\"\nrepo = \"test-org/tiny-GGUF\"\nfile = \"tiny-q8.gguf\"\n"
    );
    let cat = Catalog::parse(&text).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let opts = hub_opts(&server, dir.path());
    let mut events = Vec::new();
    let r = cat
        .fetch("hubtiny", &opts, &mut |p| events.push(p))
        .unwrap();
    assert_eq!(r.path, dir.path().join("hubtiny.gguf"));
    assert_eq!(fs::read(&r.path).unwrap(), content);
    assert_eq!(r.sha256.as_deref(), Some(sha.as_str()));
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, Progress::Done { .. }))
            .count(),
        1,
        "{events:?}"
    );
    let again = cat.fetch("hubtiny", &opts, &mut |_| {}).unwrap();
    assert!(again.already_present);
    assert_eq!(server.gets(), 1);
    let leftovers: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(TMP_PREFIX))
        .collect();
    assert!(leftovers.is_empty());
}

#[test]
fn hub_download_resumes_after_a_dropped_connection() {
    // Three ranged requests' worth; the second is cut off halfway.
    let content = bytes(2 * (16 << 20) + 12_345, 7);
    let sha = sha_hex(&content);
    let server = HubServer::start(HashMap::from([(
        "/test-org/tiny-GGUF/resolve/main/big.gguf".to_string(),
        (content.clone(), sha.clone()),
    )]));
    server.cut_get(2);
    let dir = tempfile::tempdir().unwrap();
    let opts = hub_opts(&server, dir.path());
    let spec = ModelSpec::Hf(spec("big.gguf"));

    let err = resolve(&spec, &opts, &mut |_| {}).unwrap_err();
    assert!(matches!(err, Error::Hub { .. }), "{err}");
    let partial = dir
        .path()
        .join(HF_CACHE_SUBDIR)
        .join("models--test-org--tiny-GGUF/blobs")
        .join(format!("{sha}.incomplete"));
    assert_eq!(fs::metadata(&partial).unwrap().len(), 16 << 20, "the first whole chunk is kept");

    let mut events = Vec::new();
    let r = resolve(&spec, &opts, &mut |p| events.push(p)).expect("resumed download");
    assert!(fs::read(&r.path).unwrap() == content, "resumed file differs");
    assert_eq!(r.sha256.as_deref(), Some(sha.as_str()));
    assert!(!partial.exists());
    let ranges = server.ranges();
    assert_eq!(ranges.first().map(String::as_str), Some("bytes=0-16777215"), "{ranges:?}");
    // The retry starts at the first byte it lacks, never at 0 again.
    let after_cut = &ranges[2..];
    assert!(after_cut.first().is_some_and(|r| r == "bytes=16777216-33554431"), "{ranges:?}");
    assert!(after_cut.iter().all(|r| !r.starts_with("bytes=0-")), "{ranges:?}");
    // Progress continues from the bytes already there.
    let first = events.iter().find_map(|e| match e {
        Progress::Transferring { bytes_done, .. } => Some(*bytes_done),
        _ => None,
    });
    assert_eq!(first, Some(16 << 20), "{events:?}");
}
