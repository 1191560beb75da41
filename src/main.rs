use clap::{Parser, Subcommand};

use capmox_apiserver::proxmox::sim::cli::PveSimArgs;

/// Kubernetes aggregated API server for Cluster API on Proxmox VE.
#[derive(Parser)]
#[command(name = "capmox-apiserver", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a simulated Proxmox VE API on 127.0.0.1 (for demos and manual tests).
    PveSim(PveSimArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Runtime::new()?;
    match cli.command {
        Command::PveSim(args) => runtime.block_on(capmox_apiserver::proxmox::sim::cli::run(args)),
    }
}
