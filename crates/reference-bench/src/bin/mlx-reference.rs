//! `mlx-reference`: our MLX backend against mlx-lm, MLX's own language-model package, on
//! the same MLX build (the mlx-cpu wheel on Linux: our backend links its libmlx, mlx-lm runs
//! on the same wheel's Python module) and the same weights.
//!
//! The weights: our backend's `q4` mode rounds every matrix of the GGUF to f16 and quantizes
//! it as MLX quantizes a model (affine, 4 bits, group 64); mlx-lm gets the same GGUF
//! converted as `mlx_lm.convert -q` converts a checkpoint (mlx_lm_worker.py says how), so
//! both hold the very same 4-bit weights. What differs is what the rest is held in: ours
//! computes in f32; mlx-lm in its model's dtype, measured both as a converted model has it
//! (float16) and as ours does (float32).
//!
//! mlx-lm runs in a Python worker of its own, with its own generation loops
//! (`generate_step` for one sequence, `BatchGenerator` for several), timed there; ours runs
//! in this process through the engine's step interface. The rounds rotate between them
//! (`lx_reference_bench`). Greedy tokens are compared: with the same weights the two should
//! agree on the first tokens at least.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Parser;
use lx_backend_mlx::{MlxBackend, Options, WeightMode};
use lx_engine::backend::TokenId;
use lx_reference_bench::{Contender, Ours, Run, Setup, Stepwise};
use serde::Serialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

#[derive(Parser, Debug)]
#[command(about = "Our MLX backend against mlx-lm on the same MLX build and weights")]
struct Args {
    /// A catalog name (default, smollm2) or a GGUF path.
    #[arg(long, default_value = "default")]
    model: String,
    /// The Python that has mlx-lm and the same MLX (scripts/reference-bench makes one).
    #[arg(long)]
    python: PathBuf,
    /// Prompt tokens. MLX's CPU build is slow here: a small default keeps a round in minutes.
    #[arg(long, default_value_t = 64)]
    prompt: usize,
    /// Tokens generated per sequence (the first comes from the prefill).
    #[arg(long, default_value_t = 32)]
    gen: usize,
    /// Batch sizes (sequences decoded together).
    #[arg(long, value_delimiter = ',', default_value = "1,4")]
    batch: Vec<usize>,
    /// The dtypes mlx-lm's model is held in, one contender each.
    #[arg(long, value_delimiter = ',', default_value = "float32,float16")]
    dtypes: Vec<String>,
    /// Rounds; each measures every contender once.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Write the results here as JSON (atomically).
    #[arg(long)]
    out: Option<PathBuf>,
}

/// mlx-lm in its Python worker.
struct MlxLm {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl MlxLm {
    fn start(python: &Path, model: &Path, dtype: &str) -> Result<(MlxLm, Value)> {
        let worker = Path::new(env!("CARGO_MANIFEST_DIR")).join("mlx_lm_worker.py");
        let mut child = Command::new(python)
            .arg(&worker)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {} {}", python.display(), worker.display()))?;
        let (stdin, stdout) = (child.stdin.take().expect("piped"), BufReader::new(child.stdout.take().expect("piped")));
        let mut me = MlxLm { child, stdin, stdout };
        let about = me.ask(json!({"load": {"gguf": model, "dtype": dtype}})).context("mlx-lm could not load the model")?;
        Ok((me, about))
    }

    fn ask(&mut self, request: Value) -> Result<Value> {
        writeln!(self.stdin, "{request}")?;
        self.stdin.flush()?;
        let mut line = String::new();
        if self.stdout.read_line(&mut line)? == 0 {
            bail!("the mlx-lm worker exited");
        }
        let answer: Value = serde_json::from_str(&line).with_context(|| format!("the mlx-lm worker answered {line:?}"))?;
        if answer["ok"] != json!(true) {
            bail!("mlx-lm: {}", answer["error"].as_str().unwrap_or("no reason given"));
        }
        Ok(answer)
    }
}

impl Contender for MlxLm {
    fn run(&mut self, ids: &[TokenId], batch: usize, gen: usize) -> Result<Run> {
        let a = self.ask(json!({"run": {"ids": ids, "batch": batch, "gen": gen}}))?;
        let seconds = |k: &str| a[k].as_f64().with_context(|| format!("no {k} in {a}"));
        let tokens = serde_json::from_value(a["tokens"].clone()).context("tokens")?;
        Ok(Run { prefill_s: seconds("prefill_s")?, decode_s: seconds("decode_s")?, tokens })
    }
}

impl Drop for MlxLm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What this bench adds to the shared report.
#[derive(Debug, Serialize)]
struct About {
    ours: String,
    /// How mlx-lm got the weights, from its worker: one line per dtype measured.
    conversions: Vec<String>,
    mlx_lm_version: String,
    /// sha256 of the libmlx our backend links and of the one mlx-lm's Python module loads.
    libmlx_ours: String,
    libmlx_mlx_lm: String,
    same_mlx_build: bool,
}

fn sha256_file(path: &Path) -> Result<String> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect())
}

/// The libmlx our backend linked: where scripts/mlx-fetch unpacks the wheel, or LX_MLX_DIR.
fn our_libmlx() -> PathBuf {
    let dir = std::env::var_os("LX_MLX_DIR").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/latency-explorer").join(format!("mlx-cpu-{}", lx_backend_mlx::MLX_VERSION))
    });
    dir.join("mlx/lib/libmlx.so")
}

fn main() -> Result<()> {
    let args = Args::parse();
    if let Some(why) = lx_backend_mlx::unavailable() {
        bail!("MLX: {why}");
    }
    let setup = Setup::new(&args.model, args.prompt, args.gen, &args.batch, args.rounds)?;
    let spec = setup.load_spec(0);

    let t = Instant::now();
    let ours = MlxBackend::load_with(&spec, &Options { weights: WeightMode::Mlx4, cpu: true, overlap: true })?;
    let ours_version = lx_engine::backend::Backend::info(&ours).version.clone();
    // The same backend building each step's graph only after the last step is read back: what
    // the overlap is worth, in the same run.
    let in_turn = MlxBackend::load_with(&spec, &Options { weights: WeightMode::Mlx4, cpu: true, overlap: false })?;
    let mut contenders: Vec<(String, Box<dyn Contender>)> = vec![
        ("ours q4".to_string(), Box::new(Stepwise(Ours(ours)))),
        ("ours q4, no overlap".to_string(), Box::new(Stepwise(Ours(in_turn)))),
    ];
    eprintln!("loaded ours in {:.1} s", t.elapsed().as_secs_f64());
    let (mut about, mut conversions) = (Value::Null, Vec::new());
    let mut references = Vec::new();
    for dtype in &args.dtypes {
        let t = Instant::now();
        let (worker, a) = MlxLm::start(&args.python, &setup.model, dtype)?;
        eprintln!("loaded mlx-lm ({dtype}) in {:.1} s", t.elapsed().as_secs_f64());
        about = a;
        conversions.push(about["how"].as_str().unwrap_or_default().to_string());
        let name = format!("mlx-lm {} {dtype}", about["mlx_lm"].as_str().unwrap_or("?"));
        references.push(name.clone());
        contenders.push((name, Box::new(worker)));
    }
    let references: Vec<&str> = references.iter().map(String::as_str).collect();
    let (figures, ratios) = setup.measure(&mut contenders, &references);

    let libmlx_ours = sha256_file(&our_libmlx())?;
    let libmlx_mlx_lm = match about["libmlx"].as_str() {
        Some(p) => sha256_file(Path::new(p))?,
        None => String::new(),
    };
    let about = About {
        ours: ours_version,
        conversions,
        mlx_lm_version: about["mlx_lm"].as_str().unwrap_or_default().to_string(),
        same_mlx_build: !libmlx_ours.is_empty() && libmlx_ours == libmlx_mlx_lm,
        libmlx_ours,
        libmlx_mlx_lm,
    };
    let what = "our MLX backend (q4: MLX 4-bit affine, group 64) against mlx-lm on the same MLX build and the same 4-bit weights; each in its own generation loop; medians over rounds";
    setup.report(what, about, figures, ratios).write(args.out.as_deref())
}
