//! The `pve-sim` subcommand: run the simulator on its own for demos.

use std::io::Write;
use std::path::PathBuf;

use super::{FaultPlan, Profile, Seed, SimConfig, start};

/// Flags of `capmox-apiserver pve-sim`.
#[derive(Debug, clap::Args)]
pub struct PveSimArgs {
    /// The address to listen on (the serving certificate names it too), e.g. one that
    /// containers reach; loopback by default.
    #[arg(long, default_value = "127.0.0.1")]
    pub address: std::net::IpAddr,
    /// HTTPS port on the address (0 picks a free one).
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
    /// The cluster's name in `/cluster/status` (the seed's when absent).
    #[arg(long)]
    pub name: Option<String>,
    /// Independent Proxmox VE clusters to simulate, on consecutive ports from --port (and
    /// --http-port), each from the seed with its own state and CA; the second and further
    /// ones are named `<seed's cluster name>-<n>`.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=16))]
    pub clusters: u16,
    /// Initial fault plan (JSON file).
    #[arg(long)]
    pub faults: Option<PathBuf>,
    /// Secret of the `capmox@pve!capi` token (random when absent).
    #[arg(long, env = "PVE_SIM_TOKEN_SECRET")]
    pub token_secret: Option<String>,
    /// Write the CA certificate (PEM) to this file (with several clusters, the n-th
    /// from the second on to FILE-<n>).
    #[arg(long)]
    pub ca_out: Option<PathBuf>,
    /// Random seed (MACs, SMBIOS UUIDs, jitter, error rates); the n-th of --clusters uses
    /// this plus n-1.
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
    let mut seed = load_seed(&args.seed)?;
    if let Some(name) = &args.name {
        seed.cluster_name = name.clone();
    }
    let offset = |port: u16, n: u16| {
        if port == 0 {
            0
        } else {
            port.saturating_add(n - 1)
        }
    };
    let mut sims = Vec::new();
    for n in 1..=args.clusters {
        let mut seed = seed.clone();
        let mut ca_out = args.ca_out.clone();
        if n > 1 {
            seed.cluster_name = format!("{}-{n}", seed.cluster_name);
            ca_out = ca_out.map(|p| PathBuf::from(format!("{}-{n}", p.display())));
        }
        let config = SimConfig {
            profile: args.profile,
            seed,
            faults: faults.clone(),
            address: args.address,
            https_port: offset(args.port, n),
            http_port: args.http_port.map(|p| offset(p, n)),
            token_secret: args.token_secret.clone(),
            // Each its own sequence: MACs and SMBIOS UUIDs (so providerIDs) must differ.
            rng_seed: args.rng_seed.wrapping_add(u64::from(n - 1)),
            request_log: args.request_log.clone().filter(|_| n == 1),
            ..SimConfig::default()
        };
        let sim = start(config).await?;
        if let Some(path) = &ca_out {
            std::fs::write(path, sim.ca_pem())?;
        }
        let banner = banner(&sim, &args, ca_out.is_none());
        // A closed stdout (the reader went away) must not stop the simulator.
        let mut stdout = std::io::stdout();
        let _ = stdout
            .write_all(banner.as_bytes())
            .and_then(|()| stdout.flush());
        sims.push(sim);
    }
    tokio::signal::ctrl_c().await?;
    for sim in sims {
        sim.stop().await;
    }
    Ok(())
}

/// What a user needs to reach one simulated cluster.
fn banner(sim: &super::RunningSim, args: &PveSimArgs, with_ca: bool) -> String {
    let name = sim.control().with_world(|w| w.cluster_name.clone());
    let mut banner = format!(
        "Proxmox VE simulator {name} (profile {:?})\n  URL:          {}\n",
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
    if with_ca {
        banner.push_str(&format!("  CA (PEM):\n{}", sim.ca_pem()));
    }
    banner
}
