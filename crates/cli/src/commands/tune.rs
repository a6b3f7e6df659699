//! `lx tune`: measure each backend's settings on this machine and keep the best as the
//! profile every later run starts its workers with; `--show` prints it with its evidence.

use std::time::Duration;

use clap::Args;
use lx_local::tune::text::{describe, settings_text, trial_text};
use lx_local::profile::{self, ProfileError};
use lx_local::tune::{self, Event};
use lx_client::traffic::RunControl;

#[derive(Args)]
pub struct TuneArgs {
    /// Backends to tune, comma-separated (default: every backend of this build).
    #[arg(long)]
    backend: Option<String>,
    #[command(flatten)]
    model: crate::commands::ModelArg,
    /// Time for all of it: seconds (300, 90s) or minutes (5m): half for the idle search, the
    /// rest under a competing load, each backend an equal share of each. A trial starts only
    /// when it is expected to end within its backend's share (a backend's first trial, its
    /// defaults, whenever its share has begun).
    #[arg(long, default_value = "5m", value_parser = tune::parse_budget)]
    budget: Duration,
    /// Print this machine's profile for the model, with every trial behind it, and exit.
    #[arg(long)]
    show: bool,
    /// With --show: the profile file as it is (JSON).
    #[arg(long)]
    json: bool,
    /// Seconds without any sign of life before a worker is declared hung and killed.
    #[arg(long, default_value_t = lx_engine::defaults::HANG_TIMEOUT_S)]
    hang_timeout: u64,
}

pub fn run(args: TuneArgs) -> anyhow::Result<i32> {
    let model = args.model.open()?;
    let here = profile::Located::here(&model.path);
    if args.show {
        return match here.read() {
            Ok(p) if args.json => {
                println!("{}", serde_json::to_string_pretty(&p)?);
                Ok(0)
            }
            Ok(p) => {
                print!("{}", describe(&p, &here.path.display().to_string()));
                Ok(0)
            }
            Err(e @ ProfileError::Missing) => {
                eprintln!("{e} ({}): `lx tune` measures one", here.model);
                Ok(1)
            }
            Err(e) => {
                eprintln!("{e}: `lx tune` measures again");
                Ok(1)
            }
        };
    }
    let backends = match &args.backend {
        Some(list) => list.split(',').filter(|b| !b.trim().is_empty()).map(|b| lx_local::canonical(b.trim()).map(String::from)).collect::<anyhow::Result<Vec<_>>>()?,
        None => lx_local::built(),
    };
    for b in &backends {
        if let Some(why) = lx_local::unavailable(b) {
            anyhow::bail!("{b} cannot be tuned in this build: {why}");
        }
    }
    // The trials set each setting themselves and read no variable; say so of any set here.
    for b in &backends {
        for var in profile::knobs(b, 1).iter().filter_map(|k| k.env) {
            if std::env::var_os(var).is_some() {
                eprintln!("note: {var} is set; lx tune measures without it (runs still honour it over the profile)");
            }
        }
    }
    if let Err(e @ ProfileError::Damaged { .. }) = here.read() {
        eprintln!("{e}: measuring again");
    }
    let control = RunControl { hang_timeout: Duration::from_secs(args.hang_timeout), ..Default::default() };
    crate::commands::stop_on_ctrl_c(&control);
    eprintln!(
        "tuning {} on {} within {:.0} s: {}",
        backends.join(", "),
        here.model,
        args.budget.as_secs_f64(),
        "each trial is one client and four, prompt 128 + 32 output tokens"
    );
    let request = tune::Request { model: &model, backends, budget: args.budget, control };
    let profile = tune::tune(&request, &mut |event| match event {
        Event::Trial { backend, asked, contended, elapsed, budget } => eprint!(
            "[{:>4.0}/{:.0} s] {backend:<6} {}{}: ",
            elapsed.as_secs_f64(),
            budget.as_secs_f64(),
            if asked.is_empty() { "defaults".to_string() } else { settings_text(asked) },
            if contended { " (competing load)" } else { "" }
        ),
        Event::Measured { trial, .. } => eprintln!("{}", trial_text(trial)),
        Event::Note { backend, note } => eprintln!("{backend}: {note}"),
    })?;
    let profile = here.save(profile)?;
    print!("{}", describe(&profile, &here.path.display().to_string()));
    Ok(0)
}
