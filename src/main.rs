use clap::{Parser, Subcommand};

/// Kubernetes aggregated API server for Cluster API on Proxmox VE.
#[derive(Parser)]
#[command(name = "capmox-apiserver", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {}
}
