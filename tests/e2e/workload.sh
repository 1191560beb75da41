# shellcheck shell=bash
# A workload cluster provisioned from the node (sourced by run after node.sh). See docs/e2e.md,
# "A workload cluster from the node's pods".
#
# With E2E_NODE_CLUSTERCTL, after `clusterctl init` (and with E2E_NODE_UPGRADE, across `clusterctl
# upgrade apply`, see upgrade.sh): the Proxmox VE simulator (`capmox-apiserver
# pve-sim --address NODE_IP`) runs in the node's network namespace, where pods reach it through
# the CNI bridge's gateway like kube-apiserver; `clusterctl generate cluster` of our
# external-creds flavor (credentials Secret with the simulator's URL, token and CA as `root_ca`,
# so the controller verifies its certificate) is applied; Cluster API's managers, the IPAM
# provider and our controller, all pods, provision it. The scenario's workload-cluster stand-in
# (a kube-apiserver at the control-plane endpoint with the cluster CA, the kubeadm-config
# ConfigMap and a Node per Machine; scenario.sh, "Stand-ins") listens on an address of the node's
# namespace that pods reach the same way, so KCP finds the control plane initialized and the
# worker gets its bootstrap data. Checks: both Machines' VMs on the simulator, cloned once each,
# providerIDs and addresses from the IPAM provider's claims; then the Cluster deleted and no VM,
# Proxmox or IPAM object left.

NODE_PVE_PORT=8006
# The control-plane endpoint (a VIP on the real thing): on lo, like NODE_IP.
NODE_WORKLOAD_ENDPOINT=10.0.1.100
NODE_WORKLOAD_NAMESPACE=e2e-workload
NODE_WORKLOAD_CLUSTER=node-wl

# The simulator on the node's address, its CA written to the run dir, every request logged.
node_pve_sim() {
  local secret
  secret=$(openssl rand -hex 16)
  pve_ca=$run/pve-ca.pem
  pve_url=https://$NODE_IP:$NODE_PVE_PORT
  pve_token='capmox@pve!capi'
  pve_secret=$secret
  # The request log's times count from the simulator's start: this, give or take the exec.
  node_pve_started=$(date +%s.%N)
  start_process pve-sim "$capmox_bin" pve-sim --address "$NODE_IP" --port "$NODE_PVE_PORT" --profile fast \
    --token-secret "$secret" --ca-out "$pve_ca" --request-log "$run/pve-requests.jsonl"
  # The certificate names the node's address: curl checks it against the simulator's CA.
  wait_until 30 "${pids[-1]}" pve-sim curl -fsS --cacert "$pve_ca" "$pve_url/_sim/state"
}

# PLAN: the simulator's fault plan replaced (docs/proxmox.md, "Fault knobs"; "{}" for none).
node_pve_faults() {
  curl -fsS --cacert "$pve_ca" -X PUT -H 'Content-Type: application/json' -d "$1" "$pve_url/_sim/faults" \
    >/dev/null || die "setting the simulator's faults to $1 failed"
}

# The VMs the simulator is cloning (locked "clone"): their VMIDs on one line.
node_pve_cloning() {
  curl -fsS --cacert "$pve_ca" "$pve_url/_sim/state" | python3 -c '
import json, sys
print(" ".join(str(v["vmid"]) for v in json.load(sys.stdin)["vms"] if v["lock"] == "clone"))'
}

# Every clone the simulator answered, as "NEWID" lines (a VM cloned twice shows up twice).
node_pve_clones() {
  python3 -c '
import json, re, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("method") == "POST" and re.search(r"/qemu/\d+/clone$", r.get("path", "")) and r.get("status") == 200:
        print(r.get("params", {}).get("newid"))' "$run/pve-requests.jsonl"
}

# EPOCH: every clone as "NEWID@SECONDS", SECONDS from EPOCH (by the request log's times).
node_pve_clones_at() {
  python3 -c '
import json, re, sys
started, epoch = float(sys.argv[2]), float(sys.argv[3])
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("method") == "POST" and re.search(r"/qemu/\d+/clone$", r.get("path", "")) and r.get("status") == 200:
        newid = r.get("params", {}).get("newid")
        print("%s@%+.1fs" % (newid, started + r["t"] - epoch))' \
    "$run/pve-requests.jsonl" "$node_pve_started" "$1" | tr '\n' ' '
}

# `clusterctl generate cluster` of the external-creds flavor for the simulator, its Secret given
# the simulator's CA as root_ca (insecure defaults to false then).
node_workload_generate() {
  CLUSTERCTL_DISABLE_VERSIONCHECK=true XDG_CONFIG_HOME=$run/xdg \
    CONTROL_PLANE_ENDPOINT_IP=$NODE_WORKLOAD_ENDPOINT NODE_IP_RANGES='[10.0.1.10-10.0.1.50]' IP_PREFIX=24 \
    GATEWAY=10.0.1.1 DNS_SERVERS='[10.0.1.1]' VM_SSH_KEYS='ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE2e2e e2e' \
    PROXMOX_SOURCENODE=pve1 TEMPLATE_VMID=9000 BRIDGE=vmbr0 BOOT_VOLUME_DEVICE=scsi0 BOOT_VOLUME_SIZE=100 \
    MEMORY_MIB=4096 NUM_CORES=2 NUM_SOCKETS=1 \
    PROXMOX_URL=$pve_url PROXMOX_TOKEN=$pve_token PROXMOX_SECRET=$pve_secret \
    "$bin/clusterctl" generate cluster "$NODE_WORKLOAD_CLUSTER" --config "$run/clusterctl-init.yaml" \
    --kubeconfig "$kubeconfig" --infrastructure "proxmox:$capmox_version" --flavor external-creds \
    --target-namespace "$NODE_WORKLOAD_NAMESPACE" --kubernetes-version "$KUBERNETES_VERSION" \
    --control-plane-machine-count 1 --worker-machine-count 1 >"$run/workload.yaml" ||
    die "clusterctl generate cluster --flavor external-creds failed"
  python3 - "$run/workload.yaml" "$pve_ca" <<'EOF' || die "adding root_ca to the credentials Secret failed"
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
secrets = [d for d in docs if d["kind"] == "Secret" and d["metadata"]["name"].endswith("-proxmox-credentials")]
assert len(secrets) == 1, secrets
secrets[0]["stringData"]["root_ca"] = open(sys.argv[2]).read()
yaml.safe_dump_all(docs, open(sys.argv[1], "w"), sort_keys=False)
EOF
}

# name|providerID|addresses|reason of VirtualMachineProvisioned|VMID per ProxmoxMachine.
node_workload_machines() {
  kc -n "$CLUSTER_NAMESPACE" get proxmoxmachines -o jsonpath='{range .items[*]}{.metadata.name}|{.spec.providerID}|{.status.addresses[?(@.type=="InternalIP")].address}|{.status.conditions[?(@.type=="VirtualMachineProvisioned")].reason}|{.spec.virtualMachineID}{"\n"}{end}'
}

# Both Machines InfrastructureReady with proxmox:// providerIDs and nodeRefs, one VM each on the
# simulator, cloned once; every InternalIP the IPAM provider's allocation for the machine's claim.
node_workload_provisioned() {
  local out clones
  machines_on_proxmox 2 || return 1
  out=$(kc -n "$CLUSTER_NAMESPACE" get machines -o jsonpath='{range .items[*]}{.metadata.name}={.status.nodeRef.name} {end}')
  [[ $out != *'= '* ]] || { echo "nodeRefs: $out"; return 1; }
  addresses_from_claims in_workload_node_range || return 1
  clones=$(node_pve_clones | sort)
  [[ $(wc -l <<<"$clones") == 2 && -z $(uniq -d <<<"$clones") ]] || { echo "clones: $clones"; return 1; }
}

# The node's range of the workload cluster's machines (its IPAM pool).
in_workload_node_range() {
  [[ $1 == 10.0.1.* ]]
}

# After node_clusterctl_init: the simulator, the generated cluster applied and provisioned by the
# pods, then deleted.
node_workload_cluster() {
  node_workload_apply
  node_workload_wait
  node_workload_delete
}

# [FAULTS]: the simulator (with that fault plan), the endpoint's address, the generated cluster
# applied; the stand-in armed.
node_workload_apply() {
  node_pve_sim
  [[ -z ${1:-} ]] || node_pve_faults "$1"
  ip addr add "$NODE_WORKLOAD_ENDPOINT/32" dev lo
  node_workload_generate
  # The scenario's helpers (machines_on_proxmox, cluster_gone, no_vms_left, the workload stand-in).
  CLUSTER_NAMESPACE=$NODE_WORKLOAD_NAMESPACE CLUSTER_NAME=$NODE_WORKLOAD_CLUSTER a_etcd_port=$etcd_port
  kc create namespace "$CLUSTER_NAMESPACE" >/dev/null || die "creating namespace $CLUSTER_NAMESPACE failed"
  kc apply -f "$run/workload.yaml" >/dev/null || die "applying the generated cluster failed"
  node_workload_start=$SECONDS
  log "applied cluster $CLUSTER_NAME generated by clusterctl (flavor external-creds, $(grep -c '^kind:' "$run/workload.yaml") objects); the simulator at $pve_url"
  standins_active=1 standin_infrastructure=0
}

node_workload_wait() {
  local out
  poll 300 "the controller in its pod: the control-plane ProxmoxMachine has a VM on the simulator, a providerID and an address" \
    node_workload_first_machine
  log "$(node_workload_machines | tr '\n' ' ')"
  poll 300 "workload cluster $CLUSTER_NAME: both Machines' VMs on the simulator (cloned once each), providerIDs, nodeRefs, addresses from claims" \
    node_workload_provisioned
  out=$(node_workload_machines)
  log "provisioned $((SECONDS - node_workload_start)) s after the apply: $(tr '\n' ' ' <<<"$out")"
  [[ -z ${node_upgrade_started:-} ]] ||
    log "clones, from clusterctl upgrade apply's start: $(node_pve_clones_at "$node_upgrade_started")(the new pod took the leadership at ${node_upgrade_led}s)"
}

node_workload_delete() {
  local start=$SECONDS
  kc -n "$CLUSTER_NAMESPACE" delete cluster "$CLUSTER_NAME" --wait=false >/dev/null || die "deleting cluster $CLUSTER_NAME failed"
  poll 300 "deleting cluster $CLUSTER_NAME removed every Proxmox and IPAM object" cluster_gone
  poll 120 "deleting cluster $CLUSTER_NAME removed its VMs from the simulator" no_vms_left
  standins_active=0
  log "workload cluster deleted in $((SECONDS - start)) s; no VM left on the simulator ($(node_pve_clones | wc -l) clones in all)"
}

# With E2E_NODE_UPGRADE (clones slowed by the fault plan node_workload_apply got): a clone task
# running on the simulator before clusterctl upgrade begins, so that our pod is replaced while the
# controller waits for it.
node_workload_in_flight() {
  poll 300 "a VM of cluster $CLUSTER_NAME being cloned on the simulator" node_workload_cloning
  log "ProxmoxMachines before the upgrade: $(node_workload_machines | tr '\n' ' '); VMs being cloned: $(node_pve_cloning)"
}

node_workload_cloning() {
  [[ -n $(node_pve_cloning) ]]
}

# The control-plane machine's VM, providerID and address: what the controller does without a
# workload cluster.
node_workload_first_machine() {
  local name provider_id address reason vmid
  while IFS='|' read -r name provider_id address reason vmid; do
    [[ $provider_id == proxmox://* && -n $address && -n $vmid && " $(pve_vms) " == *" $vmid "* ]] && return 0
  done < <(node_workload_machines)
  node_workload_machines
  return 1
}
