//! Command-line interface: `serve` (production), `dev` (everything local), `pve-sim` (the
//! Proxmox VE simulator alone), `migrate import` (objects exported from upstream CAPMOX),
//! `convert` (manifests offline; also run as the clusterctl plugin
//! `clusterctl-capmox-convert`) and `openapi` (write the documents). Parsing only; the work
//! happens in `run::serve`, `run::dev`, `proxmox::sim::cli`, `run::migrate`, `run::convert`
//! and `api::openapi`.

use std::ffi::OsString;
use std::io::Write;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::api::Version;
use crate::controller::clients::FactoryOptions;
use crate::proxmox::client::RateLimit;
use crate::proxmox::sim::Profile;
use crate::registry::rest::RestConfig;
use crate::run::convert::ConvertOptions;
use crate::run::{self, dev::DevStack, dev::DevStackOptions, serve::ControllerSettings};
use crate::server::dev::{self, DevOptions};
use crate::server::logging::{self, LogFormat};
use crate::server::serve::{DelegationOptions, ServeOptions, StorageOptions};
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
    /// Run a simulated Proxmox VE API on 127.0.0.1 or --address (for demos and manual tests).
    PveSim(crate::proxmox::sim::cli::PveSimArgs),
    /// Move an install of upstream CAPMOX in place (docs/migration.md).
    #[command(subcommand)]
    Migrate(MigrateCommand),
    /// Convert the Proxmox objects of manifests to another version, offline, with the
    /// server's own conversion; every other document is kept as it was.
    Convert(ConvertArgs),
    /// Write the OpenAPI documents (v3, v2) and printer columns of every served version.
    Openapi {
        /// Output directory (the checked-in copy lives in `openapi/`).
        #[arg(long, value_name = "DIR")]
        write: PathBuf,
    },
}

/// Where objects are stored (`serve`, `migrate import`).
#[derive(Debug, Clone, Args)]
pub struct StorageArgs {
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
    /// How long to wait for the store to become reachable at start (kube-apiserver's flag; the
    /// default stays under the manifests' one-minute liveness probe).
    #[arg(long, default_value = "50s", value_parser = parse_duration)]
    pub storage_initialization_timeout: Duration,
}

impl From<StorageArgs> for StorageOptions {
    fn from(args: StorageArgs) -> Self {
        Self {
            data_dir: args.data_dir,
            etcd_servers: args.etcd_servers,
            etcd_prefix: args.etcd_prefix,
            etcd_cafile: args.etcd_cafile,
            etcd_certfile: args.etcd_certfile,
            etcd_keyfile: args.etcd_keyfile,
            initialization_timeout: args.storage_initialization_timeout,
        }
    }
}

/// Moving an install of upstream CAPMOX in place (docs/migration.md).
#[derive(Debug, Subcommand)]
pub enum MigrateCommand {
    /// Write exported objects (a `kubectl get -o json` List, or YAML documents, of the four
    /// kinds in either version) into the store as they were: uid, timestamps, generation,
    /// finalizers, owner references and status kept. Every object is checked before any is
    /// written; objects already there with the same uid are skipped. Run it while no server
    /// uses the embedded store.
    Import(MigrateImportArgs),
}

#[derive(Debug, Clone, Args)]
pub struct MigrateImportArgs {
    /// The exported objects (`-` reads standard input).
    #[arg(long, value_name = "FILE")]
    pub file: PathBuf,
    /// Check every object, write none.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub storage: StorageArgs,
}

/// The names under which the binary runs as the clusterctl plugin: clusterctl, like
/// kubectl, looks up `clusterctl capmox-convert` as `clusterctl-capmox_convert` on the PATH
/// (dashes within a word become underscores), and `clusterctl capmox convert` as
/// `clusterctl-capmox-convert` (the name upstream's build links).
pub const CLUSTERCTL_PLUGINS: [&str; 2] =
    ["clusterctl-capmox_convert", "clusterctl-capmox-convert"];

#[derive(Debug, Clone, Args)]
pub struct ConvertArgs {
    /// Manifest files or directories (YAML documents or JSON, Lists too); none, or `-`,
    /// reads standard input. Repeatable.
    #[arg(short = 'f', long = "filename", value_name = "PATH")]
    pub filenames: Vec<PathBuf>,
    /// Also read the subdirectories of directories.
    #[arg(short = 'R', long)]
    pub recursive: bool,
    /// The version to convert to: v1alpha2 or v1alpha1 (also as
    /// infrastructure.cluster.x-k8s.io/VERSION).
    #[arg(long, default_value = "v1alpha2", value_parser = parse_version)]
    pub output_version: Version,
    /// The objects as stored, in v1alpha2 (`kubectl get proxmoxmachines -A -o yaml`), so
    /// that v1alpha1 objects convert up without losing what only v1alpha2 holds.
    /// Repeatable.
    #[arg(long, value_name = "FILE")]
    pub context: Vec<PathBuf>,
    /// Rewrite the files instead of printing them; `--in-place=.bak` keeps the originals
    /// under that suffix.
    #[arg(
        short = 'i',
        long,
        value_name = "SUFFIX",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = ""
    )]
    pub in_place: Option<String>,
}

impl From<ConvertArgs> for ConvertOptions {
    fn from(args: ConvertArgs) -> Self {
        Self {
            inputs: args.filenames,
            recursive: args.recursive,
            to: args.output_version,
            context: args.context,
            in_place: args.in_place,
        }
    }
}

/// A served version, by name or as `group/version`.
fn parse_version(text: &str) -> Result<Version, String> {
    Version::from_name(text)
        .or_else(|| Version::from_api_version(text))
        .ok_or_else(|| format!("{text:?} is not a served version (v1alpha1, v1alpha2)"))
}

/// The clusterctl plugin's command line: `convert`'s flags alone.
#[derive(Debug, Parser)]
#[command(
    name = "clusterctl capmox-convert",
    bin_name = "clusterctl capmox-convert",
    version,
    about = "Convert the Proxmox objects of manifests to another version, offline, with \
             capmox-apiserver's own conversion; every other document is kept as it was."
)]
struct PluginCli {
    #[command(flatten)]
    convert: ConvertArgs,
}

impl Cli {
    /// The command line of this process. Run as one of [`CLUSTERCTL_PLUGINS`] (a link to
    /// the binary under that name), the arguments are `convert`'s.
    pub fn from_env() -> Cli {
        Self::parse_args(std::env::args_os())
    }

    /// [`Cli::from_env`] over given arguments (the first is the program's name).
    pub fn parse_args(args: impl IntoIterator<Item = OsString>) -> Cli {
        let args: Vec<OsString> = args.into_iter().collect();
        let program = args.first().map(PathBuf::from);
        let name = program.as_deref().and_then(|p| p.file_name());
        if CLUSTERCTL_PLUGINS
            .iter()
            .any(|plugin| name == Some(plugin.as_ref()))
        {
            let plugin = PluginCli::parse_from(args);
            return Cli {
                log_format: LogFormat::Text,
                command: Command::Convert(plugin.convert),
            };
        }
        Cli::parse_from(args)
    }
}

#[derive(Debug, Clone, Args)]
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
    /// CA bundle (PEM) that client certificates are verified against (CN = user, O = groups),
    /// instead of the client-ca-file of kube-system/extension-apiserver-authentication.
    #[arg(long)]
    pub client_ca_file: Option<PathBuf>,
    /// Kubeconfig of the management cluster for reading kube-system/extension-apiserver-authentication
    /// and creating TokenReviews. Without it, the in-cluster service account is used.
    #[arg(long)]
    pub authentication_kubeconfig: Option<PathBuf>,
    /// Kubeconfig of the management cluster for creating SubjectAccessReviews. Without it, the
    /// in-cluster service account is used.
    #[arg(long)]
    pub authorization_kubeconfig: Option<PathBuf>,
    /// How long TokenReview answers (valid and invalid tokens) are cached, e.g. 10s, 1m.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub authentication_token_webhook_cache_ttl: Duration,
    /// How long allowed SubjectAccessReview answers are cached.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub authorization_webhook_cache_authorized_ttl: Duration,
    /// How long denied SubjectAccessReview answers are cached.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub authorization_webhook_cache_unauthorized_ttl: Duration,
    /// An AdmissionConfiguration, as kube-apiserver's flag of the same name takes it: the
    /// kubeconfig its MutatingAdmissionWebhook and ValidatingAdmissionWebhook plugins name holds
    /// the client certificates and tokens admission webhooks are called with, by host.
    #[arg(long)]
    pub admission_control_config_file: Option<PathBuf>,
    /// MiB of encoded objects kept so that LISTs of unchanged objects skip decoding and
    /// conversion (0 turns it off).
    #[arg(long, default_value_t = 64)]
    pub encoded_cache_mib: usize,
    #[command(flatten)]
    pub storage: StorageArgs,
    /// Run the built-in controller (`--controller=false` serves the API only).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub controller: bool,
    /// Kubeconfig of the management cluster for the controller (Cluster API objects, Secrets,
    /// IPAM). Defaults to --authentication-kubeconfig, else the in-cluster service account.
    #[arg(long)]
    pub management_kubeconfig: Option<PathBuf>,
    /// CA bundle (PEM) that verifies Proxmox VE for the global credentials
    /// (PROXMOX_URL, PROXMOX_TOKEN, PROXMOX_SECRET) when PROXMOX_INSECURE=false.
    #[arg(long)]
    pub proxmox_root_cert_file: Option<PathBuf>,
    /// Concurrent reconciles of the controller.
    #[arg(long, default_value_t = 8)]
    pub controller_workers: usize,
    /// Proxmox API requests per second, per Proxmox endpoint.
    #[arg(long, default_value_t = 20.0)]
    pub proxmox_qps: f64,
    /// Proxmox API request burst, per Proxmox endpoint.
    #[arg(long, default_value_t = 40)]
    pub proxmox_burst: u32,
}

impl ServeArgs {
    /// The controller's settings.
    pub fn controller_settings(&self) -> ControllerSettings {
        let defaults = FactoryOptions::default();
        ControllerSettings {
            enabled: self.controller,
            management_kubeconfig: self.management_kubeconfig.clone(),
            proxmox_root_cert_file: self.proxmox_root_cert_file.clone(),
            workers: self.controller_workers.max(1),
            proxmox: FactoryOptions {
                rate_limit: Some(RateLimit {
                    per_second: self.proxmox_qps,
                    burst: self.proxmox_burst,
                }),
                ..defaults
            },
        }
    }
}

impl From<&ServeArgs> for ServeOptions {
    fn from(args: &ServeArgs) -> Self {
        let args = args.clone();
        Self {
            bind_address: args.bind_address,
            secure_port: args.secure_port,
            tls_cert_file: args.tls_cert_file,
            tls_private_key_file: args.tls_private_key_file,
            tls_dns_names: args.tls_dns_names,
            client_ca_file: args.client_ca_file,
            delegation: DelegationOptions {
                authentication_kubeconfig: args.authentication_kubeconfig,
                authorization_kubeconfig: args.authorization_kubeconfig,
                token_cache_ttl: args.authentication_token_webhook_cache_ttl,
                authorized_cache_ttl: args.authorization_webhook_cache_authorized_ttl,
                unauthorized_cache_ttl: args.authorization_webhook_cache_unauthorized_ttl,
                admission_control_config_file: args.admission_control_config_file,
            },
            storage: args.storage.into(),
            rest: RestConfig {
                encoded_cache_bytes: args.encoded_cache_mib.saturating_mul(1 << 20),
                ..RestConfig::default()
            },
        }
    }
}

/// A Go-style duration such as `10s`, `1m30s` or `500ms` (zero disables caching).
fn parse_duration(text: &str) -> Result<Duration, String> {
    let signed: jiff::SignedDuration = text
        .parse()
        .map_err(|e| format!("invalid duration {text:?}: {e}"))?;
    Duration::try_from(signed).map_err(|_| format!("duration {text:?} must not be negative"))
}

#[derive(Debug, Args)]
pub struct DevArgs {
    /// Directory for the CA, certificates and kubeconfig.
    #[arg(long, default_value = dev::DEFAULT_DIR)]
    pub dir: PathBuf,
    /// Port on 127.0.0.1 (0 picks a free one).
    #[arg(long, default_value_t = dev::DEFAULT_PORT)]
    pub port: u16,
    /// HTTPS port of the simulated Proxmox VE on 127.0.0.1 (0 picks a free one).
    #[arg(long, default_value_t = run::dev::DEFAULT_SIM_PORT)]
    pub sim_port: u16,
    /// How fast simulated Proxmox tasks complete: instant, fast or realistic.
    #[arg(long, default_value = "fast")]
    pub sim_profile: Profile,
    /// Simulated Proxmox VE clusters, on consecutive ports from --sim-port; the credentials
    /// of the second and further ones are in Secrets default/capmox-sim-<n>.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=16))]
    pub sim_clusters: u16,
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
        Command::Serve(args) => run_async(cli.log_format, async move {
            let server =
                run::serve::start(&ServeOptions::from(&*args), &args.controller_settings()).await?;
            server.run_until_stopped().await;
            Ok(())
        }),
        Command::Dev(args) => run_async(cli.log_format, async move {
            let options = DevStackOptions {
                server: DevOptions {
                    dir: args.dir,
                    port: args.port,
                    ..DevOptions::default()
                },
                sim_port: args.sim_port,
                sim_profile: args.sim_profile,
                sim_clusters: usize::from(args.sim_clusters),
                ..DevStackOptions::default()
            };
            let dev = DevStack::start(&options).await?;
            // A closed stdout (`dev | head`) must not stop the server, as `println!` would.
            let _ = writeln!(std::io::stdout(), "{}", dev.instructions());
            dev.run_until_stopped().await;
            Ok(())
        }),
        Command::PveSim(args) => run_async(cli.log_format, crate::proxmox::sim::cli::run(args)),
        Command::Convert(args) => run::convert::run(
            &ConvertOptions::from(args),
            &mut std::io::stdout().lock(),
            &mut std::io::stderr().lock(),
        ),
        Command::Migrate(MigrateCommand::Import(args)) => run_async(cli.log_format, async move {
            let report = run::migrate::import(
                &args.file,
                &StorageOptions::from(args.storage),
                args.dry_run,
            )
            .await?;
            println!("{report}");
            Ok(())
        }),
    }
}

/// Sets up logging and TLS, then drives a command's future on a multi-threaded runtime.
fn run_async(
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
            "--authentication-kubeconfig",
            "authn.kubeconfig",
            "--authorization-webhook-cache-authorized-ttl",
            "1m30s",
            "--authorization-webhook-cache-unauthorized-ttl",
            "500ms",
            "--admission-control-config-file",
            "admission.yaml",
            "--log-format",
            "json",
        ])
        .expect("parse");
        assert_eq!(cli.log_format, LogFormat::Json);
        let Command::Serve(args) = cli.command else {
            panic!("expected serve");
        };
        let options = ServeOptions::from(&*args);
        assert_eq!(options.secure_port, 6443);
        let controller = args.controller_settings();
        assert!(controller.enabled, "the controller runs by default");
        assert_eq!(controller.workers, 8);
        assert_eq!(
            controller.proxmox.rate_limit,
            Some(RateLimit {
                per_second: 20.0,
                burst: 40
            })
        );
        assert_eq!(
            options.storage.etcd_servers,
            ["https://a:2379", "https://b:2379"]
        );
        assert_eq!(
            options.delegation,
            DelegationOptions {
                authentication_kubeconfig: Some("authn.kubeconfig".into()),
                authorization_kubeconfig: None,
                token_cache_ttl: Duration::from_secs(10),
                authorized_cache_ttl: Duration::from_secs(90),
                unauthorized_cache_ttl: Duration::from_millis(500),
                admission_control_config_file: Some("admission.yaml".into()),
            }
        );
        for bad in ["-1s", "soon"] {
            assert!(
                Cli::try_parse_from([
                    "capmox-apiserver",
                    "serve",
                    "--authentication-token-webhook-cache-ttl",
                    bad
                ])
                .is_err(),
                "{bad}"
            );
        }
        assert!(matches!(
            options.storage(),
            Ok(crate::server::serve::StorageConfig::Etcd { .. })
        ));
    }

    #[test]
    fn dev_defaults() {
        let cli = Cli::try_parse_from(["capmox-apiserver", "dev"]).expect("parse");
        let Command::Dev(args) = cli.command else {
            panic!("expected dev");
        };
        assert_eq!((args.dir, args.port), (PathBuf::from(".capmox-dev"), 8443));
        assert_eq!((args.sim_port, args.sim_profile), (8006, Profile::Fast));
        let off = Cli::try_parse_from(["capmox-apiserver", "serve", "--controller=false"])
            .expect("parse");
        let Command::Serve(args) = off.command else {
            panic!("expected serve");
        };
        assert!(!args.controller_settings().enabled);
        assert!(Cli::try_parse_from(["capmox-apiserver", "dev", "--port", "x"]).is_err());
    }
}
