//! Hugging Face Hub files (`hf:OWNER/REPO/FILE.gguf[@REVISION]`) through the hf-hub crate.
//!
//! Files go into hf-hub's cache layout under `<model dir>/hf` (`models--OWNER--REPO/blobs`,
//! `snapshots/<commit>/FILE` symlinks, `refs/<revision>`). hf-hub 1.0 restarts an interrupted
//! download from byte 0, which for a multi-gigabyte GGUF on a flaky link may never finish. So we
//! fetch the blob's bytes ourselves, through hf-hub's ranged requests, into hf-hub's own
//! `<blob>.incomplete`, appending chunk by chunk: the next attempt continues where the last one
//! stopped. Once the blob is whole, hf-hub's ordinary download finds it and only links it into the
//! snapshot. For LFS files (every GGUF on the Hub) the ETag is the file's sha256: we check it
//! after the download, remembered in a `.verified` sidecar like catalog models.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use hf_hub::progress::{DownloadEvent, FileStatus, ProgressEvent, ProgressHandler};
use hf_hub::{HFClient, HFClientSync, HFError, HFRepositorySync, RepoTypeModel};

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

fn client(spec: &HfSpec, opts: &Options, endpoint: &str) -> Result<HFClientSync> {
    HFClient::builder()
        .endpoint(endpoint)
        .cache_dir(opts.model_dir().join(HF_CACHE_SUBDIR))
        .build_sync()
        .map_err(|e| Error::Hub {
            spec: spec.to_string(),
            detail: format!("cannot set up the Hub client for {endpoint}: {e}"),
        })
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
    let endpoint = endpoint(opts);
    let client = client(spec, opts, &endpoint)?;
    let repo = client.model(spec.owner.clone(), spec.repo.clone());

    if !network_first || !opts.allow_fetch {
        let cached = repo
            .download_file()
            .filename(spec.file.clone())
            .maybe_revision(spec.revision.clone())
            .local_files_only(true)
            .send();
        match cached {
            Ok(path) => return finish(spec, path, true, progress),
            Err(_) if opts.allow_fetch => {}
            Err(_) => {
                return Err(Error::NotPresent {
                    name: spec.to_string(),
                    path: opts.model_dir().join(HF_CACHE_SUBDIR),
                })
            }
        }
    }

    let hub_cache = opts.model_dir().join(HF_CACHE_SUBDIR);
    let (result, transferred) = with_progress(spec, progress, |tx| {
        let meta = file_metadata(&repo, spec)?;
        let blob = hub_cache
            .join(format!("models--{}--{}", spec.owner, spec.repo))
            .join("blobs")
            .join(&meta.etag);
        if !blob.exists() {
            let partial = PathBuf::from(format!("{}.incomplete", blob.display()));
            download_ranges(&repo, spec, meta.file_size, &partial, &tx)?;
            std::fs::rename(&partial, &blob)?;
        }
        // The blob is whole: hf-hub links it into the snapshot without downloading it again.
        repo.download_file()
            .filename(spec.file.clone())
            .maybe_revision(spec.revision.clone())
            .send()
    });
    let path = result.map_err(|e| hub_error(spec, &endpoint, e))?;
    finish(spec, path, !transferred, progress)
}

/// Download a Hub file straight into `dest_dir` (no Hub cache), for catalog entries fetched from
/// the Hub: the caller verifies and installs it.
pub(crate) fn download_to_dir(
    spec: &HfSpec,
    opts: &Options,
    dest_dir: &Path,
    progress: &mut dyn FnMut(Progress),
) -> Result<PathBuf> {
    let endpoint = endpoint(opts);
    let client = client(spec, opts, &endpoint)?;
    let repo = client.model(spec.owner.clone(), spec.repo.clone());
    let file_name = Path::new(&spec.file).file_name().unwrap_or_default().to_string_lossy();
    let partial = dest_dir.join(format!("{}{file_name}.partial", crate::cache::TMP_PREFIX));
    let (result, _) = with_progress(spec, progress, |tx| {
        let meta = file_metadata(&repo, spec)?;
        download_ranges(&repo, spec, meta.file_size, &partial, &tx)
    });
    result.map_err(|e| hub_error(spec, &endpoint, e))?;
    Ok(partial)
}

/// The Hub's answer to a HEAD of the file: ETag, commit, size.
fn file_metadata(repo: &HFRepositorySync<RepoTypeModel>, spec: &HfSpec) -> Result<hf_hub::repository::FileMetadataInfo, HFError> {
    repo.get_file_metadata().filepath(spec.file.clone()).maybe_revision(spec.revision.as_deref()).send()
}

/// Bytes asked for per ranged request. An interrupted download keeps every whole chunk it
/// received; progress is still reported within a chunk.
const CHUNK_BYTES: u64 = 16 << 20;

/// Bring `partial` up to the file's `size` bytes, continuing from what it already holds.
fn download_ranges(
    repo: &HFRepositorySync<RepoTypeModel>,
    spec: &HfSpec,
    size: u64,
    partial: &Path,
    tx: &mpsc::Sender<Progress>,
) -> Result<(), HFError> {
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
    let _ = tx.send(Progress::Transferring { bytes_done: done, bytes_total: total });
    while done < size {
        let end = (done + CHUNK_BYTES).min(size);
        let bytes = repo
            .download_file_to_bytes()
            .filename(spec.file.clone())
            .maybe_revision(spec.revision.clone())
            .range(done..end)
            .progress(Forward { tx: tx.clone(), offset: done, total })
            .send()?;
        if bytes.len() as u64 != end - done {
            return Err(HFError::Io(std::io::Error::other(format!(
                "the server sent {} bytes for bytes {done}..{end} of {} (it must honour HTTP ranges)",
                bytes.len(),
                spec.file
            ))));
        }
        file.write_all(&bytes)?;
        done = end;
    }
    file.sync_all()?;
    Ok(())
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

/// Forwards hf-hub's events for one ranged request (on its runtime thread) to our channel, as
/// bytes of the whole file: `offset` bytes were there before this request.
struct Forward {
    tx: mpsc::Sender<Progress>,
    offset: u64,
    total: Option<u64>,
}

impl ProgressHandler for Forward {
    fn on_progress(&self, event: &ProgressEvent) {
        let received = match event {
            ProgressEvent::Download(DownloadEvent::Progress { files }) => match files.last() {
                Some(f) if f.status == FileStatus::InProgress => f.bytes_completed,
                _ => return,
            },
            ProgressEvent::Download(DownloadEvent::AggregateProgress { bytes_completed, .. }) => {
                *bytes_completed
            }
            _ => return,
        };
        let _ = self.tx.send(Progress::Transferring {
            bytes_done: self.offset + received,
            bytes_total: self.total,
        });
    }
}

/// Run a blocking hf-hub call on a scoped thread while this thread forwards its progress to
/// `progress` (which need not be `Send`). Byte counts are coalesced to the latest. Returns the
/// call's result and whether any bytes were transferred.
fn with_progress<T: Send>(
    spec: &HfSpec,
    progress: &mut dyn FnMut(Progress),
    call: impl FnOnce(mpsc::Sender<Progress>) -> Result<T, HFError> + Send,
) -> (Result<T, HFError>, bool) {
    let (tx, rx) = mpsc::channel::<Progress>();
    let mut transferred = false;
    progress(Progress::Downloading {
        part: 1,
        parts: 1,
        name: spec.file.clone(),
    });
    let mut forward = |batch: Vec<Progress>, transferred: &mut bool| {
        let mut last_bytes = None;
        for p in batch {
            if let Progress::Transferring { bytes_done, .. } = p {
                *transferred |= bytes_done > 0;
                last_bytes = Some(p);
            } else {
                progress(p);
            }
        }
        if let Some(p) = last_bytes {
            progress(p);
        }
    };
    let result = std::thread::scope(|s| {
        let handle = s.spawn(move || call(tx));
        loop {
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(first) => {
                    let mut batch = vec![first];
                    batch.extend(rx.try_iter());
                    forward(batch, &mut transferred);
                }
                Err(mpsc::RecvTimeoutError::Timeout) if handle.is_finished() => break,
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        let result = handle
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        forward(rx.try_iter().collect(), &mut transferred);
        result
    });
    (result, transferred)
}

fn hub_error(spec: &HfSpec, endpoint: &str, e: HFError) -> Error {
    let rev = spec.revision.as_deref().unwrap_or("main");
    let repo = spec.repo_id();
    let detail = match &e {
        HFError::EntryNotFound { .. } => {
            format!("file {} not found in Hugging Face repository {repo} (revision {rev}) at {endpoint}", spec.file)
        }
        HFError::RepoNotFound { .. } => format!(
            "Hugging Face repository {repo} not found at {endpoint} (a private or gated repository needs HF_TOKEN)"
        ),
        HFError::RevisionNotFound { .. } => format!("revision {rev} not found in Hugging Face repository {repo}"),
        HFError::AuthRequired { .. } | HFError::Forbidden { .. } => format!(
            "access to {repo} denied ({e}); for a gated model accept its terms on the Hub and set HF_TOKEN"
        ),
        HFError::Request { .. } => format!("cannot reach the Hugging Face Hub at {endpoint}: {e} (HF_ENDPOINT selects a mirror)"),
        HFError::Io(io) if matches!(io.kind(), std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded) => {
            return Error::NoSpace {
                path: PathBuf::from(spec.file.clone()),
                what: format!("downloading {spec}"),
            }
        }
        _ => format!("download from {endpoint} failed: {e}"),
    };
    Error::Hub {
        spec: spec.to_string(),
        detail,
    }
}
