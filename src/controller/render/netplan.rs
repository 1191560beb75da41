//! cloud-init `network-config`: netplan v2 with networkd, in upstream's layout (routes
//! and rules as flow maps, keys only when set), then re-parsed to prove it is YAML.

use std::fmt::Write;

use super::RenderError;
use super::network::{NetworkData, Route, Rule};

/// A YAML single-quoted scalar.
pub(super) fn sq(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// A JSON string, which is also a valid YAML double-quoted scalar.
fn dq(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

fn route_line(r: &Route) -> String {
    let mut fields = vec![format!("\"to\": {}", dq(&r.to))];
    if let Some(via) = &r.via {
        fields.push(format!("\"via\": {}", dq(via)));
    }
    if let Some(m) = r.metric {
        fields.push(format!("\"metric\": {m}"));
    }
    if let Some(t) = r.table {
        fields.push(format!("\"table\": {t}"));
    }
    format!("{{ {} }}", fields.join(", "))
}

fn rule_line(r: &Rule) -> String {
    let mut fields = Vec::new();
    if let Some(to) = &r.to {
        fields.push(format!("\"to\": {}", dq(to)));
    }
    if let Some(from) = &r.from {
        fields.push(format!("\"from\": {}", dq(from)));
    }
    if let Some(p) = r.priority {
        fields.push(format!("\"priority\": {p}"));
    }
    if let Some(t) = r.table {
        fields.push(format!("\"table\": {t}"));
    }
    format!("{{ {} }}", fields.join(", "))
}

fn list(out: &mut String, indent: &str, key: &str, items: &[String]) {
    if items.is_empty() {
        return;
    }
    let _ = writeln!(out, "{indent}{key}:");
    for item in items {
        let _ = writeln!(out, "{indent}  - {item}");
    }
}

/// Renders the netplan v2 document.
pub fn render(data: &NetworkData) -> Result<String, RenderError> {
    let mut out = String::from("network:\n  version: 2\n  renderer: networkd\n  ethernets:\n");
    for e in &data.ethernets {
        let i = "      ";
        let _ = writeln!(out, "    {}:", e.name);
        let _ = writeln!(out, "{i}match:\n{i}  macaddress: {}", sq(&e.mac));
        let _ = writeln!(out, "{i}dhcp4: {}\n{i}dhcp6: {}", e.dhcp4, e.dhcp6);
        let addresses: Vec<String> = e.addresses.iter().map(|a| sq(&a.cidr())).collect();
        list(&mut out, i, "addresses", &addresses);
        list(
            &mut out,
            i,
            "routes",
            &e.routes.iter().map(route_line).collect::<Vec<_>>(),
        );
        list(
            &mut out,
            i,
            "routing-policy",
            &e.rules.iter().map(rule_line).collect::<Vec<_>>(),
        );
        if !e.dns.is_empty() {
            let _ = writeln!(out, "{i}nameservers:");
            list(
                &mut out,
                &format!("{i}  "),
                "addresses",
                &e.dns.iter().map(|d| sq(d)).collect::<Vec<_>>(),
            );
        }
        if let Some(mtu) = e.link_mtu {
            let _ = writeln!(out, "{i}mtu: {mtu}");
        }
    }
    if !data.vrfs.is_empty() {
        out.push_str("  vrfs:\n");
        for v in &data.vrfs {
            let i = "      ";
            let _ = writeln!(out, "    {}:\n{i}table: {}", v.name, v.table);
            list(
                &mut out,
                i,
                "routes",
                &v.routes.iter().map(route_line).collect::<Vec<_>>(),
            );
            list(
                &mut out,
                i,
                "routing-policy",
                &v.rules.iter().map(rule_line).collect::<Vec<_>>(),
            );
            list(
                &mut out,
                i,
                "interfaces",
                &v.interfaces.iter().map(|n| sq(n)).collect::<Vec<_>>(),
            );
        }
    }
    serde_saphyr::from_str::<serde_json::Value>(&out)
        .map_err(|e| RenderError::Yaml(format!("Template produced invalid YAML: {e}")))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::network::tests::{device, ip};
    use super::super::network::{DeviceInput, build};
    use super::*;
    use crate::api::v1alpha2::{RouteSpec, RoutingPolicySpec, VrfDevice};

    #[test]
    fn renders_upstreams_layout() {
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
        macaddress: 'bc:24:11:00:00:01'
      dhcp4: false
      dhcp6: false
      addresses:
        - '10.0.0.5/24'
        - 'fd00::5/64'
      routes:
        - { \"to\": \"0.0.0.0/0\", \"via\": \"10.0.0.1\", \"metric\": 100 }
        - { \"to\": \"::/0\", \"via\": \"fd00::1\" }
      nameservers:
        addresses:
          - '10.0.0.53'
          - 'fd00::53'
    eth1:
      match:
        macaddress: 'bc:24:11:00:00:02'
      dhcp4: false
      dhcp6: false
      addresses:
        - '10.1.0.5/24'
      routing-policy:
        - { \"from\": \"10.1.0.0/24\", \"priority\": 999 }
      mtu: 9000
  vrfs:
    vrf-blue:
      table: 500
      routes:
        - { \"to\": \"0.0.0.0/0\", \"via\": \"10.1.0.254\" }
      interfaces:
        - 'eth1'
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
