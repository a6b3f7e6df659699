//! The model cache: verification of files in place, the `.verified` sidecar, atomic installs.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::{CatalogEntry, Error, Progress, Resolved, Result, Source};

/// How often (in bytes) hashing reports [`Progress::Verifying`].
pub(crate) const PROGRESS_STEP: u64 = 8 << 20;
const BUF_SIZE: usize = 1 << 20;

/// Contents of `<file>.verified`: the file's size and mtime when its sha256 was checked.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Sidecar {
    size: u64,
    mtime_ns: u64,
    sha256: String,
}

/// `<path>.verified`.
pub(crate) fn sidecar_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".verified");
    PathBuf::from(s)
}

fn mtime_ns(meta: &fs::Metadata) -> Option<u64> {
    let d = meta.modified().ok()?.duration_since(UNIX_EPOCH).ok()?;
    u64::try_from(d.as_nanos()).ok()
}

/// Whether the sidecar says `path` (with metadata `meta`) was verified to have `sha256`.
pub(crate) fn sidecar_matches(path: &Path, meta: &fs::Metadata, sha256: &str) -> bool {
    let Ok(text) = fs::read_to_string(sidecar_path(path)) else {
        return false;
    };
    let Ok(sc) = serde_json::from_str::<Sidecar>(&text) else {
        return false;
    };
    Some(sc.mtime_ns) == mtime_ns(meta) && sc.size == meta.len() && sc.sha256 == sha256
}

/// The sha256 a matching sidecar records for `path`, if any.
#[cfg(feature = "hf")]
pub(crate) fn sidecar_sha(path: &Path, meta: &fs::Metadata) -> Option<String> {
    let sc: Sidecar = serde_json::from_str(&fs::read_to_string(sidecar_path(path)).ok()?).ok()?;
    (Some(sc.mtime_ns) == mtime_ns(meta) && sc.size == meta.len()).then_some(sc.sha256)
}

/// Record that `path` (as it is now) has `sha256`. Best effort: a failure only costs a rehash later.
pub(crate) fn write_sidecar(path: &Path, sha256: &str) {
    let Ok(meta) = fs::metadata(path) else { return };
    let Some(mtime_ns) = mtime_ns(&meta) else {
        return;
    };
    let sc = Sidecar {
        size: meta.len(),
        mtime_ns,
        sha256: sha256.to_string(),
    };
    let Ok(text) = serde_json::to_string(&sc) else {
        return;
    };
    let target = sidecar_path(path);
    let mut tmp = target.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    if fs::write(&tmp, text + "\n").is_ok() && fs::rename(&tmp, &target).is_err() {
        let _ = fs::remove_file(&tmp);
    }
}

pub(crate) fn remove_sidecar(path: &Path) {
    let _ = fs::remove_file(sidecar_path(path));
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// A writer that hashes what it writes and reports [`Progress::Verifying`].
pub(crate) struct HashingWriter<'p, W> {
    inner: W,
    hasher: Sha256,
    written: u64,
    total: u64,
    next_report: u64,
    progress: &'p mut dyn FnMut(Progress),
}

impl<'p, W: Write> HashingWriter<'p, W> {
    pub(crate) fn new(inner: W, total: u64, progress: &'p mut dyn FnMut(Progress)) -> Self {
        HashingWriter {
            inner,
            hasher: Sha256::new(),
            written: 0,
            total,
            next_report: PROGRESS_STEP,
            progress,
        }
    }

    /// Pass an event to the progress callback this writer holds.
    pub(crate) fn report(&mut self, p: Progress) {
        (self.progress)(p)
    }

    pub(crate) fn written(&self) -> u64 {
        self.written
    }

    /// Report the final count and return (inner writer, sha256 hex, bytes written).
    pub(crate) fn finish(self) -> (W, String, u64) {
        (self.progress)(Progress::Verifying {
            bytes_done: self.written,
            bytes_total: self.total,
        });
        (self.inner, hex(&self.hasher.finalize()), self.written)
    }
}

impl<W: Write> Write for HashingWriter<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.written += n as u64;
        if self.written >= self.next_report {
            self.next_report = self.written + PROGRESS_STEP;
            (self.progress)(Progress::Verifying {
                bytes_done: self.written,
                bytes_total: self.total,
            });
        }
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// sha256 of a file, reporting progress. Returns (sha256 hex, size).
pub(crate) fn hash_file(path: &Path, progress: &mut dyn FnMut(Progress)) -> Result<(String, u64)> {
    let mut f = File::open(path).map_err(|e| Error::io("cannot open", path, e))?;
    let total = f.metadata().map(|m| m.len()).unwrap_or(0);
    let mut w = HashingWriter::new(io::sink(), total, progress);
    let mut buf = vec![0u8; BUF_SIZE];
    loop {
        let n = match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Error::io("cannot read", path, e)),
        };
        // Writing to a sink cannot fail.
        let _ = w.write_all(&buf[..n]);
    }
    let (_, sha, size) = w.finish();
    Ok((sha, size))
}

fn catalog_resolved(entry: &CatalogEntry, path: PathBuf, already_present: bool) -> Resolved {
    Resolved {
        path,
        size: entry.size,
        sha256: Some(entry.sha256.clone()),
        source: Source::Catalog {
            entry: Box::new(entry.clone()),
        },
        already_present,
    }
}

/// Check a catalog model in `dir`: `Ok(None)` when absent; `Ok(Some)` when present with the right
/// size and sha256 (hashed only when the sidecar does not vouch for it, or `rehash`); a size or
/// hash mismatch is an error (and forgets the sidecar).
pub(crate) fn check_entry(
    entry: &CatalogEntry,
    dir: &Path,
    rehash: bool,
    progress: &mut dyn FnMut(Progress),
) -> Result<Option<Resolved>> {
    let path = dir.join(&entry.file);
    let meta = match fs::metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("cannot read model file", &path, e)),
    };
    if !meta.is_file() {
        return Err(Error::NotAFile(path));
    }
    if meta.len() != entry.size {
        remove_sidecar(&path);
        return Err(Error::SizeMismatch {
            name: entry.name.clone(),
            path,
            expected: entry.size,
            got: meta.len(),
        });
    }
    if !rehash && sidecar_matches(&path, &meta, &entry.sha256) {
        return Ok(Some(catalog_resolved(entry, path, true)));
    }
    let (got, _) = hash_file(&path, progress)?;
    if got != entry.sha256 {
        remove_sidecar(&path);
        return Err(Error::HashMismatch {
            name: entry.name.clone(),
            path,
            expected: entry.sha256.clone(),
            got,
        });
    }
    write_sidecar(&path, &got);
    Ok(Some(catalog_resolved(entry, path, true)))
}

/// Check a finished temporary file (already hashed: `got_sha`, `got_size`) against the entry and
/// rename it into place as `dir/entry.file`. On a mismatch the temporary file is left for the caller's
/// temporary directory to remove, and nothing is written at the final path.
pub(crate) fn install(
    entry: &CatalogEntry,
    tmp_file: &Path,
    got_sha: String,
    got_size: u64,
    dir: &Path,
) -> Result<Resolved> {
    if got_size != entry.size {
        return Err(Error::SizeMismatch {
            name: entry.name.clone(),
            path: tmp_file.to_path_buf(),
            expected: entry.size,
            got: got_size,
        });
    }
    if got_sha != entry.sha256 {
        return Err(Error::HashMismatch {
            name: entry.name.clone(),
            path: tmp_file.to_path_buf(),
            expected: entry.sha256.clone(),
            got: got_sha,
        });
    }
    let final_path = dir.join(&entry.file);
    // Forget any old verification first: between the rename and the new sidecar, a crash must not
    // leave a sidecar that vouches for another file (size+mtime would not match anyway).
    remove_sidecar(&final_path);
    fs::rename(tmp_file, &final_path)
        .map_err(|e| Error::io("cannot move the model into place", &final_path, e))?;
    write_sidecar(&final_path, &got_sha);
    Ok(catalog_resolved(entry, final_path, false))
}

/// Hash a downloaded file and install it (see [`install`]).
#[cfg(feature = "hf")]
pub(crate) fn install_from(
    entry: &CatalogEntry,
    tmp_file: &Path,
    dir: &Path,
    progress: &mut dyn FnMut(Progress),
) -> Result<Resolved> {
    let (sha, size) = hash_file(tmp_file, progress)?;
    install(entry, tmp_file, sha, size, dir)
}

/// A temporary directory inside the model cache (same filesystem, so the final rename is atomic).
/// Removes leftovers of fetches that were killed more than a day ago.
pub(crate) fn fetch_tempdir(dir: &Path, name: &str) -> Result<tempfile::TempDir> {
    fs::create_dir_all(dir).map_err(|e| Error::io("cannot create the model directory", dir, e))?;
    clean_stale_tempdirs(dir);
    tempfile::Builder::new()
        .prefix(&format!("{TMP_PREFIX}{name}-"))
        .tempdir_in(dir)
        .map_err(|e| Error::io("cannot create a temporary directory", dir, e))
}

pub(crate) const TMP_PREFIX: &str = ".fetch-";

fn clean_stale_tempdirs(dir: &Path) {
    let Ok(rd) = fs::read_dir(dir) else { return };
    let day = std::time::Duration::from_secs(24 * 3600);
    for e in rd.flatten() {
        let stale = e.file_name().to_string_lossy().starts_with(TMP_PREFIX)
            && e.metadata()
                .ok()
                .and_then(|m| m.modified().ok())
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > day);
        if stale {
            let _ = fs::remove_dir_all(e.path());
        }
    }
}
