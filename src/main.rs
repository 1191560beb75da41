use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// Kubernetes aggregated API server for Cluster API on Proxmox VE.
#[derive(Parser)]
#[command(name = "capmox-apiserver", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Writes the OpenAPI documents (v3, v2) and printer columns of every
    /// served version.
    Openapi {
        /// Output directory (the checked-in copy lives in `openapi/`).
        #[arg(long, value_name = "DIR")]
        write: PathBuf,
    },
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Openapi { write } => {
            for path in capmox_apiserver::api::openapi::write_all(&write)? {
                println!("wrote {}", path.display());
            }
        }
    }
    Ok(())
}
