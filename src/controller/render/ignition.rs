//! Ignition (spec 2.x, as Flatcar's CAPI bootstrap produces it): the user's config merged
//! with the files, unit and networkd units the VM needs, over `serde_json` so that every
//! field we do not touch passes through unchanged.
//!
//! Added (replacing entries with the same path or name, where upstream appended
//! duplicates): `/etc/hostname`, `/etc/proxmox-env` (the `COREOS_CUSTOM_*` variables),
//! `systemd-resolved.service` enabled, and one networkd unit per VRF netdev, NIC and VRF
//! network, named by position as upstream names them.

use std::fmt::Write;

use serde_json::{Map, Value, json};

use super::RenderError;
use super::network::{Ethernet, NetworkData, Route, Rule, Vrf};
use super::networkd::{Section, Unit};

/// Facts about the VM that go into the Ignition config.
#[derive(Clone, Debug)]
pub struct IgnitionFacts<'a> {
    /// Hostname (the machine name).
    pub hostname: &'a str,
    /// SMBIOS UUID.
    pub instance_id: &'a str,
    /// The guest network.
    pub network: &'a NetworkData,
}

/// Go's `url.PathEscape`: everything but unreserved characters and `$&+,:;=@` is
/// percent-encoded.
fn path_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        let keep = b.is_ascii_alphanumeric() || b"-._~$&+,:;=@".contains(&b);
        if keep {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

fn data_url(contents: &str) -> String {
    format!("data:,{}", path_escape(contents))
}

fn file(path: &str, contents: &str) -> Value {
    json!({
        "filesystem": "root",
        "path": path,
        "overwrite": true,
        "mode": 420,
        "contents": {"source": data_url(contents)}
    })
}

fn route_section(r: &Route, table: Option<i64>) -> Result<Section, RenderError> {
    Section::new("Route")
        .set("Destination", &r.to)?
        .set_some("Gateway", r.via.as_ref())?
        .set_some("Metric", r.metric)?
        .set_some("Table", table.or(r.table))
}

fn rule_section(r: &Rule, default_table: Option<i64>) -> Result<Section, RenderError> {
    Section::new("RoutingPolicyRule")
        .set_some("To", r.to.as_ref())?
        .set_some("From", r.from.as_ref())?
        .set_some("Priority", r.priority)?
        .set_some("Table", r.table.or(default_table))
}

fn ethernet_unit(e: &Ethernet) -> Result<Unit, RenderError> {
    let mut unit = Unit::default();
    unit.push(Section::new("Match").set("MACAddress", &e.mac)?);
    if let Some(mtu) = e.link_mtu {
        unit.push(Section::new("Link").set("MTUBytes", mtu)?);
    }
    let dhcp = match (e.dhcp4, e.dhcp6) {
        (true, true) => Some("yes"),
        (true, false) => Some("ipv4"),
        (false, true) => Some("ipv6"),
        (false, false) => None,
    };
    unit.push(
        Section::new("Network")
            .set_some("VRF", e.vrf.as_ref())?
            .set_some("DHCP", dhcp)?
            .set_each("DNS", &e.dns)?,
    );
    for a in &e.addresses {
        unit.push(Section::new("Address").set("Address", a.cidr())?);
    }
    for r in &e.routes {
        unit.push(route_section(r, None)?);
    }
    for r in &e.rules {
        unit.push(rule_section(r, None)?);
    }
    Ok(unit)
}

fn vrf_units(v: &Vrf) -> Result<(Unit, Unit), RenderError> {
    let mut netdev = Unit::default();
    netdev.push(
        Section::new("NetDev")
            .set("Name", &v.name)?
            .set("Kind", "vrf")?,
    );
    netdev.push(Section::new("VRF").set("Table", v.table)?);
    let mut network = Unit::default();
    network.push(Section::new("Match").set("Name", &v.name)?);
    for r in &v.routes {
        network.push(route_section(r, Some(v.table))?);
    }
    for r in &v.rules {
        network.push(rule_section(r, Some(v.table))?);
    }
    Ok((netdev, network))
}

/// The networkd units, named like upstream: VRF netdevs `NN-vrfN.netdev` by VRF ordinal,
/// then `NN-ethN.network` and `NN-vrfN.network` by position in the combined list
/// (NICs first, then VRFs).
pub fn networkd_units(data: &NetworkData) -> Result<Vec<(String, Unit)>, RenderError> {
    let vrfs = data
        .vrfs
        .iter()
        .map(vrf_units)
        .collect::<Result<Vec<_>, _>>()?;
    let mut units = Vec::new();
    for (n, (netdev, _)) in vrfs.iter().enumerate() {
        units.push((format!("{n:02}-vrf{n}.netdev"), netdev.clone()));
    }
    for (i, e) in data.ethernets.iter().enumerate() {
        units.push((format!("{i:02}-eth{i}.network"), ethernet_unit(e)?));
    }
    let offset = data.ethernets.len();
    for (k, (_, network)) in vrfs.into_iter().enumerate() {
        let i = offset + k;
        units.push((format!("{i:02}-vrf{i}.network"), network));
    }
    Ok(units)
}

/// The `/etc/proxmox-env` contents.
fn proxmox_env(facts: &IgnitionFacts<'_>) -> String {
    let mut env = format!(
        "COREOS_CUSTOM_HOSTNAME={h}\nCOREOS_CUSTOM_INSTANCE_ID={id}\nCOREOS_CUSTOM_PROVIDER_ID=proxmox://{id}",
        h = facts.hostname,
        id = facts.instance_id
    );
    for a in facts
        .network
        .ethernets
        .iter()
        .flat_map(|e| &e.addresses)
        .filter(|a| a.default)
    {
        let family = if a.address.is_ipv4() { "IPV4" } else { "IPV6" };
        let _ = write!(env, "\nCOREOS_CUSTOM_PRIVATE_{family}={}", a.cidr());
    }
    env
}

fn object<'v>(
    parent: &'v mut Map<String, Value>,
    key: &str,
) -> Result<&'v mut Map<String, Value>, RenderError> {
    parent
        .entry(key.to_string())
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .ok_or_else(|| RenderError::Ignition(format!("`{key}` is not an object")))
}

/// Replaces entries whose `field` equals the new entry's, else appends.
fn upsert(
    parent: &mut Map<String, Value>,
    key: &str,
    field: &str,
    entries: Vec<Value>,
) -> Result<(), RenderError> {
    let list = parent
        .entry(key.to_string())
        .or_insert_with(|| json!([]))
        .as_array_mut()
        .ok_or_else(|| RenderError::Ignition(format!("`{key}` is not a list")))?;
    for entry in entries {
        list.retain(|e| e.get(field) != entry.get(field));
        list.push(entry);
    }
    Ok(())
}

/// Merges the VM's files and units into the user's Ignition config.
pub fn merge(user_data: &[u8], facts: &IgnitionFacts<'_>) -> Result<Vec<u8>, RenderError> {
    let mut config: Value = serde_json::from_slice(user_data)
        .map_err(|e| RenderError::Ignition(format!("bootstrap data is not Ignition JSON: {e}")))?;
    let root = config
        .as_object_mut()
        .ok_or_else(|| RenderError::Ignition("bootstrap data is not an Ignition object".into()))?;
    let version = root
        .get("ignition")
        .and_then(|i| i.get("version"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if !version.starts_with("2.") {
        return Err(RenderError::Ignition(format!(
            "unsupported Ignition config version {version:?}: spec 2.x is required"
        )));
    }
    upsert(
        object(root, "storage")?,
        "files",
        "path",
        vec![
            file("/etc/hostname", facts.hostname),
            file("/etc/proxmox-env", &proxmox_env(facts)),
        ],
    )?;
    upsert(
        object(root, "systemd")?,
        "units",
        "name",
        vec![json!({"name": "systemd-resolved.service", "enabled": true})],
    )?;
    let units = networkd_units(facts.network)?
        .into_iter()
        .map(|(name, unit)| json!({"name": name, "contents": unit.to_string()}))
        .collect();
    upsert(object(root, "networkd")?, "units", "name", units)?;
    serde_json::to_vec(&config).map_err(|e| RenderError::Ignition(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::super::network::tests::{device, ip};
    use super::super::network::{DeviceInput, build};
    use super::*;
    use crate::api::v1alpha2::VrfDevice;

    fn network() -> NetworkData {
        let net0 = device("net0");
        let mut net1 = device("net1");
        net1.link_mtu = Some(1400);
        let vrf = VrfDevice {
            name: "vrf-ext".into(),
            table: 500,
            interfaces: vec!["net1".into()],
            ..Default::default()
        };
        build(
            vec![
                DeviceInput {
                    device: &net0,
                    mac: "BC:24:11:00:00:01".into(),
                    addresses: vec![ip("10.0.0.5", 24, Some("10.0.0.1"), Some(100))],
                    dns: vec!["1.1.1.1".into()],
                },
                DeviceInput {
                    device: &net1,
                    mac: "BC:24:11:00:00:02".into(),
                    addresses: vec![ip("192.168.5.5", 24, None, None)],
                    dns: vec![],
                },
            ],
            &[vrf],
        )
        .expect("valid")
    }

    #[test]
    fn unit_names_follow_upstream() {
        let units: Vec<(String, String)> = networkd_units(&network())
            .expect("renders")
            .into_iter()
            .map(|(name, unit)| (name, unit.to_string()))
            .collect();
        let names: Vec<&str> = units.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "00-vrf0.netdev",
                "00-eth0.network",
                "01-eth1.network",
                "02-vrf2.network"
            ]
        );
        assert_eq!(
            units[1].1,
            "[Match]\nMACAddress=bc:24:11:00:00:01\n\n[Network]\nDNS=1.1.1.1\n\n[Address]\nAddress=10.0.0.5/24\n\n[Route]\nDestination=0.0.0.0/0\nGateway=10.0.0.1\nMetric=100\n"
        );
        assert!(
            units[2].1.contains("[Link]\nMTUBytes=1400\n") && units[2].1.contains("VRF=vrf-ext\n")
        );
        assert_eq!(
            units[0].1,
            "[NetDev]\nName=vrf-ext\nKind=vrf\n\n[VRF]\nTable=500\n"
        );
    }

    #[test]
    fn merges_into_the_users_config_without_duplicates() {
        let user = json!({
            "ignition": {"version": "2.3.0"},
            "passwd": {"users": [{"name": "core"}]},
            "storage": {"files": [
                {"filesystem": "root", "path": "/etc/hostname", "contents": {"source": "data:,old"}},
                {"filesystem": "root", "path": "/etc/kubeadm.yml", "contents": {"source": "data:,x"}}
            ]}
        });
        let net = network();
        let facts = IgnitionFacts {
            hostname: "m-1",
            instance_id: "6c3fa683-bef9-4425-b413-eaa45a9d6191",
            network: &net,
        };
        let merged: Value =
            serde_json::from_slice(&merge(user.to_string().as_bytes(), &facts).expect("merges"))
                .expect("json");
        assert_eq!(
            merged["passwd"], user["passwd"],
            "untouched fields pass through"
        );
        let files = merged["storage"]["files"].as_array().expect("files");
        let paths: Vec<&str> = files.iter().filter_map(|f| f["path"].as_str()).collect();
        assert_eq!(
            paths,
            ["/etc/kubeadm.yml", "/etc/hostname", "/etc/proxmox-env"]
        );
        assert_eq!(files[1]["contents"]["source"], "data:,m-1");
        assert_eq!(
            files[2]["contents"]["source"],
            "data:,COREOS_CUSTOM_HOSTNAME=m-1%0ACOREOS_CUSTOM_INSTANCE_ID=6c3fa683-bef9-4425-b413-eaa45a9d6191%0ACOREOS_CUSTOM_PROVIDER_ID=proxmox:%2F%2F6c3fa683-bef9-4425-b413-eaa45a9d6191%0ACOREOS_CUSTOM_PRIVATE_IPV4=10.0.0.5%2F24"
        );
        assert_eq!(
            merged["systemd"]["units"][0],
            json!({"name": "systemd-resolved.service", "enabled": true})
        );
        assert_eq!(
            merged["networkd"]["units"].as_array().map(Vec::len),
            Some(4)
        );
        // Merging twice gives the same result (idempotent).
        let again: Value =
            serde_json::from_slice(&merge(merged.to_string().as_bytes(), &facts).expect("merges"))
                .expect("json");
        assert_eq!(again, merged);
    }

    #[test]
    fn refuses_other_versions_and_garbage() {
        let net = network();
        let facts = IgnitionFacts {
            hostname: "h",
            instance_id: "i",
            network: &net,
        };
        for bad in [
            r#"{"ignition":{"version":"3.4.0"}}"#,
            "[]",
            "not json",
            r#"{"ignition":{"version":"2.3.0"},"storage":[]}"#,
        ] {
            assert!(merge(bad.as_bytes(), &facts).is_err(), "{bad}");
        }
    }
}
