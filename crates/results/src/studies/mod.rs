//! Result files that are not run files: the studies that hold our engine against other
//! tools and measure the harness itself, each written by its own script or example and
//! printed by `lx show` as the table docs/MEASUREMENTS.md shows. One kind per module; each
//! reads its own file's schema (old files included) and computes its table from the raw
//! per-round figures.
//!
//! A file says its kind in a top-level `kind`; files written before that, and `lx tune`'s
//! profiles (cache files, copied here as evidence), are recognised by their shape.

pub mod numbers;
pub mod reference;
pub mod aiperf;
pub mod scale;
pub mod batching_bench;
pub mod overhead;
pub mod tune_profile;
pub mod app_bench;
pub mod spec_compare;
pub mod kv_cache;
pub mod ci_times;
pub mod fidelity;
pub mod fidelity_check;
pub mod memory_fit;
pub mod depth_reference;

use std::path::{Path, PathBuf};

/// Why a result file cannot be shown as a study's table.
#[derive(Debug, thiserror::Error)]
pub enum StudyError {
    #[error("{}: `kind` is not a string", .0.display())]
    KindNotText(PathBuf),
    #[error("{} is neither a Latency Explorer run file nor a result file `lx show` knows ({why}; the kinds: {})", .path.display(), KINDS.join(", "))]
    Unknown { path: PathBuf, why: String },
    #[error("{} (a {kind} file): {source}", .path.display())]
    Malformed { path: PathBuf, kind: String, source: serde_json::Error },
    #[error("no result file to show")]
    Nothing,
    #[error("these files are of different kinds ({0} and {1}): show each kind on its own")]
    MixedKinds(&'static str, &'static str),
    #[error("a {kind} file has no table '{table}' (its tables: {})", .tables.join(", "))]
    NoSuchTable { kind: &'static str, table: String, tables: &'static [&'static str] },
}

/// One study's result file, read.
#[derive(Debug)]
pub enum Study {
    Reference(reference::ReferenceBench),
    Aiperf(aiperf::AiperfCompare),
    Scale(scale::ClientScale),
    BatchingBench(batching_bench::BatchingBench),
    Overhead(overhead::HarnessOverhead),
    TuneProfile(tune_profile::TuneProfile),
    AppBench(app_bench::AppBench),
    SpecCompare(spec_compare::SpecCompare),
    KvCache(kv_cache::KvCacheStudy),
    CiTimes(ci_times::CiTimes),
    Fidelity(fidelity::FidelityRun),
    FidelityCheck(fidelity_check::FidelityCheck),
    MemoryFit(memory_fit::MemoryFit),
    DepthReference(depth_reference::DepthReference),
}

/// Every kind `lx show` prints, as files name them.
pub const KINDS: [&str; 14] = [
    reference::KIND,
    aiperf::KIND,
    scale::KIND,
    batching_bench::KIND,
    overhead::KIND,
    tune_profile::KIND,
    app_bench::KIND,
    spec_compare::KIND,
    kv_cache::KIND,
    ci_times::KIND,
    fidelity::KIND,
    fidelity_check::KIND,
    memory_fit::KIND,
    depth_reference::KIND,
];

impl Study {
    /// The study in `file` (read from `path`, which names it in messages).
    pub fn from_json(file: serde_json::Value, path: &Path) -> Result<Study, StudyError> {
        let kind = match file.get("kind") {
            Some(k) => k.as_str().ok_or_else(|| StudyError::KindNotText(path.to_path_buf()))?.to_string(),
            None => shape_of(&file).ok_or_else(|| unknown(path, "no `kind`, and not the shape of a study written before files said their kind"))?.to_string(),
        };
        let parsed = match kind.as_str() {
            reference::KIND => serde_json::from_value(file).map(Study::Reference),
            aiperf::KIND => serde_json::from_value(file).map(Study::Aiperf),
            scale::KIND => serde_json::from_value(file).map(Study::Scale),
            batching_bench::KIND => serde_json::from_value(file).map(Study::BatchingBench),
            overhead::KIND => serde_json::from_value(file).map(Study::Overhead),
            tune_profile::KIND => serde_json::from_value(file).map(Study::TuneProfile),
            app_bench::KIND => serde_json::from_value(file).map(Study::AppBench),
            spec_compare::KIND => serde_json::from_value(file).map(Study::SpecCompare),
            kv_cache::KIND => serde_json::from_value(file).map(Study::KvCache),
            ci_times::KIND => serde_json::from_value(file).map(Study::CiTimes),
            fidelity::KIND => serde_json::from_value(file).map(Study::Fidelity),
            fidelity_check::KIND => serde_json::from_value(file).map(Study::FidelityCheck),
            memory_fit::KIND => serde_json::from_value(file).map(Study::MemoryFit),
            depth_reference::KIND => serde_json::from_value(file).map(Study::DepthReference),
            other => return Err(unknown(path, &format!("its kind is '{other}'"))),
        };
        parsed.map_err(|source| StudyError::Malformed { path: path.to_path_buf(), kind, source })
    }

    /// As files name it.
    pub fn kind(&self) -> &'static str {
        match self {
            Study::Reference(_) => reference::KIND,
            Study::Aiperf(_) => aiperf::KIND,
            Study::Scale(_) => scale::KIND,
            Study::BatchingBench(_) => batching_bench::KIND,
            Study::Overhead(_) => overhead::KIND,
            Study::TuneProfile(_) => tune_profile::KIND,
            Study::AppBench(_) => app_bench::KIND,
            Study::SpecCompare(_) => spec_compare::KIND,
            Study::KvCache(_) => kv_cache::KIND,
            Study::CiTimes(_) => ci_times::KIND,
            Study::Fidelity(_) => fidelity::KIND,
            Study::FidelityCheck(_) => fidelity_check::KIND,
            Study::MemoryFit(_) => memory_fit::KIND,
            Study::DepthReference(_) => depth_reference::KIND,
        }
    }

    /// The tables this kind prints, the default first.
    pub fn tables(&self) -> &'static [&'static str] {
        match self {
            Study::Reference(_) => reference::TABLES,
            Study::Aiperf(_) => aiperf::TABLES,
            Study::Scale(_) => scale::TABLES,
            Study::BatchingBench(_) => batching_bench::TABLES,
            Study::Overhead(_) => overhead::TABLES,
            Study::TuneProfile(_) => tune_profile::TABLES,
            Study::AppBench(_) => app_bench::TABLES,
            Study::SpecCompare(_) => spec_compare::TABLES,
            Study::KvCache(_) => kv_cache::TABLES,
            Study::CiTimes(_) => ci_times::TABLES,
            Study::Fidelity(_) => fidelity::TABLES,
            Study::FidelityCheck(_) => fidelity_check::TABLES,
            Study::MemoryFit(_) => memory_fit::TABLES,
            Study::DepthReference(_) => depth_reference::TABLES,
        }
    }

    fn header(&self, table: &str) -> [String; 2] {
        match self {
            Study::Reference(_) => reference::header(table),
            Study::Aiperf(_) => aiperf::header(table),
            Study::Scale(_) => scale::header(table),
            Study::BatchingBench(_) => batching_bench::header(table),
            Study::Overhead(_) => overhead::header(table),
            Study::TuneProfile(_) => tune_profile::header(table),
            Study::AppBench(_) => app_bench::header(table),
            Study::SpecCompare(_) => spec_compare::header(table),
            Study::KvCache(_) => kv_cache::header(table),
            Study::CiTimes(_) => ci_times::header(table),
            Study::Fidelity(_) => fidelity::header(table),
            Study::FidelityCheck(_) => fidelity_check::header(table),
            Study::MemoryFit(_) => memory_fit::header(table),
            Study::DepthReference(_) => depth_reference::header(table),
        }
    }

    fn rows(&self, table: &str) -> Vec<String> {
        match self {
            Study::Reference(s) => s.rows(table),
            Study::Aiperf(s) => s.rows(table),
            Study::Scale(s) => s.rows(table),
            Study::BatchingBench(s) => s.rows(table),
            Study::Overhead(s) => s.rows(table),
            Study::TuneProfile(s) => s.rows(table),
            Study::AppBench(s) => s.rows(table),
            Study::SpecCompare(s) => s.rows(table),
            Study::KvCache(s) => s.rows(table),
            Study::CiTimes(s) => s.rows(table),
            Study::Fidelity(s) => s.rows(table),
            Study::FidelityCheck(s) => s.rows(table),
            Study::MemoryFit(s) => s.rows(table),
            Study::DepthReference(s) => s.rows(table),
        }
    }
}

/// A file of no kind `lx show` knows.
fn unknown(path: &Path, why: &str) -> StudyError {
    StudyError::Unknown { path: path.to_path_buf(), why: why.to_string() }
}

/// The kind of a study file written before files said their kind.
fn shape_of(file: &serde_json::Value) -> Option<&'static str> {
    [
        (reference::KIND, reference::looks_like as fn(&serde_json::Value) -> bool),
        (aiperf::KIND, aiperf::looks_like),
        (scale::KIND, scale::looks_like),
        (batching_bench::KIND, batching_bench::looks_like),
        (tune_profile::KIND, tune_profile::looks_like),
    ]
    .into_iter()
    .find(|(_, looks_like)| looks_like(file))
    .map(|(kind, _)| kind)
}

/// The table `table` (the kind's first when `None`) of studies of one kind: its header, then
/// each file's rows in the order given.
pub fn table(studies: &[Study], table: Option<&str>) -> Result<Vec<String>, StudyError> {
    let first = studies.first().ok_or(StudyError::Nothing)?;
    if let Some(other) = studies.iter().find(|s| s.kind() != first.kind()) {
        return Err(StudyError::MixedKinds(first.kind(), other.kind()));
    }
    let name = match table {
        None => first.tables()[0],
        Some(t) => *first
            .tables()
            .iter()
            .find(|n| **n == t)
            .ok_or_else(|| StudyError::NoSuchTable { kind: first.kind(), table: t.to_string(), tables: first.tables() })?,
    };
    let mut lines = first.header(name).to_vec();
    for s in studies {
        lines.extend(s.rows(name));
    }
    Ok(lines)
}

/// [`table`] of every table the files hold, each after a blank line but the first.
pub fn all_tables(studies: &[Study]) -> Result<Vec<String>, StudyError> {
    let first = studies.first().ok_or(StudyError::Nothing)?;
    let mut lines = Vec::new();
    for name in first.tables() {
        if !lines.is_empty() {
            lines.push(String::new());
        }
        lines.extend(table(studies, Some(name))?);
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(v: serde_json::Value) -> Result<Study, StudyError> {
        Study::from_json(v, Path::new("f.json"))
    }

    #[test]
    fn a_file_is_read_by_its_kind_or_by_its_shape() {
        let scale = serde_json::json!({"streams": 2, "tokens": 3, "gap_ms_asked": 20, "chunks_per_s": 100.0,
            "truth_itl_ms": {"p50": 20.0, "p90": 20.0, "p99": 21.0}, "ours_itl_ms": {"p50": 20.0, "p90": 20.5, "p99": 21.5}});
        assert_eq!(read(scale.clone()).unwrap().kind(), "client-scale");
        let mut labelled = scale.clone();
        labelled["kind"] = "client-scale".into();
        assert_eq!(read(labelled).unwrap().kind(), "client-scale");
        let aiperf = serde_json::json!({"aiperf_version": "0.13.0", "medians": []});
        assert_eq!(read(aiperf.clone()).unwrap().kind(), "aiperf-compare");
        let batching = serde_json::json!({"decode": [], "serving": []});
        assert_eq!(read(batching.clone()).unwrap().kind(), "batching-bench");
        let reference = serde_json::json!({"model": "m", "figures": [], "ratios": []});
        assert_eq!(read(reference).unwrap().kind(), "reference-bench");

        // Unknown kinds and shapes, and a known kind with its fields missing, say so.
        let e = read(serde_json::json!({"kind": "weather"})).unwrap_err().to_string();
        assert!(e.contains("f.json is neither a Latency Explorer run file") && e.contains("its kind is 'weather'") && e.contains("client-scale"), "{e}");
        let e = read(serde_json::json!({"points": []})).unwrap_err().to_string();
        assert!(e.contains("no `kind`"), "{e}");
        let e = read(serde_json::json!({"kind": "client-scale"})).unwrap_err().to_string();
        assert!(e.contains("f.json (a client-scale file): missing field"), "{e}");

        // One table per kind, rows of every file in order; tables by name; kinds not mixed.
        let two = [read(scale.clone()).unwrap(), read(scale).unwrap()];
        let t = table(&two, None).unwrap();
        assert_eq!(t.len(), 4);
        assert!(t[0].starts_with("| streams |") && t[2].starts_with("| 2 | 20 ms | 100 |"), "{t:?}");
        let e = table(&[read(batching.clone()).unwrap()], Some("nope")).unwrap_err().to_string();
        assert_eq!(e, "a batching-bench file has no table 'nope' (its tables: decode, serving)");
        let both = all_tables(&[read(batching.clone()).unwrap()]).unwrap();
        assert_eq!(both.len(), 5, "two headers, a blank line between: {both:?}");
        assert!(both[3].starts_with("| c | figure |"));
        let e = table(&[read(batching).unwrap(), read(aiperf).unwrap()], None).unwrap_err().to_string();
        assert!(e.contains("different kinds (batching-bench and aiperf-compare)"), "{e}");
    }
}
