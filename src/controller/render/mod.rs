//! Bootstrap data for the VM: cloud-init `meta-data`, `network-config` and `user-data`
//! (or an Ignition config), packed into a NoCloud seed. Pure functions; every error
//! means the machine's spec (or its bootstrap data) must change.

pub mod ignition;
pub mod netplan;
pub mod network;
pub mod networkd;

use crate::proxmox::nocloud::NoCloud;
use network::NetworkData;

/// Why bootstrap data cannot be rendered.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// The network configuration is invalid.
    #[error("{0}")]
    Network(#[from] network::NetworkError),
    /// The rendered YAML does not parse (a bug or hostile input).
    #[error("{0}")]
    Yaml(String),
    /// The Ignition config cannot be merged.
    #[error("{0}")]
    Ignition(String),
    /// A required fact is missing.
    #[error("{0}")]
    Missing(String),
    /// The bootstrap secret's `format` is neither `cloud-config` nor `ignition`.
    #[error("unsupported bootstrap data format {0:?} (expected cloud-config or ignition)")]
    Format(String),
}

/// The bootstrap data formats CAPI bootstrap providers produce.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `cloud-config` (the default).
    CloudConfig,
    /// `ignition`.
    Ignition,
}

impl Format {
    /// Parses the secret's `format` key (absent or empty is `cloud-config`).
    pub fn parse(s: Option<&str>) -> Result<Self, RenderError> {
        match s.map(str::trim).unwrap_or_default() {
            "" | "cloud-config" => Ok(Self::CloudConfig),
            "ignition" => Ok(Self::Ignition),
            other => Err(RenderError::Format(other.to_string())),
        }
    }
}

/// Everything the seed is rendered from.
#[derive(Clone, Debug)]
pub struct SeedInputs<'a> {
    /// Machine name (hostname).
    pub hostname: &'a str,
    /// SMBIOS UUID of the VM (instance id).
    pub instance_id: &'a str,
    /// Add `provider-id` to meta-data.
    pub provider_id_injection: bool,
    /// `Machine.spec.version`.
    pub kubernetes_version: Option<&'a str>,
    /// Proxmox node of the VM.
    pub node: &'a str,
    /// Deployment zone (`default` when none).
    pub zone: &'a str,
    /// The guest network.
    pub network: &'a NetworkData,
    /// Bootstrap data format.
    pub format: Format,
    /// Bootstrap data (`value` of the secret).
    pub user_data: &'a [u8],
}

/// cloud-init meta-data, as data. Besides upstream's keys it carries `proxmox_node` and
/// `zone`, which upstream's `proxmox-labels` flavor reads but upstream never wrote.
#[derive(serde::Serialize)]
struct MetaData<'a> {
    #[serde(rename = "instance-id")]
    instance_id: &'a str,
    #[serde(rename = "local-hostname")]
    local_hostname: &'a str,
    hostname: &'a str,
    #[serde(rename = "provider-id", skip_serializing_if = "Option::is_none")]
    provider_id: Option<String>,
    #[serde(rename = "kubernetes-version", skip_serializing_if = "Option::is_none")]
    kubernetes_version: Option<&'a str>,
    proxmox_node: &'a str,
    zone: &'a str,
}

/// The meta-data document.
pub fn meta_data(inputs: &SeedInputs<'_>) -> Result<String, RenderError> {
    if inputs.hostname.is_empty() {
        return Err(RenderError::Missing("hostname is not set".into()));
    }
    if inputs.instance_id.is_empty() {
        return Err(RenderError::Missing("instance-id is not set".into()));
    }
    let document = MetaData {
        instance_id: inputs.instance_id,
        local_hostname: inputs.hostname,
        hostname: inputs.hostname,
        provider_id: inputs
            .provider_id_injection
            .then(|| format!("proxmox://{}", inputs.instance_id)),
        kubernetes_version: inputs.kubernetes_version.filter(|v| !v.is_empty()),
        proxmox_node: inputs.node,
        zone: inputs.zone,
    };
    serde_saphyr::to_string(&document).map_err(|e| RenderError::Yaml(e.to_string()))
}

/// The NoCloud seed for the VM.
pub fn seed(inputs: &SeedInputs<'_>) -> Result<NoCloud, RenderError> {
    let meta = meta_data(inputs)?;
    Ok(match inputs.format {
        Format::CloudConfig => NoCloud::new(inputs.user_data.to_vec(), meta)
            .with_network_config(netplan::render(inputs.network)?),
        Format::Ignition => {
            let facts = ignition::IgnitionFacts {
                hostname: inputs.hostname,
                instance_id: inputs.instance_id,
                network: inputs.network,
            };
            NoCloud::new(ignition::merge(inputs.user_data, &facts)?, meta)
                .with_network_config("version: 1\nconfig: []\n")
        }
    })
}

#[cfg(test)]
mod tests {
    use super::network::tests::{device, ip};
    use super::network::{DeviceInput, build};
    use super::*;

    fn inputs<'a>(net: &'a NetworkData, format: Format, user: &'a [u8]) -> SeedInputs<'a> {
        SeedInputs {
            hostname: "m-1",
            instance_id: "6c3fa683-bef9-4425-b413-eaa45a9d6191",
            provider_id_injection: true,
            kubernetes_version: Some("v1.32.1"),
            node: "pve2",
            zone: "default",
            network: net,
            format,
            user_data: user,
        }
    }

    fn net() -> NetworkData {
        let d = device("net0");
        build(
            vec![DeviceInput {
                device: &d,
                mac: "aa:bb:cc:00:00:01".into(),
                addresses: vec![ip("10.0.0.5", 24, Some("10.0.0.1"), None)],
                dns: vec![],
            }],
            &[],
        )
        .expect("valid")
    }

    #[test]
    fn meta_data_has_upstreams_keys_and_the_flavor_keys() {
        let n = net();
        let meta = meta_data(&inputs(&n, Format::CloudConfig, b"")).expect("renders");
        assert_eq!(
            meta,
            "instance-id: 6c3fa683-bef9-4425-b413-eaa45a9d6191\nlocal-hostname: m-1\nhostname: m-1\n\
             provider-id: proxmox://6c3fa683-bef9-4425-b413-eaa45a9d6191\nkubernetes-version: v1.32.1\n\
             proxmox_node: pve2\nzone: default\n"
        );
        let parsed: serde_json::Value = serde_saphyr::from_str(&meta).expect("yaml");
        assert_eq!(parsed["proxmox_node"], "pve2");
        let mut no_host = inputs(&n, Format::CloudConfig, b"");
        no_host.hostname = "";
        assert_eq!(
            meta_data(&no_host),
            Err(RenderError::Missing("hostname is not set".into()))
        );
    }

    #[test]
    fn seeds_per_format() {
        let n = net();
        let cloud = seed(&inputs(&n, Format::CloudConfig, b"#cloud-config\n")).expect("seed");
        assert_eq!(cloud.user_data, b"#cloud-config\n");
        let network: serde_json::Value =
            serde_saphyr::from_slice(cloud.network_config.as_deref().unwrap_or_default())
                .expect("YAML");
        assert_eq!(
            network["network"]["ethernets"]["eth0"]["match"]["macaddress"],
            "aa:bb:cc:00:00:01"
        );
        let ign = seed(&inputs(
            &n,
            Format::Ignition,
            br#"{"ignition":{"version":"2.3.0"}}"#,
        ))
        .expect("seed");
        assert_eq!(
            ign.network_config.as_deref(),
            Some(&b"version: 1\nconfig: []\n"[..])
        );
        assert!(String::from_utf8_lossy(&ign.user_data).contains("networkd"));
        assert_eq!(Format::parse(Some("ignition")), Ok(Format::Ignition));
        assert_eq!(Format::parse(None), Ok(Format::CloudConfig));
        assert!(Format::parse(Some("mime")).is_err());
    }
}
