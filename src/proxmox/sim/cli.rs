//! The `pve-sim` subcommand: run the simulator on its own for demos.

use std::io::Write;
use std::path::PathBuf;

use super::{FaultPlan, Profile, Seed, SimConfig, start};

/// Flags of `capmox-apiserver pve-sim`.
#[derive(Debug, clap::Args)]
pub struct PveSimArgs {
    /// HTTPS port on 127.0.0.1 (0 picks a free one).
    #[arg(long, default_value_t = 8006)]
    pub port: u16,
    /// Also serve plain HTTP on this port.
    #[arg(long)]
    pub http_port: Option<u16>,
    /// Timing profile: instant, fast or realistic.
    #[arg(long, default_value = "realistic")]
    pub profile: Profile,
    /// Seed state: `default`, `single`, or a JSON/YAML file.
    #[arg(long, default_value = "default")]
    pub seed: String,
    /// Initial fault plan (JSON file).
    #[arg(long)]
    pub faults: Option<PathBuf>,
    /// Secret of the `capmox@pve!capi` token (random when absent).
    #[arg(long, env = "PVE_SIM_TOKEN_SECRET")]
    pub token_secret: Option<String>,
    /// Write the CA certificate (PEM) to this file.
    #[arg(long)]
    pub ca_out: Option<PathBuf>,
    /// Random seed (MACs, jitter, error rates).
    #[arg(long, default_value_t = 1)]
    pub rng_seed: u64,
    /// Append one JSON line per answered API request to FILE:
    /// {"t": sim seconds, "method", "path" (below /api2/json, decoded), "params" (passwords
    /// "***", upload file parts "<N bytes>"), "status", "data", "errors" (400s)}.
    /// No credentials are logged. See docs/proxmox.md, "Request log".
    #[arg(long, value_name = "FILE")]
    pub request_log: Option<PathBuf>,
}

fn load_seed(name: &str) -> anyhow::Result<Seed> {
    if let Some(seed) = Seed::builtin(name) {
        return Ok(seed);
    }
    let text = std::fs::read_to_string(name).map_err(|e| {
        anyhow::anyhow!("seed {name:?} is neither built in nor a readable file: {e}")
    })?;
    Seed::parse(&text).map_err(|e| anyhow::anyhow!("seed {name}: {e}"))
}

/// Runs until Ctrl-C.
pub async fn run(args: PveSimArgs) -> anyhow::Result<()> {
    let faults = match &args.faults {
        Some(path) => serde_json::from_str::<FaultPlan>(&std::fs::read_to_string(path)?)
            .map_err(|e| anyhow::anyhow!("fault plan {}: {e}", path.display()))?,
        None => FaultPlan::default(),
    };
    let config = SimConfig {
        profile: args.profile,
        seed: load_seed(&args.seed)?,
        faults,
        https_port: args.port,
        http_port: args.http_port,
        token_secret: args.token_secret,
        rng_seed: args.rng_seed,
        request_log: args.request_log,
        ..SimConfig::default()
    };
    let sim = start(config).await?;
    if let Some(path) = &args.ca_out {
        std::fs::write(path, sim.ca_pem())?;
    }
    let mut banner = format!(
        "Proxmox VE simulator (profile {:?})\n  URL:          {}\n",
        args.profile,
        sim.url()
    );
    if let Some(http) = sim.http_url() {
        banner.push_str(&format!("  plain HTTP:   {http}\n"));
    }
    banner.push_str(&format!(
        "  token:        {}={}\n  header:       Authorization: {}\n  fingerprint:  {}\n  \
         admin:        {}/_sim/state  (GET/PUT /_sim/faults, POST /_sim/clock/advance)\n",
        sim.token().id,
        sim.token().secret,
        sim.token().header_value(),
        sim.fingerprint(),
        sim.url()
    ));
    if args.ca_out.is_none() {
        banner.push_str(&format!("  CA (PEM):\n{}", sim.ca_pem()));
    }
    // A closed stdout (the reader went away) must not stop the simulator.
    let mut stdout = std::io::stdout();
    let _ = stdout
        .write_all(banner.as_bytes())
        .and_then(|()| stdout.flush());
    tokio::signal::ctrl_c().await?;
    sim.stop().await;
    Ok(())
}
