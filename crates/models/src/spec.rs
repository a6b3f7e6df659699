//! What the user typed to name a model: a catalog name, a path, or a Hub file.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::catalog::Catalog;
use crate::{Error, Result};

/// A model named on the command line or in the app.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum ModelSpec {
    /// A catalog model, by canonical name (aliases such as "default" are resolved at parse time).
    Catalog {
        /// Canonical catalog name.
        name: String,
    },
    /// A GGUF file on disk.
    Path {
        /// The path as given (with a leading `~/` expanded).
        path: PathBuf,
    },
    /// A file in a Hugging Face Hub repository: `hf:OWNER/REPO/FILE.gguf[@REVISION]`.
    Hf(HfSpec),
}

/// A file in a Hugging Face Hub model repository.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HfSpec {
    /// Repository owner (user or organisation).
    pub owner: String,
    /// Repository name.
    pub repo: String,
    /// Path of the file inside the repository (may contain `/`).
    pub file: String,
    /// Branch, tag or commit; the main branch when absent.
    pub revision: Option<String>,
}

impl HfSpec {
    /// `OWNER/REPO`.
    pub fn repo_id(&self) -> String {
        format!("{}/{}", self.owner, self.repo)
    }
}

impl fmt::Display for HfSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "hf:{}/{}/{}", self.owner, self.repo, self.file)?;
        if let Some(rev) = &self.revision {
            write!(f, "@{rev}")?;
        }
        Ok(())
    }
}

impl ModelSpec {
    /// Parse against the embedded catalog. See [`Catalog::parse_spec`].
    pub fn parse(s: &str) -> Result<ModelSpec> {
        Catalog::embedded().parse_spec(s)
    }

    /// The spec for the catalog's default model.
    pub fn default_model() -> Result<ModelSpec> {
        ModelSpec::parse(crate::catalog::DEFAULT_ALIAS)
    }
}

impl FromStr for ModelSpec {
    type Err = Error;
    fn from_str(s: &str) -> Result<ModelSpec> {
        ModelSpec::parse(s)
    }
}

impl fmt::Display for ModelSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelSpec::Catalog { name } => f.write_str(name),
            ModelSpec::Path { path } => write!(f, "{}", path.display()),
            ModelSpec::Hf(h) => h.fmt(f),
        }
    }
}

impl Catalog {
    /// Parse a model spec, in this order:
    /// 1. `hf:OWNER/REPO/FILE.gguf` or `hf:OWNER/REPO/FILE.gguf@REVISION`;
    /// 2. a catalog name or alias (`default`);
    /// 3. a filesystem path: any path that exists, or that ends in `.gguf` (whether or not it exists yet;
    ///    [`crate::resolve`] then reports it missing). Use `./NAME` for a file that shares a catalog name.
    pub fn parse_spec(&self, s: &str) -> Result<ModelSpec> {
        let invalid = |reason: &str| Error::InvalidSpec {
            spec: s.to_string(),
            reason: reason.to_string(),
        };
        let trimmed = s.trim();
        if trimmed.is_empty() {
            return Err(invalid("empty model name"));
        }
        if let Some(rest) = trimmed.strip_prefix("hf:") {
            return parse_hf(rest).map(ModelSpec::Hf).map_err(|r| invalid(&r));
        }
        if let Some(entry) = self.get(trimmed) {
            return Ok(ModelSpec::Catalog {
                name: entry.name.clone(),
            });
        }
        let path = expand_tilde(trimmed);
        if path.exists() || has_gguf_extension(&path) {
            return Ok(ModelSpec::Path { path });
        }
        Err(Error::UnknownModel {
            spec: s.to_string(),
            known: self.names(),
        })
    }
}

fn parse_hf(rest: &str) -> std::result::Result<HfSpec, String> {
    const FORM: &str = "expected hf:OWNER/REPO/FILE.gguf or hf:OWNER/REPO/FILE.gguf@REVISION";
    // The revision follows the last '@' that comes right after a ".gguf" file name; a revision may
    // itself contain '/' (refs/pr/1).
    let (path, revision) = match rest.rsplit_once('@') {
        Some((left, rev)) if has_gguf_suffix(left) => {
            if rev.is_empty() {
                return Err(format!("empty revision after '@': {FORM}"));
            }
            (left, Some(rev.to_string()))
        }
        _ => (rest, None),
    };
    let mut segs = path.splitn(3, '/');
    let (owner, repo, file) = match (segs.next(), segs.next(), segs.next()) {
        (Some(o), Some(r), Some(f)) => (o, r, f),
        _ => return Err(FORM.to_string()),
    };
    if owner.is_empty() || repo.is_empty() || file.split('/').any(|s| s.is_empty()) {
        return Err(format!("empty path segment: {FORM}"));
    }
    if [owner, repo].iter().any(|s| s == &"." || s == &"..")
        || file.split('/').any(|s| s == "." || s == "..")
    {
        return Err(format!("'.' and '..' are not allowed: {FORM}"));
    }
    if !has_gguf_suffix(file) {
        return Err(format!("the file must be a .gguf file: {FORM}"));
    }
    Ok(HfSpec {
        owner: owner.to_string(),
        repo: repo.to_string(),
        file: file.to_string(),
        revision,
    })
}

fn has_gguf_suffix(s: &str) -> bool {
    s.len() > 5 && s.is_char_boundary(s.len() - 5) && s[s.len() - 5..].eq_ignore_ascii_case(".gguf")
}

fn has_gguf_extension(p: &Path) -> bool {
    p.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gguf"))
}

fn expand_tilde(s: &str) -> PathBuf {
    if let Some(rest) = s.strip_prefix("~/") {
        if let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
            return PathBuf::from(home).join(rest);
        }
    }
    PathBuf::from(s)
}
