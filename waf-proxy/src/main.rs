//! `waf-proxy`: the command line. See the library docs for the subcommands.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use waf_proxy::config::Config;
use waf_proxy::{demo, replay, server, state::State};

/// A WAF reverse proxy running SecLang rules and the OWASP Core Rule Set.
#[derive(Parser)]
#[command(name = "waf-proxy", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve a config file; reload on SIGHUP and when the file changes.
    Run {
        /// The TOML config file.
        #[arg(long, short)]
        config: PathBuf,
    },
    /// Validate a config file and compile its rules; print each error with its location.
    Check {
        /// The TOML config file.
        config: PathBuf,
    },
    /// The proxy with the default profile in front of a demo upstream it starts itself.
    Demo {
        /// Listen address.
        #[arg(long, default_value = demo::DEFAULT_DEMO_LISTEN)]
        listen: String,
        /// Use OWASP CRS from this directory at paranoia level 1 instead of the default profile.
        #[arg(long)]
        crs: Option<PathBuf>,
    },
    /// Run recorded requests through a WAF, without a network.
    Replay {
        /// Replay against the first host's profile of this config.
        #[arg(long, conflicts_with = "crs")]
        config: Option<PathBuf>,
        /// Replay against CRS from this directory at PL1.
        #[arg(long)]
        crs: Option<PathBuf>,
        /// JSON Lines or raw HTTP/1.1 request files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Training/measurement dump of the ML detector over dataset records (JSON Lines), with
    /// the default profile and the embedded model (or `--model`). See `waf-core/models/`.
    #[cfg(feature = "ml")]
    #[command(hide = true)]
    MlDump {
        /// An `.onnx` model instead of the embedded one.
        #[arg(long)]
        model: Option<PathBuf>,
        /// JSON Lines files in the dataset format.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("WAF_PROXY_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let cli = Cli::parse();
    match real_main(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("waf-proxy: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn real_main(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Run { config } => {
            let cfg = match Config::load(&config) {
                Ok(c) => c,
                Err(errors) => {
                    for e in &errors.0 {
                        eprintln!("{e}");
                    }
                    return Ok(ExitCode::from(1));
                }
            };
            server::run(cfg, Some(config))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Check { config } => check(&config),
        Command::Demo { listen, crs } => {
            let upstream = demo::start_upstream().context("starting the demo upstream")?;
            let cfg =
                demo::config(&listen, upstream, crs.as_deref()).map_err(anyhow::Error::msg)?;
            eprintln!("waf-proxy demo: upstream on http://{upstream}");
            eprintln!("  try: curl -i 'http://{listen}/?q=hello'");
            eprintln!("       curl -i 'http://{listen}/?id=1%27%20OR%201=1--'");
            server::run(cfg, None)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Replay { config, crs, files } => {
            let opts = replay::ReplayOptions { config, crs, files };
            let mut out = std::io::stdout().lock();
            let summary = replay::run(&opts, &mut out).context("replay")?;
            eprintln!(
                "replay: {} requests, {} blocked",
                summary.requests, summary.blocked
            );
            Ok(ExitCode::SUCCESS)
        }
        #[cfg(feature = "ml")]
        Command::MlDump { model, files } => {
            let model = match model {
                Some(path) => waf_core::ml::Model::from_file(path)?,
                None => waf_core::ml::Model::default_model()?,
            };
            // Detection only: every request runs every phase and is scored; `blocked` is
            // what the profile would have blocked.
            let waf = waf_proxy::profile::default_builder(waf_core::EngineMode::DetectionOnly)
                .ml_model(model)
                .build()?;
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            let n = replay::ml_dump(&waf, &files, &mut out).context("ml-dump")?;
            eprintln!("ml-dump: {n} records");
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn check(path: &std::path::Path) -> anyhow::Result<ExitCode> {
    let cfg = match Config::load(path) {
        Ok(c) => c,
        Err(errors) => {
            for e in &errors.0 {
                println!("{e}");
            }
            println!("{}: {} error(s)", path.display(), errors.0.len());
            return Ok(ExitCode::from(1));
        }
    };
    match State::build(cfg) {
        Ok(state) => {
            for h in &state.hosts {
                for w in h.waf.warnings() {
                    println!("warning: {}: {w}", h.label);
                }
            }
            let rules: usize = state.hosts.iter().map(|h| h.waf.rule_count()).sum();
            println!(
                "{}: ok ({} hosts, {} upstreams, {rules} rules)",
                path.display(),
                state.hosts.len(),
                state.upstreams.len()
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(errors) => {
            for e in &errors {
                println!("{}: {e}", path.display());
            }
            println!("{}: {} error(s)", path.display(), errors.len());
            Ok(ExitCode::from(1))
        }
    }
}
