#!/usr/bin/env python3
"""Checks the NoCloud seed a Talos machine boots with, as Talos v1.11 reads it.

The rules for network-config are those of Talos' NoCloud reader
(internal/app/machined/pkg/runtime/v1alpha1/platform/nocloud in siderolabs/talos, v1.11):
a document with a top-level `network` key is cloud-init's netplan v2; an ethernet is
matched by its `macaddress` (one string); `addresses` are prefixes; a route needs a `via`
that parses as an address (one without fails the whole document) and a `to` that is
`default` or a prefix; `nameservers.addresses` are addresses. Keys it does not know are
ignored, and so is what sits under them (`vrfs`, `routing-policy` beyond `from`/`table`).

With --reader PARSED_YAML it checks, in addition, what Talos' own reader made of the seed
(tests/e2e/talos-reader, the VM's NIC named enp6s18 with its MAC): the NIC matched by MAC, the
claim's address on it, the default route, the DNS servers, the provider ID and the hostname.

usage: talos_seed.py [--reader PARSED_YAML] SEED_JSON SECRET_JSON MACHINE_JSON
                     PROXMOXMACHINE_JSON VIP GATEWAY DNS
(SEED_JSON from the simulator's /_sim/vms/<vmid>/seed, the others as kubectl -o json prints
them; DNS comma separated.) Prints one line per check passed; exits 1 on the first failure.
"""

import base64
import ipaddress
import json
import re
import sys

import yaml


def fail(message):
    sys.exit(f"talos seed: {message}")


def decoded(files, name):
    if name not in files:
        fail(f"the seed has no {name}")
    return base64.b64decode(files[name])


def check_user_data(user_data, secret, vip):
    value = base64.b64decode(secret["data"]["value"])
    if user_data != value:
        fail("user-data differs from the bootstrap Secret's value: the machine config was changed")
    documents = [d for d in yaml.safe_load_all(user_data) if d]
    config = next((d for d in documents if d.get("version") == "v1alpha1"), None)
    if config is None:
        fail(f"user-data holds no v1alpha1 machine config (documents: {[d.get('kind') for d in documents]})")
    machine_type = config.get("machine", {}).get("type")
    if machine_type not in ("init", "controlplane"):
        fail(f"machine.type is {machine_type!r}, not a control plane")
    endpoint = config.get("cluster", {}).get("controlPlane", {}).get("endpoint")
    if endpoint != f"https://{vip}:6443":
        fail(f"cluster.controlPlane.endpoint is {endpoint!r}")
    vips = [i.get("vip", {}).get("ip") for i in config["machine"].get("network", {}).get("interfaces", [])]
    if vip not in vips:
        fail(f"the flavor's VIP patch is not in the machine config: {vips}")
    print(f"user-data: the bootstrap Secret's {len(value)} bytes unchanged, a {machine_type} "
          f"machine config for {endpoint} with the VIP on the node's NIC")


def check_meta_data(meta_data, machine, proxmox_machine):
    meta = yaml.safe_load(meta_data)
    provider_id = machine["spec"].get("providerID")
    if not provider_id or meta.get("provider-id") != provider_id:
        fail(f"meta-data provider-id {meta.get('provider-id')!r}, the Machine's {provider_id!r}")
    if f"proxmox://{meta.get('instance-id')}" != provider_id:
        fail(f"meta-data instance-id {meta.get('instance-id')!r} is not the provider ID's")
    name = proxmox_machine["metadata"]["name"]
    if meta.get("hostname") != name:
        fail(f"meta-data hostname {meta.get('hostname')!r}, not {name}")
    print(f"meta-data: provider-id {provider_id}, hostname {name}")


def prefix(text, what):
    try:
        return ipaddress.ip_interface(text)
    except ValueError:
        fail(f"{what}: {text!r} is not an address with a prefix length")


def address(text, what):
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        fail(f"{what}: {text!r} is not an address")


def check_network_config(network_config, proxmox_machine, gateway, dns):
    document = yaml.safe_load(network_config)
    if not isinstance(document, dict) or "network" not in document:
        fail("network-config has no top-level network key")
    network = document["network"]
    if network.get("version") != 2:
        fail(f"network-config version {network.get('version')!r}")
    ethernets = network.get("ethernets") or {}
    if not ethernets:
        fail("network-config has no ethernets")
    found_addresses, routes, servers = [], [], []
    for name, eth in sorted(ethernets.items()):
        mac = (eth.get("match") or {}).get("macaddress")
        if not isinstance(mac, str) or not re.fullmatch(r"([0-9a-f]{2}:){5}[0-9a-f]{2}", mac):
            fail(f"{name}: match.macaddress {mac!r} is not one lower-case MAC")
        for text in eth.get("addresses") or []:
            found_addresses.append(str(prefix(text, f"{name}.addresses")))
        for route in eth.get("routes") or []:
            via = address(route.get("via", ""), f"{name}: a route's via (Talos fails without one)")
            to = route.get("to")
            destination = ("0.0.0.0/0" if via.version == 4 else "::/0") if to == "default" else to
            prefix(destination, f"{name}: a route's to")
            routes.append((str(ipaddress.ip_network(destination, strict=False)), str(via)))
        for text in (eth.get("nameservers") or {}).get("addresses") or []:
            servers.append(str(address(text, f"{name}.nameservers")))
    ips = next((e for e in proxmox_machine["status"].get("ipAddresses", []) if e.get("net") == "default"), {})
    wanted = [f"{ip}/24" for ip in ips.get("ipv4", [])]
    if not wanted or found_addresses != wanted:
        fail(f"addresses {found_addresses}, the IPAM claims' {wanted}")
    if ("0.0.0.0/0", gateway) not in routes:
        fail(f"no default route via {gateway}: {routes}")
    if servers != dns:
        fail(f"nameservers {servers}, not {dns}")
    print(f"network-config: {', '.join(found_addresses)} from the IPAM claim, default via {gateway}, "
          f"DNS {', '.join(servers)}, matched by MAC, as Talos' NoCloud reader takes them")


def check_reader(parsed, machine, proxmox_machine, gateway, dns):
    """What Talos' NoCloud reader (its own code) made of the seed."""
    link = "enp6s18"
    if parsed.get("needsReconcile"):
        fail("Talos found no NIC with network-config's MAC and fell back to the name")
    config = parsed["config"]
    ips = next((e for e in proxmox_machine["status"].get("ipAddresses", []) if e.get("net") == "default"), {})
    wanted = [(f"{ip}/24", link) for ip in ips.get("ipv4", [])]
    found = [(a["address"], a["linkName"]) for a in config.get("addresses") or []]
    if found != wanted:
        fail(f"Talos reads the addresses {found}, not {wanted}")
    defaults = [r for r in config.get("routes") or [] if r.get("dst") == "" and r.get("gateway") == gateway]
    if not any(r.get("outLinkName") == link for r in defaults):
        fail(f"Talos reads no default route via {gateway} on {link}: {config.get('routes')}")
    servers = [s for r in config.get("resolvers") or [] for s in r.get("dnsServers") or []]
    if servers != dns:
        fail(f"Talos reads the DNS servers {servers}, not {dns}")
    metadata = config.get("metadata") or {}
    if metadata.get("providerId") != machine["spec"].get("providerID"):
        fail(f"Talos reads the provider ID {metadata.get('providerId')!r}")
    if metadata.get("hostname") != proxmox_machine["metadata"]["name"]:
        fail(f"Talos reads the hostname {metadata.get('hostname')!r}")
    print(f"Talos' own NoCloud reader: {found[0][0]} on {link} matched by MAC, default via {gateway}, "
          f"DNS {', '.join(servers)}, provider ID {metadata['providerId']}")


def main():
    args = sys.argv[1:]
    reader = None
    if args[:1] == ["--reader"]:
        reader, args = yaml.safe_load(open(args[1])), args[2:]
    if len(args) != 7:
        sys.exit(__doc__)
    seed, secret, machine, proxmox_machine = (json.load(open(p)) for p in args[:4])
    vip, gateway, dns = args[4], args[5], args[6].split(",")
    files = seed["files"]
    check_user_data(decoded(files, "user-data"), secret, vip)
    check_meta_data(decoded(files, "meta-data"), machine, proxmox_machine)
    check_network_config(decoded(files, "network-config"), proxmox_machine, gateway, dns)
    if reader is not None:
        check_reader(reader, machine, proxmox_machine, gateway, dns)


if __name__ == "__main__":
    main()
