//! Hugging Face Hub files (`hf:OWNER/REPO/FILE.gguf[@REVISION]`), over plain HTTP.
//!
//! A HEAD of the file's `resolve` URL says what the revision holds: its commit
//! (`X-Repo-Commit`), the file's ETag and size. For a file in LFS or Xet storage (every GGUF on
//! the Hub) the answer is a redirect to the storage's URL whose `X-Linked-Etag` is the content's
//! sha256 and `X-Linked-Size` its size, so redirects are not followed for it. The bytes then come
//! in ranged GETs of the same URL (following the redirect), appended chunk by chunk to
//! `<blob>.incomplete`: an interrupted download keeps every whole chunk, and the next attempt
//! continues where the last one stopped. A sha256 ETag is checked after the download and
//! remembered in a `.verified` sidecar like catalog models.
//!
//! Files go into the Hub's own cache layout under `<model dir>/hf` (`models--OWNER--REPO/blobs`,
//! `snapshots/<commit>/FILE` symlinks, `refs/<revision>`), the one the Hub's own tools keep.
//! `HF_TOKEN` (or the token file the Hub's CLI writes) authorises gated and private repositories.

use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::blocking::{Client, RequestBuilder, Response};
use reqwest::header::{HeaderMap, AUTHORIZATION, CONTENT_LENGTH, ETAG, RANGE};
use reqwest::redirect::Policy;
use reqwest::StatusCode;

use crate::catalog::is_sha256_hex;
use crate::{
    cache, Error, HfSpec, Options, Progress, Resolved, Result, Source, ENV_HF_ENDPOINT,
    HF_CACHE_SUBDIR,
};

/// The public Hub, used when neither the options nor `HF_ENDPOINT` name another endpoint.
pub(crate) const DEFAULT_HF_ENDPOINT: &str = "https://huggingface.co";

pub(crate) fn endpoint(opts: &Options) -> String {
    opts.hf_endpoint
        .clone()
        .or_else(|| std::env::var(ENV_HF_ENDPOINT).ok())
        .filter(|e| !e.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_HF_ENDPOINT.to_string())
}

/// Bytes asked for per ranged request. An interrupted download keeps every whole chunk it
/// received; progress is still reported within a chunk.
const CHUNK_BYTES: u64 = 16 << 20;

/// Bytes read between two progress reports within a chunk.
const REPORT_BYTES: usize = 1 << 20;

/// Why talking to the Hub failed, before it is said in the user's terms ([`hub_error`]).
enum Failure {
    /// The Hub's `X-Error-Code` (EntryNotFound, RepoNotFound, RevisionNotFound, GatedRepo...)
    /// or, without one, the status.
    Refused {
        status: StatusCode,
        code: Option<String>,
    },
    Unreachable(reqwest::Error),
    Io(std::io::Error),
    Other(String),
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        Failure::Io(e)
    }
}

impl From<reqwest::Error> for Failure {
    fn from(e: reqwest::Error) -> Self {
        if e.is_connect() {
            Failure::Unreachable(e)
        } else {
            Failure::Other(e.to_string())
        }
    }
}

/// What the Hub says of one file at one revision.
struct FileMeta {
    etag: String,
    size: u64,
    commit: String,
}

/// The HTTP side: one client per command, the token when there is one.
struct Hub {
    endpoint: String,
    heads: Client,
    gets: Client,
    token: Option<String>,
}

impl Hub {
    fn new(endpoint: String) -> std::result::Result<Hub, Failure> {
        let build = |redirects: Policy| {
            Client::builder()
                .connect_timeout(Duration::from_secs(30))
                // Per request, the body included: a 16 MiB chunk slower than 28 kB/s counts as
                // stalled, and the next attempt resumes after the last whole chunk.
                .timeout(Duration::from_secs(600))
                .redirect(redirects)
                .user_agent(concat!("latency-explorer/", env!("CARGO_PKG_VERSION")))
                .build()
        };
        Ok(Hub {
            endpoint,
            heads: build(Policy::none())?,
            gets: build(Policy::limited(10))?,
            token: token(),
        })
    }

    fn url(&self, spec: &HfSpec) -> String {
        let rev = spec.revision.as_deref().unwrap_or("main");
        format!(
            "{}/{}/resolve/{rev}/{}",
            self.endpoint.trim_end_matches('/'),
            spec.repo_id(),
            spec.file
        )
    }

    fn authorised(&self, request: RequestBuilder) -> RequestBuilder {
        match &self.token {
            Some(t) => request.header(AUTHORIZATION, format!("Bearer {t}")),
            None => request,
        }
    }

    /// The HEAD of the file's URL. A redirect to the file's storage is answered rather than
    /// followed (its headers are the file's); one within the Hub (a renamed repository, a
    /// relative `Location`) is followed.
    fn metadata(&self, spec: &HfSpec) -> std::result::Result<FileMeta, Failure> {
        let mut url = self.url(spec);
        let mut r = refused(self.authorised(self.heads.head(&url)).send()?)?;
        for _ in 0..5 {
            let within =
                r.status().is_redirection() && header(r.headers(), "x-repo-commit").is_none();
            match header(r.headers(), "location").filter(|l| within && l.starts_with('/')) {
                Some(to) => {
                    url = format!("{}{to}", self.endpoint.trim_end_matches('/'));
                    r = refused(self.authorised(self.heads.head(&url)).send()?)?;
                }
                None => break,
            }
        }
        let h = r.headers();
        let etag = header(h, "x-linked-etag")
            .or_else(|| header(h, ETAG.as_str()))
            .map(|e| e.trim_start_matches("W/").trim_matches('"').to_string());
        let size = header(h, "x-linked-size")
            .or_else(|| header(h, CONTENT_LENGTH.as_str()))
            .and_then(|s| s.parse().ok());
        let commit = header(h, "x-repo-commit");
        match (etag, size, commit) {
            (Some(etag), Some(size), Some(commit)) if !etag.is_empty() && !etag.contains('/') => Ok(FileMeta { etag, size, commit }),
            (etag, size, commit) => Err(Failure::Other(format!(
                "the Hub's answer for {} lacks what a download needs (ETag {etag:?}, size {size:?}, commit {commit:?})",
                spec.file
            ))),
        }
    }

    /// Bring `partial` up to `size` bytes, continuing from what it already holds. Returns
    /// whether any bytes came over the network.
    fn download(
        &self,
        spec: &HfSpec,
        size: u64,
        partial: &Path,
        progress: &mut dyn FnMut(Progress),
    ) -> std::result::Result<bool, Failure> {
        if let Some(parent) = partial.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let mut file = OpenOptions::new().create(true).append(true).open(partial)?;
        let mut done = file.metadata()?.len();
        if done > size {
            // Left by a different version of the file: start again.
            file.set_len(0)?;
            done = 0;
        }
        let total = (size > 0).then_some(size);
        progress(Progress::Transferring {
            bytes_done: done,
            bytes_total: total,
        });
        let mut transferred = false;
        while done < size {
            let end = (done + CHUNK_BYTES).min(size);
            let r = self
                .authorised(self.gets.get(self.url(spec)))
                .header(RANGE, format!("bytes={done}-{}", end - 1))
                .send()?;
            let mut r = refused(r)?;
            if r.status() != StatusCode::PARTIAL_CONTENT
                && !(r.status() == StatusCode::OK && done == 0 && end == size)
            {
                return Err(Failure::Other(format!("the server answered {} to a request for bytes {done}..{end} of {} (it must honour HTTP ranges)", r.status(), spec.file)));
            }
            // The chunk is appended whole or not at all, so the file only ever holds whole chunks.
            let want = (end - done) as usize;
            let mut chunk = Vec::with_capacity(want);
            let mut buf = vec![0u8; 64 << 10];
            let mut since_report = 0;
            while chunk.len() < want {
                let n = r.read(&mut buf).map_err(|e| {
                    Failure::Other(format!(
                        "the download of {} stopped after {} bytes: {e}",
                        spec.file,
                        done + chunk.len() as u64
                    ))
                })?;
                if n == 0 {
                    break;
                }
                chunk.extend_from_slice(&buf[..n.min(want - chunk.len())]);
                transferred = true;
                since_report += n;
                if since_report >= REPORT_BYTES {
                    since_report = 0;
                    progress(Progress::Transferring {
                        bytes_done: done + chunk.len() as u64,
                        bytes_total: total,
                    });
                }
            }
            if chunk.len() != want {
                return Err(Failure::Other(format!(
                    "the server sent {} bytes for bytes {done}..{end} of {}",
                    chunk.len(),
                    spec.file
                )));
            }
            file.write_all(&chunk)?;
            done = end;
            progress(Progress::Transferring {
                bytes_done: done,
                bytes_total: total,
            });
        }
        file.sync_all()?;
        Ok(transferred)
    }
}

/// A header's value as text.
fn header(h: &HeaderMap, name: &str) -> Option<String> {
    h.get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// The response, unless the Hub refused (a redirect is an answer: its headers carry the file's).
fn refused(r: Response) -> std::result::Result<Response, Failure> {
    if r.status().is_success() || r.status().is_redirection() {
        return Ok(r);
    }
    Err(Failure::Refused {
        status: r.status(),
        code: header(r.headers(), "x-error-code"),
    })
}

/// The token for gated and private repositories: `HF_TOKEN`, else the file the Hub's CLI
/// writes (`$HF_HOME/token`, by default `~/.cache/huggingface/token`).
fn token() -> Option<String> {
    let from_file = || {
        let home = std::env::var_os("HF_HOME").map(PathBuf::from).or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/huggingface"))
        })?;
        std::fs::read_to_string(home.join("token")).ok()
    };
    std::env::var("HF_TOKEN")
        .ok()
        .or_else(from_file)
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
}

/// Where a repository's files live in the cache.
struct RepoCache {
    dir: PathBuf,
}

impl RepoCache {
    fn new(opts: &Options, spec: &HfSpec) -> RepoCache {
        RepoCache {
            dir: opts
                .model_dir()
                .join(HF_CACHE_SUBDIR)
                .join(format!("models--{}--{}", spec.owner, spec.repo)),
        }
    }

    fn blob(&self, etag: &str) -> PathBuf {
        self.dir.join("blobs").join(etag)
    }

    fn snapshot(&self, commit: &str, file: &str) -> PathBuf {
        self.dir.join("snapshots").join(commit).join(file)
    }

    /// The file as cached for the spec's revision (a commit, or a name `refs/` records), if
    /// it is there.
    fn cached(&self, spec: &HfSpec) -> Option<PathBuf> {
        let rev = spec.revision.as_deref().unwrap_or("main");
        let commit = if rev.len() == 40 && rev.bytes().all(|b| b.is_ascii_hexdigit()) {
            rev.to_string()
        } else {
            std::fs::read_to_string(self.dir.join("refs").join(rev))
                .ok()?
                .trim()
                .to_string()
        };
        let path = self.snapshot(&commit, &spec.file);
        path.exists().then_some(path)
    }

    /// Records that the spec's revision is `commit` and links the file of that commit to its
    /// blob.
    fn link(&self, spec: &HfSpec, meta: &FileMeta) -> std::io::Result<PathBuf> {
        let rev = spec.revision.as_deref().unwrap_or("main");
        if rev != meta.commit {
            let refs = self.dir.join("refs");
            std::fs::create_dir_all(&refs)?;
            std::fs::write(refs.join(rev), &meta.commit)?;
        }
        let path = self.snapshot(&meta.commit, &spec.file);
        let parent = path.parent().expect("a snapshot path has a parent");
        std::fs::create_dir_all(parent)?;
        let _ = std::fs::remove_file(&path);
        // ../../blobs/<etag> from snapshots/<commit>/, one more ../ per folder of the file's path.
        let depth = Path::new(&spec.file).components().count() - 1;
        let target = PathBuf::from("../".repeat(2 + depth))
            .join("blobs")
            .join(&meta.etag);
        link_or_copy(&target, &self.blob(&meta.etag), &path)?;
        Ok(path)
    }
}

#[cfg(unix)]
fn link_or_copy(relative: &Path, _blob: &Path, at: &Path) -> std::io::Result<()> {
    std::os::unix::fs::symlink(relative, at)
}

/// Windows needs a privilege to make symlinks: the blob is copied.
#[cfg(not(unix))]
fn link_or_copy(_relative: &Path, blob: &Path, at: &Path) -> std::io::Result<()> {
    std::fs::copy(blob, at).map(|_| ())
}

/// Resolve a Hub file to a path in the cache. Without `network_first`, a cached copy is used as is
/// (no network access); otherwise the Hub is asked whether the revision changed (a HEAD request)
/// and the file is downloaded only if it did or is missing.
pub(crate) fn resolve(
    spec: &HfSpec,
    opts: &Options,
    network_first: bool,
    progress: &mut dyn FnMut(Progress),
) -> Result<Resolved> {
    let cache = RepoCache::new(opts, spec);
    if !network_first || !opts.allow_fetch {
        match cache.cached(spec) {
            Some(path) => return finish(spec, path, true, progress),
            None if opts.allow_fetch => {}
            None => {
                return Err(Error::NotPresent {
                    name: spec.to_string(),
                    path: opts.model_dir().join(HF_CACHE_SUBDIR),
                })
            }
        }
    }
    let (path, transferred) = fetching(spec, opts, progress, |hub, meta, progress| {
        let blob = cache.blob(&meta.etag);
        let mut transferred = false;
        if !blob.exists() {
            let partial = PathBuf::from(format!("{}.incomplete", blob.display()));
            transferred = hub.download(spec, meta.size, &partial, progress)?;
            std::fs::rename(&partial, &blob)?;
        }
        Ok((cache.link(spec, &meta)?, transferred))
    })?;
    finish(spec, path, !transferred, progress)
}

/// Says that `spec` is being fetched, asks the Hub what it is, and runs `fetch` with the answer;
/// a failure anywhere is said in the user's terms.
fn fetching<T>(
    spec: &HfSpec,
    opts: &Options,
    progress: &mut dyn FnMut(Progress),
    fetch: impl FnOnce(&Hub, FileMeta, &mut dyn FnMut(Progress)) -> std::result::Result<T, Failure>,
) -> Result<T> {
    let endpoint = endpoint(opts);
    progress(Progress::Downloading {
        part: 1,
        parts: 1,
        name: spec.file.clone(),
    });
    let fetched = Hub::new(endpoint.clone()).and_then(|hub| {
        let meta = hub.metadata(spec)?;
        fetch(&hub, meta, progress)
    });
    fetched.map_err(|e| hub_error(spec, &endpoint, e))
}

/// Download a Hub file straight into `dest_dir` (no Hub cache), for catalog entries fetched from
/// the Hub: the caller verifies and installs it.
pub(crate) fn download_to_dir(
    spec: &HfSpec,
    opts: &Options,
    dest_dir: &Path,
    progress: &mut dyn FnMut(Progress),
) -> Result<PathBuf> {
    let file_name = Path::new(&spec.file)
        .file_name()
        .unwrap_or_default()
        .to_string_lossy();
    let partial = dest_dir.join(format!("{}{file_name}.partial", crate::cache::TMP_PREFIX));
    fetching(spec, opts, progress, |hub, meta, progress| hub.download(spec, meta.size, &partial, progress))?;
    Ok(partial)
}

/// Verify (when the Hub gave a sha256 ETag) and describe a downloaded file.
fn finish(
    spec: &HfSpec,
    path: PathBuf,
    already_present: bool,
    progress: &mut dyn FnMut(Progress),
) -> Result<Resolved> {
    let meta =
        std::fs::metadata(&path).map_err(|e| Error::io("cannot read downloaded file", &path, e))?;
    // The snapshot entry is a symlink to blobs/<etag>; an LFS etag is the content's sha256.
    let etag = std::fs::read_link(&path)
        .ok()
        .and_then(|t| t.file_name().map(|n| n.to_string_lossy().into_owned()))
        .filter(|e| is_sha256_hex(e));
    let sha256 = match etag {
        Some(expected) => {
            if cache::sidecar_sha(&path, &meta).as_deref() != Some(expected.as_str()) {
                let (got, _) = cache::hash_file(&path, progress)?;
                if got != expected {
                    // Drop the bad blob so that the next attempt downloads it again.
                    if let Ok(blob) = std::fs::canonicalize(&path) {
                        let _ = std::fs::remove_file(blob);
                    }
                    let _ = std::fs::remove_file(&path);
                    cache::remove_sidecar(&path);
                    return Err(Error::HashMismatch {
                        name: spec.to_string(),
                        path,
                        expected,
                        got,
                    });
                }
                cache::write_sidecar(&path, &got);
            }
            Some(expected)
        }
        None => None,
    };
    progress(Progress::Done {
        path: path.clone(),
        already_present,
    });
    Ok(Resolved {
        path,
        size: meta.len(),
        sha256,
        source: Source::Hf(spec.clone()),
        already_present,
    })
}

fn hub_error(spec: &HfSpec, endpoint: &str, e: Failure) -> Error {
    let rev = spec.revision.as_deref().unwrap_or("main");
    let repo = spec.repo_id();
    let entry = || {
        format!(
            "file {} not found in Hugging Face repository {repo} (revision {rev}) at {endpoint}",
            spec.file
        )
    };
    let detail = match e {
        Failure::Refused { status, code } => match code.as_deref() {
            Some("EntryNotFound") => entry(),
            Some("RepoNotFound") => format!("Hugging Face repository {repo} not found at {endpoint} (a private or gated repository needs HF_TOKEN)"),
            Some("RevisionNotFound") => format!("revision {rev} not found in Hugging Face repository {repo}"),
            code if code == Some("GatedRepo") || status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN => {
                format!("access to {repo} denied ({status}); for a gated model accept its terms on the Hub and set HF_TOKEN")
            }
            _ if status == StatusCode::NOT_FOUND => entry(),
            _ => format!("download from {endpoint} failed: the Hub answered {status}"),
        },
        Failure::Unreachable(e) => format!("cannot reach the Hugging Face Hub at {endpoint}: {e} (HF_ENDPOINT selects a mirror)"),
        Failure::Io(io) if matches!(io.kind(), std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded) => {
            return Error::NoSpace {
                path: PathBuf::from(spec.file.clone()),
                what: format!("downloading {spec}"),
            }
        }
        Failure::Io(io) => format!("download from {endpoint} failed: {io}"),
        Failure::Other(why) => format!("download from {endpoint} failed: {why}"),
    };
    Error::Hub {
        spec: spec.to_string(),
        detail,
    }
}
