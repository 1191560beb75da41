//! cloud-init `network-config`: netplan v2 with networkd, built as data (keys only when
//! set, ethernets and VRFs in device order) and serialized by the YAML library, which quotes
//! whatever a YAML 1.1 reader (cloud-init's PyYAML) would take for something else.

use serde::ser::{Serialize, SerializeMap, Serializer};

use super::RenderError;
use super::network::{Ethernet, NetworkData, Route, Rule, Vrf};

/// Named entries serialized as a mapping in their order (netplan's `ethernets`, `vrfs`).
struct Named<'a, T>(Vec<(&'a str, T)>);

impl<T: Serialize> Serialize for Named<'_, T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, value) in &self.0 {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

impl<T> Named<'_, T> {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[derive(serde::Serialize)]
struct Document<'a> {
    network: Network<'a>,
}

#[derive(serde::Serialize)]
struct Network<'a> {
    version: u8,
    renderer: &'static str,
    ethernets: Named<'a, EthernetDoc<'a>>,
    #[serde(skip_serializing_if = "Named::is_empty")]
    vrfs: Named<'a, VrfDoc<'a>>,
}

#[derive(serde::Serialize)]
struct MacMatch<'a> {
    macaddress: &'a str,
}

#[derive(serde::Serialize)]
struct Nameservers<'a> {
    addresses: &'a [String],
}

#[derive(serde::Serialize)]
struct EthernetDoc<'a> {
    #[serde(rename = "match")]
    matches: MacMatch<'a>,
    dhcp4: bool,
    dhcp6: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    addresses: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    routes: Vec<RouteDoc<'a>>,
    #[serde(rename = "routing-policy", skip_serializing_if = "Vec::is_empty")]
    routing_policy: Vec<RuleDoc<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    nameservers: Option<Nameservers<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mtu: Option<i32>,
}

#[derive(serde::Serialize)]
struct VrfDoc<'a> {
    table: i64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    routes: Vec<RouteDoc<'a>>,
    #[serde(rename = "routing-policy", skip_serializing_if = "Vec::is_empty")]
    routing_policy: Vec<RuleDoc<'a>>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    interfaces: &'a [String],
}

#[derive(serde::Serialize)]
struct RouteDoc<'a> {
    to: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    via: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    metric: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    table: Option<i64>,
}

#[derive(serde::Serialize)]
struct RuleDoc<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    to: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    from: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    priority: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    table: Option<i64>,
}

fn routes(routes: &[Route]) -> Vec<RouteDoc<'_>> {
    routes
        .iter()
        .map(|r| RouteDoc {
            to: &r.to,
            via: r.via.as_deref(),
            metric: r.metric,
            table: r.table,
        })
        .collect()
}

fn rules(rules: &[Rule]) -> Vec<RuleDoc<'_>> {
    rules
        .iter()
        .map(|r| RuleDoc {
            to: r.to.as_deref(),
            from: r.from.as_deref(),
            priority: r.priority,
            table: r.table,
        })
        .collect()
}

fn ethernet(e: &Ethernet) -> EthernetDoc<'_> {
    EthernetDoc {
        matches: MacMatch { macaddress: &e.mac },
        dhcp4: e.dhcp4,
        dhcp6: e.dhcp6,
        addresses: e.addresses.iter().map(|a| a.cidr()).collect(),
        routes: routes(&e.routes),
        routing_policy: rules(&e.rules),
        nameservers: (!e.dns.is_empty()).then_some(Nameservers { addresses: &e.dns }),
        mtu: e.link_mtu,
    }
}

fn vrf(v: &Vrf) -> VrfDoc<'_> {
    VrfDoc {
        table: v.table,
        routes: routes(&v.routes),
        routing_policy: rules(&v.rules),
        interfaces: &v.interfaces,
    }
}

/// Renders the netplan v2 document.
pub fn render(data: &NetworkData) -> Result<String, RenderError> {
    let document = Document {
        network: Network {
            version: 2,
            renderer: "networkd",
            ethernets: Named(
                data.ethernets
                    .iter()
                    .map(|e| (e.name.as_str(), ethernet(e)))
                    .collect(),
            ),
            vrfs: Named(
                data.vrfs
                    .iter()
                    .map(|v| (v.name.as_str(), vrf(v)))
                    .collect(),
            ),
        },
    };
    serde_saphyr::to_string(&document).map_err(|e| RenderError::Yaml(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::super::network::tests::{device, ip};
    use super::super::network::{DeviceInput, build};
    use super::*;
    use crate::api::v1alpha2::{RouteSpec, RoutingPolicySpec, VrfDevice};

    #[test]
    fn renders_netplan_v2_keys_only_when_set() {
        let net0 = device("net0");
        let mut net1 = device("net1");
        net1.link_mtu = Some(9000);
        net1.routing.routing_policy = vec![RoutingPolicySpec {
            from: Some("10.1.0.0/24".into()),
            priority: Some(999),
            ..Default::default()
        }];
        let vrf = VrfDevice {
            name: "vrf-blue".into(),
            table: 500,
            interfaces: vec!["net1".into()],
            routing: crate::api::v1alpha2::Routing {
                routes: vec![RouteSpec {
                    to: Some("default".into()),
                    via: Some("10.1.0.254".into()),
                    ..Default::default()
                }],
                routing_policy: vec![],
            },
        };
        let data = build(
            vec![
                DeviceInput {
                    device: &net0,
                    mac: "BC:24:11:00:00:01".into(),
                    addresses: vec![
                        ip("10.0.0.5", 24, Some("10.0.0.1"), Some(100)),
                        ip("fd00::5", 64, Some("fd00::1"), None),
                    ],
                    dns: vec!["10.0.0.53".into(), "fd00::53".into()],
                },
                DeviceInput {
                    device: &net1,
                    mac: "bc:24:11:00:00:02".into(),
                    addresses: vec![ip("10.1.0.5", 24, None, None)],
                    dns: vec![],
                },
            ],
            &[vrf],
        )
        .expect("valid");
        let yaml = render(&data).expect("renders");
        let expected = "\
network:
  version: 2
  renderer: networkd
  ethernets:
    eth0:
      match:
        macaddress: bc:24:11:00:00:01
      dhcp4: false
      dhcp6: false
      addresses:
      - 10.0.0.5/24
      - fd00::5/64
      routes:
      - to: 0.0.0.0/0
        via: \"10.0.0.1\"
        metric: 100
      - to: \"::/0\"
        via: fd00::1
      nameservers:
        addresses:
        - \"10.0.0.53\"
        - fd00::53
    eth1:
      match:
        macaddress: bc:24:11:00:00:02
      dhcp4: false
      dhcp6: false
      addresses:
      - 10.1.0.5/24
      routing-policy:
      - from: 10.1.0.0/24
        priority: 999
      mtu: 9000
  vrfs:
    vrf-blue:
      table: 500
      routes:
      - to: 0.0.0.0/0
        via: \"10.1.0.254\"
      interfaces:
      - eth1
";
        assert_eq!(yaml, expected);
        let parsed: serde_json::Value = serde_saphyr::from_str(&yaml).expect("yaml");
        assert_eq!(
            parsed["network"]["ethernets"]["eth0"]["routes"][0]["metric"],
            100
        );
        assert_eq!(
            parsed["network"]["vrfs"]["vrf-blue"]["interfaces"][0],
            "eth1"
        );
    }
}
