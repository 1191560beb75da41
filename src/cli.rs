//! Command-line interface: `serve` (production) and `dev` (everything local). Parsing only;
//! the work happens in `server::serve` and `server::dev`.

use std::net::IpAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::server::dev::{self, DevOptions, DevServer};
use crate::server::logging::{self, LogFormat};
use crate::server::serve::{self, ServeOptions};
use crate::server::tls;

/// Kubernetes aggregated API server for Cluster API on Proxmox VE.
#[derive(Debug, Parser)]
#[command(name = "capmox-apiserver", version, about)]
pub struct Cli {
    /// Log output format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the API server for a cluster (behind the kube-apiserver aggregator).
    Serve(Box<ServeArgs>),
    /// Run everything locally on 127.0.0.1 with a generated CA and an admin kubeconfig.
    Dev(DevArgs),
    /// Run a simulated Proxmox VE API on 127.0.0.1 (for demos and manual tests).
    PveSim(crate::proxmox::sim::cli::PveSimArgs),
    /// Write the OpenAPI documents (v3, v2) and printer columns of every served version.
    Openapi {
        /// Output directory (the checked-in copy lives in `openapi/`).
        #[arg(long, value_name = "DIR")]
        write: PathBuf,
    },
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Port to serve HTTPS on.
    #[arg(long, default_value_t = 443)]
    pub secure_port: u16,
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0")]
    pub bind_address: IpAddr,
    /// Serving certificate (PEM, may include intermediates); reloaded when it changes.
    #[arg(long)]
    pub tls_cert_file: Option<PathBuf>,
    /// Private key of the serving certificate (PEM).
    #[arg(long)]
    pub tls_private_key_file: Option<PathBuf>,
    /// Extra DNS name for the self-signed certificate used without --tls-cert-file
    /// (repeatable), e.g. capmox-apiserver.capmox-system.svc.
    #[arg(long = "tls-dns-name")]
    pub tls_dns_names: Vec<String>,
    /// CA bundle (PEM) that client certificates are verified against (CN = user, O = groups).
    #[arg(long)]
    pub client_ca_file: Option<PathBuf>,
    /// Directory of the embedded store (used when --etcd-servers is not given).
    #[arg(long, default_value = "/var/lib/capmox-apiserver")]
    pub data_dir: PathBuf,
    /// etcd endpoints, comma separated (http:// or https://).
    #[arg(long, value_delimiter = ',')]
    pub etcd_servers: Vec<String>,
    /// Key prefix for all objects in etcd.
    #[arg(long, default_value = "/registry")]
    pub etcd_prefix: String,
    /// CA bundle to verify etcd servers.
    #[arg(long)]
    pub etcd_cafile: Option<PathBuf>,
    /// Client certificate for etcd.
    #[arg(long)]
    pub etcd_certfile: Option<PathBuf>,
    /// Client key for etcd.
    #[arg(long)]
    pub etcd_keyfile: Option<PathBuf>,
}

impl From<ServeArgs> for ServeOptions {
    fn from(args: ServeArgs) -> Self {
        Self {
            bind_address: args.bind_address,
            secure_port: args.secure_port,
            tls_cert_file: args.tls_cert_file,
            tls_private_key_file: args.tls_private_key_file,
            tls_dns_names: args.tls_dns_names,
            client_ca_file: args.client_ca_file,
            data_dir: args.data_dir,
            etcd_servers: args.etcd_servers,
            etcd_prefix: args.etcd_prefix,
            etcd_cafile: args.etcd_cafile,
            etcd_certfile: args.etcd_certfile,
            etcd_keyfile: args.etcd_keyfile,
        }
    }
}

#[derive(Debug, Args)]
pub struct DevArgs {
    /// Directory for the CA, certificates and kubeconfig.
    #[arg(long, default_value = dev::DEFAULT_DIR)]
    pub dir: PathBuf,
    /// Port on 127.0.0.1 (0 picks a free one).
    #[arg(long, default_value_t = dev::DEFAULT_PORT)]
    pub port: u16,
}

/// Runs a parsed command line to completion.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Openapi { write } => {
            for path in crate::api::openapi::write_all(&write)? {
                println!("wrote {}", path.display());
            }
            Ok(())
        }
        Command::Serve(args) => run_server(cli.log_format, async move {
            let server = serve::start(&ServeOptions::from(*args), |router| router).await?;
            server.run_until_stopped().await;
            Ok(())
        }),
        Command::Dev(args) => run_server(cli.log_format, async move {
            let options = DevOptions {
                dir: args.dir,
                port: args.port,
            };
            let dev = DevServer::start(&options, |router| router).await?;
            println!("{}", dev.instructions());
            dev.server.run_until_stopped().await;
            Ok(())
        }),
        Command::PveSim(args) => run_server(cli.log_format, crate::proxmox::sim::cli::run(args)),
    }
}

/// Sets up logging and TLS, then drives a server future on a multi-threaded runtime.
fn run_server(
    log_format: LogFormat,
    server: impl std::future::Future<Output = anyhow::Result<()>>,
) -> anyhow::Result<()> {
    logging::init(log_format);
    tls::install_default_provider();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(server)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn parses_serve_flags() {
        let cli = Cli::try_parse_from([
            "capmox-apiserver",
            "serve",
            "--secure-port",
            "6443",
            "--bind-address",
            "127.0.0.1",
            "--etcd-servers",
            "https://a:2379,https://b:2379",
            "--etcd-prefix",
            "/capmox",
            "--log-format",
            "json",
        ])
        .expect("parse");
        assert_eq!(cli.log_format, LogFormat::Json);
        let Command::Serve(args) = cli.command else {
            panic!("expected serve");
        };
        let options = ServeOptions::from(*args);
        assert_eq!(options.secure_port, 6443);
        assert_eq!(options.etcd_servers, ["https://a:2379", "https://b:2379"]);
        assert!(matches!(
            options.storage(),
            Ok(serve::StorageConfig::Etcd { .. })
        ));
    }

    #[test]
    fn dev_defaults() {
        let cli = Cli::try_parse_from(["capmox-apiserver", "dev"]).expect("parse");
        let Command::Dev(args) = cli.command else {
            panic!("expected dev");
        };
        assert_eq!((args.dir, args.port), (PathBuf::from(".capmox-dev"), 8443));
        assert!(Cli::try_parse_from(["capmox-apiserver", "dev", "--port", "x"]).is_err());
    }
}
