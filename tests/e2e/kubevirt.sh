# shellcheck shell=bash
# Another provider's own controller against us (sourced by run after scenario.sh; uses its
# process, PKI, control-plane and provider helpers). See docs/e2e.md, "A co-tenant's
# controller".
#
# `kubevirt` builds CAPK (Cluster API Provider KubeVirt, whose four kinds live in our v1alpha1)
# from its Go module and runs its manager on two management clusters side by side, in one
# private network namespace:
#
# - kube: kube-apiserver's CRD handler serves CAPK's kinds, as in any cluster without us;
# - ours: capmox-apiserver holds v1alpha1 and v1alpha2 and serves them from CAPK's CRDs,
#   until deploy/uninstall hands them back to kube-apiserver.
#
# Each has Cluster API's managers, CAPK's CRDs, webhook and RBAC from its config/default (its
# webhook called by whichever server serves the kind), and stand-in CRDs for the KubeVirt kinds
# CAPK writes (tests/e2e/kubevirt-crds: nothing runs the VMs). The cluster `clusterctl generate
# cluster --infrastructure kubevirt` makes from CAPK's own template is applied to both. On each:
# the KubevirtCluster becomes ready (CAPK made its load-balancer Service and SSH key Secret),
# the Cluster's infrastructure is ready, KCP's KubevirtMachine gets its bootstrap data and
# CAPK creates its VirtualMachine; the conditions both sides reached are compared. The workers
# are scaled to zero (their KubevirtMachine deleted through each server). Then deploy/uninstall
# removes ours: CAPK's objects are served by kube-apiserver again, each created anew (they were
# all made after our install), what they own (the SSH key Secret) survives the garbage collector
# and is owned by the new uid, and CAPK, unpaused, reaches the same conditions again. Deleting the
# Cluster completes on both. CAPK's log on ours may hold no error the API caused (not found, decode)
# and no more conflicts than on kube.

CAPK_MODULE=sigs.k8s.io/cluster-api-provider-kubevirt
CAPK_VERSION=v0.1.10
KUBEVIRT_NAMESPACE=kubevirt-e2e
KUBEVIRT_CLUSTER=kv
CAPK_KINDS=kubevirtclusters.$INFRA_GROUP,kubevirtmachines.$INFRA_GROUP,kubevirtmachinetemplates.$INFRA_GROUP

kubevirt() {
  build_all
  build_from_module "$CAPK_MODULE" "$CAPK_VERSION" capk-manager="$CAPK_MODULE"
  ((${#failed_builds[@]} == 0)) || die "builds failed: ${failed_builds[*]}"
  skip_unless_built "CAPK's controller against us" kube-apiserver etcd kube-controller-manager clusterctl \
    capi-manager capi-kubeadm-bootstrap-manager capi-kubeadm-control-plane-manager capk-manager
  capmox_build
  CAPK_DIR=$(module_info "$CAPK_MODULE@$CAPK_VERSION" '{{.Dir}}')
  export CAPK_DIR
  reexec_in_private_network kubevirt-inside
  kubevirt_inside
}

kubevirt_inside() {
  local start=$SECONDS side
  need_python_yaml
  capmox_version=v$(sed -n 's/^version = "\(.*\)"/\1/p' "$repo/Cargo.toml" | head -n1)
  open_run
  new_cert capmox-serving ca server "/CN=$CAPMOX_SERVICE.$CAPMOX_NAMESPACE.svc" \
    "DNS:$CAPMOX_SERVICE.$CAPMOX_NAMESPACE.svc, IP:127.0.0.1"
  mkdir -p "$pki/webhook"
  new_cert webhook/tls ca server /CN=capi-webhooks "IP:127.0.0.1, DNS:localhost"
  for side in kube ours; do
    kubevirt_management_cluster "$side"
  done
  kubevirt_generate >"$run/kubevirt-cluster.yaml"
  for side in kube ours; do
    kx "$(kubevirt_config "$side")" create namespace "$KUBEVIRT_NAMESPACE" >/dev/null
    kx "$(kubevirt_config "$side")" apply -f "$run/kubevirt-cluster.yaml" >/dev/null ||
      die "applying CAPK's cluster on $side failed"
  done
  for side in kube ours; do
    kubevirt_provisioning "$side"
  done
  kubevirt_compare_conditions
  kubevirt_scale_workers_to_zero
  kubevirt_uninstall_ours
  kubevirt_compare_conditions
  for side in kube ours; do
    kx "$(kubevirt_config "$side")" -n "$KUBEVIRT_NAMESPACE" delete "cluster.cluster.x-k8s.io/$KUBEVIRT_CLUSTER" \
      --wait=false >/dev/null
  done
  for side in kube ours; do
    poll 240 "$side: deleting the Cluster removed CAPK's objects and its VirtualMachine" \
      kubevirt_nothing_left "$side"
  done
  kubevirt_api_errors
  log "CAPK's controller against us passed in $((SECONDS - start)) s"
}

kubevirt_config() { # SIDE: its kubeconfig
  local config=kubevirt_${1}_kubeconfig
  printf '%s' "${!config}"
}

# SIDE: etcd, kube-apiserver, Cluster API's managers, then CAPK. On ours, capmox-apiserver
# (without its controller: no Proxmox objects here) is installed after CAPK's CRDs and a
# KubevirtCluster default/kv held by kube-apiserver, which the install moves in with its uid
# (the scenario's "co-tenant first"), and before CAPK's manager.
kubevirt_management_cluster() {
  local side=$1
  tag=-$side
  start_etcd
  start_kube_apiserver
  write_kubeconfig
  install_crds
  if [[ $side == ours ]]; then
    controller_flags=(--controller=false)
    COTENANT_CRDS=$CAPK_DIR/config/crd/bases
    install_cotenant_first
    capmox_port=$(free_port)
    render_capmox_deploy "$capmox_port" >"$run/deploy$tag.yaml" || die "kustomize of deploy/ failed"
    migrate_and_serve "$run/migration$tag.log"
    check_cotenant_first
  else
    # start_providers records every provider's clusterctl inventory entry, ours too.
    kc create namespace "$CAPMOX_NAMESPACE" >/dev/null
  fi
  start_providers
  start_capk
  printf -v "kubevirt_${side}_kubeconfig" '%s' "$kubeconfig"
  log "management cluster $side ready, CAPK $CAPK_VERSION running: $kubeconfig"
}

# CAPK's config/default as clusterctl installs it (its webhook on loopback), the KubeVirt
# stand-in CRDs, its manager as a process, and its clusterctl inventory entry.
start_capk() {
  local port health
  port=$(free_port)
  health=$(free_port)
  kc kustomize "$CAPK_DIR/config/default" 2>>"$run/kustomize.log" |
    python3 "$here/components.py" infrastructure-kubevirt "$port" "$pki/ca.crt" >"$run/capk$tag.json" ||
    die "rendering CAPK's config/default failed"
  kc apply --server-side --field-manager clusterctl -f "$run/capk$tag.json" >/dev/null ||
    die "applying CAPK's components failed"
  kc apply --server-side --field-manager capmox-e2e -f "$here/kubevirt-crds" >/dev/null
  kc wait --for condition=Established --timeout 60s crd --all >/dev/null
  # On ours, CAPK's kinds are served from their CRDs once our server has listed them.
  wait_until 30 "$(pid_of "kube-apiserver$tag")" "KubevirtMachineTemplate served" \
    kc get --raw "/apis/$INFRA_GROUP/v1alpha1/kubevirtmachinetemplates"
  # The admin kubeconfig, as for the Cluster API managers (start_provider).
  start_process "capk-manager$tag" "$bin/capk-manager" --kubeconfig "$kubeconfig" \
    --webhook-port "$port" --webhook-cert-dir "$pki/webhook" --health-addr "127.0.0.1:$health" \
    --metrics-bind-addr 0
  wait_until 90 "${pids[-1]}" "capk-manager$tag" curl -fsS "http://127.0.0.1:$health/readyz"
  wait_until 60 "${pids[-1]}" "CAPK's webhook server" curl -sS -o /dev/null --cacert "$pki/ca.crt" \
    "https://127.0.0.1:$port/validate-infrastructure-cluster-x-k8s-io-v1alpha1-kubevirtmachinetemplate"
  inventory_entry infrastructure-kubevirt capk-system InfrastructureProvider kubevirt "$CAPK_VERSION" |
    kc apply --server-side --field-manager clusterctl -f - >/dev/null
}

# The cluster of CAPK's default template, through clusterctl from a local repository holding
# CAPK's own metadata and template.
kubevirt_generate() {
  local repository=$run/repository-kubevirt/infrastructure-kubevirt/$CAPK_VERSION
  mkdir -p "$repository"
  cp "$CAPK_DIR/metadata.yaml" "$CAPK_DIR/templates/cluster-template.yaml" "$repository/"
  cp "$run/capk-kube.json" "$repository/infrastructure-components.yaml"
  cat >"$run/clusterctl.yaml" <<EOF2
providers:
- name: kubevirt
  type: InfrastructureProvider
  url: file://$repository/infrastructure-components.yaml
EOF2
  export CRI_PATH=/var/run/containerd/containerd.sock
  NODE_VM_IMAGE_TEMPLATE=quay.io/capk/ubuntu-2404-container-disk:$KUBERNETES_VERSION \
    clusterctl_ generate cluster "$KUBEVIRT_CLUSTER" --kubeconfig "$(kubevirt_config ours)" \
    --infrastructure "kubevirt:$CAPK_VERSION" --target-namespace "$KUBEVIRT_NAMESPACE" \
    --kubernetes-version "$KUBERNETES_VERSION" --control-plane-machine-count 1 --worker-machine-count 1 |
    kubevirt_template_adapted || die "clusterctl generate cluster --infrastructure kubevirt failed"
}

# Two changes to what CAPK's template makes:
# - the MachineDeployment's MachineSets create their Machine before the control plane is
#   initialized (Cluster API's preflight checks would wait for that, which never comes here),
#   so that the worker's KubevirtMachine exists too;
# - the workers' KubeadmConfigTemplate's `nodeRegistration` holds only an empty
#   `kubeletExtraArgs`, which Cluster API v1.12 converts to an empty object its v1beta2 schema
#   refuses ("should have at least 1 properties"): it gets the CRI socket, as CAPK's control
#   plane has it.
kubevirt_template_adapted() {
  python3 -c '
import sys, yaml
docs = [d for d in yaml.safe_load_all(sys.stdin) if d]
for doc in docs:
    if doc["kind"] == "MachineDeployment":
        doc["metadata"].setdefault("annotations", {})["machineset.cluster.x-k8s.io/skip-preflight-checks"] = "All"
    if doc["kind"] == "KubeadmConfigTemplate":
        registration = doc["spec"]["template"]["spec"]["joinConfiguration"]["nodeRegistration"]
        registration.setdefault("criSocket", sys.argv[1])
print(yaml.safe_dump_all(docs))' "$CRI_PATH"
}

# SIDE: CAPK's controller went as far as it can without KubeVirt: the cluster's load balancer
# and SSH keys made, infrastructure ready, the control-plane machine's VirtualMachine created.
kubevirt_provisioning() {
  local side=$1 config
  config=$(kubevirt_config "$side")
  poll 180 "$side: KubevirtCluster ready with its endpoint, Cluster InfrastructureReady" \
    kubevirt_cluster_ready "$config"
  poll 180 "$side: CAPK created the control-plane machine's VirtualMachine" \
    kubevirt_vm_created "$config"
  poll 120 "$side: the worker's KubevirtMachine made, with CAPK's finalizer" eval \
    "[[ \$(kx '$config' -n '$KUBEVIRT_NAMESPACE' get kubevirtmachines.$INFRA_GROUP \
      -l '!cluster.x-k8s.io/control-plane' -o jsonpath='{.items[*].metadata.finalizers}') == *kubevirtmachine* ]]"
}

kubevirt_cluster_ready() {
  local config=$1 ready host keys infra
  read -r ready host keys < <(kx "$config" -n "$KUBEVIRT_NAMESPACE" get "kubevirtclusters.$INFRA_GROUP" \
    "$KUBEVIRT_CLUSTER" -o jsonpath='{.status.ready} {.spec.controlPlaneEndpoint.host} {.spec.sshKeys.dataSecretName}')
  infra=$(kx "$config" -n "$KUBEVIRT_NAMESPACE" get "cluster.cluster.x-k8s.io/$KUBEVIRT_CLUSTER" \
    -o jsonpath='{.status.conditions[?(@.type=="InfrastructureReady")].status}')
  [[ $ready == true && -n $host && -n $keys && $infra == True ]] &&
    kx "$config" -n "$KUBEVIRT_NAMESPACE" get secret "$keys" >/dev/null
}

kubevirt_vm_created() {
  local config=$1 machine finalizers
  machine=$(kx "$config" -n "$KUBEVIRT_NAMESPACE" get "kubevirtmachines.$INFRA_GROUP" \
    -l cluster.x-k8s.io/control-plane -o jsonpath='{.items[0].metadata.name}')
  [[ -n $machine ]] || return 1
  finalizers=$(kx "$config" -n "$KUBEVIRT_NAMESPACE" get "kubevirtmachines.$INFRA_GROUP" "$machine" \
    -o jsonpath='{.metadata.finalizers}')
  [[ $finalizers == *kubevirtmachine* ]] &&
    kx "$config" -n "$KUBEVIRT_NAMESPACE" get virtualmachines.kubevirt.io "$machine" >/dev/null
}

# The conditions of CAPK's objects and of the Cluster, as "kind type status reason" lines.
kubevirt_conditions() {
  local config=$1 kind
  for kind in "kubevirtclusters.$INFRA_GROUP" "kubevirtmachines.$INFRA_GROUP" clusters.cluster.x-k8s.io; do
    kx "$config" -n "$KUBEVIRT_NAMESPACE" get "$kind" -o json | python3 -c '
import json, sys
kind = sys.argv[1]
for item in json.load(sys.stdin)["items"]:
    role = "control-plane" if "cluster.x-k8s.io/control-plane" in item["metadata"].get("labels", {}) else "worker"
    if not kind.startswith("kubevirtmachines."):
        role = "cluster"
    for c in item.get("status", {}).get("conditions", []):
        if c["type"] in ("Ready", "InfrastructureReady", "LoadBalancerAvailable", "VMProvisioned"):
            print(kind.split(".")[0], role, c["type"], c["status"], c.get("reason", ""))
' "$kind"
  done | sort -u
}

# Both sides reach the same conditions (given the same time to settle).
kubevirt_compare_conditions() {
  local kube ours start=$SECONDS
  while true; do
    kube=$(kubevirt_conditions "$(kubevirt_config kube)")
    ours=$(kubevirt_conditions "$(kubevirt_config ours)")
    [[ $kube == "$ours" ]] && break
    ((SECONDS - start < 60)) ||
      die "CAPK's conditions differ between kube's CRD handler and ours:"$'\n'"kube:"$'\n'"$kube"$'\n'"ours:"$'\n'"$ours"
    sleep 2
  done
  log "CAPK's conditions alike on kube and ours ($(wc -l <<<"$ours") conditions):"$'\n'"$ours"
}

kubevirt_nothing_left() {
  local config
  config=$(kubevirt_config "$1")
  [[ -z $(kx "$config" -n "$KUBEVIRT_NAMESPACE" get "$CAPK_KINDS,virtualmachines.kubevirt.io,clusters.cluster.x-k8s.io" \
    -o name) ]]
}

# CAPK's errors that came from the API, counted on each side: not found (a kind or object the
# server lost), decode errors, and conflicts (409: retried writes). Ours may have none of the
# first two and no more conflicts than kube plus two.
kubevirt_api_errors() {
  local side log not_found decode conflicts kube_conflicts=0
  for side in kube ours; do
    log=$run/capk-manager-$side.log
    not_found=$(grep -cE 'could not find the requested resource|no matches for kind' "$log" || true)
    decode=$(grep -ciE 'unable to decode|cannot unmarshal|json: unknown field' "$log" || true)
    conflicts=$(grep -cE 'the object has been modified' "$log" || true)
    log "CAPK on $side: $not_found not-found errors, $decode decode errors, $conflicts conflicts; its reconcile errors by message:"$'\n'"$(
      sed -n 's/.*"error"="\([^:"]*\).*/\1/p' "$log" | sort | uniq -c)"
    if [[ $side == kube ]]; then
      kube_conflicts=$conflicts
    else
      ((not_found == 0 && decode == 0)) || die "CAPK's log on ours has API errors: $log"
      ((conflicts <= kube_conflicts + 2)) || die "CAPK met $conflicts conflicts on ours, $kube_conflicts on kube"
    fi
  done
}

# MachineDeployment scaled to 0 on both sides: the worker's KubevirtMachine (waiting for the
# control plane) is deleted, through ours on ours, and CAPK lets it go.
kubevirt_scale_workers_to_zero() {
  local side config deployment
  for side in kube ours; do
    config=$(kubevirt_config "$side")
    deployment=$(kx "$config" -n "$KUBEVIRT_NAMESPACE" get machinedeployments.cluster.x-k8s.io -o name)
    kx "$config" -n "$KUBEVIRT_NAMESPACE" scale "$deployment" --replicas 0 >/dev/null
  done
  for side in kube ours; do
    poll 120 "$side: the worker's KubevirtMachine deleted" eval \
      "[[ -z \$(kx '$(kubevirt_config "$side")' -n '$KUBEVIRT_NAMESPACE' get kubevirtmachines.$INFRA_GROUP \
        -l '!cluster.x-k8s.io/control-plane' -o name) ]]"
  done
}

# uid of the KubevirtCluster, and the owner uids of its SSH key Secret, on ours.
kubevirt_owners() {
  local config
  config=$(kubevirt_config ours)
  printf '%s %s\n' \
    "$(kx "$config" -n "$KUBEVIRT_NAMESPACE" get "kubevirtclusters.$INFRA_GROUP" "$KUBEVIRT_CLUSTER" -o jsonpath='{.metadata.uid}')" \
    "$(kx "$config" -n "$KUBEVIRT_NAMESPACE" get secret -l "cluster.x-k8s.io/cluster-name=$KUBEVIRT_CLUSTER" \
      -o jsonpath='{range .items[*]}{.metadata.ownerReferences[?(@.kind=="KubevirtCluster")].uid}{end}')"
}

# deploy/uninstall on ours (docs/migration.md, "The way back"): CAPK's objects back in kube's
# CRD handler: the cluster's with new uids (made after our install), the Secret they own kept and
# re-owned; default/kv, which kube-apiserver held before our install and which was changed
# through ours since, with its uid and the change; the Cluster unpaused; what deploy/ installed
# deleted but the CRDs.
kubevirt_uninstall_ours() {
  local config before after objects out start=$SECONDS
  config=$(kubevirt_config ours)
  kx "$config" -n default label "kubevirtclusters.$INFRA_GROUP" kv e2e=changed-through-ours --overwrite >/dev/null
  objects=$(kx "$config" get "$CAPK_KINDS" -A -o name | sort)
  before=$(kubevirt_owners)
  [[ ${before% *} == "${before#* }" ]] || die "before uninstalling: the SSH key Secret is not owned by the KubevirtCluster: $before"
  uninstall_capmox -ours "$config" --manifests "$run/deploy-ours.yaml"
  # What the manifests installed is gone but the CRDs (and the namespace, terminating: no
  # namespace controller runs here); v1alpha1's APIService is kube-aggregator's own now, for
  # CAPK's CRD (checked below).
  out=$(kx "$config" get -f "$run/deploy-ours.yaml" --ignore-not-found -o name |
    grep -v -e '^customresourcedefinition' -e '^namespace/' -e "^apiservice.*/v1alpha1\." || true)
  [[ -z $out ]] || die "after uninstalling with --manifests, still there: $out"
  log "deploy/uninstall took $((SECONDS - start)) s: $(grep -c . "$run/uninstall-ours.log") lines in $run/uninstall-ours.log"
  python3 -c 'import json, sys; items = json.load(open(sys.argv[1]))["items"]; sys.exit(not any(o["kind"] == "KubevirtCluster" for o in items))' \
    "$run/uninstall-backup-ours.json" || die "the uninstall's backup lacks the KubevirtCluster"
  # Time for the garbage collector to act on owners it cannot find.
  sleep 10
  [[ $(kx "$config" get "$CAPK_KINDS" -A -o name | sort) == "$objects" ]] ||
    die "after uninstalling: CAPK's objects differ: $objects → $(kx "$config" get "$CAPK_KINDS" -A -o name | sort)"
  after=$(kubevirt_owners)
  [[ ${after% *} == "${after#* }" && ${after% *} != "${before% *}" ]] ||
    die "after uninstalling: the KubevirtCluster (a new uid) should own the SSH key Secret: before $before, after $after"
  out=$(kx "$config" -n default get "kubevirtclusters.$INFRA_GROUP" kv -o jsonpath='{.metadata.uid} {.metadata.labels.e2e}')
  [[ $out == "$cotenant_uid changed-through-ours" ]] ||
    die "after uninstalling: default/kv should keep its uid $cotenant_uid and the label set through ours: $out"
  poll 60 "after uninstalling: the Cluster unpaused" eval \
    "[[ \$(kx '$config' -n '$KUBEVIRT_NAMESPACE' get cluster.cluster.x-k8s.io '$KUBEVIRT_CLUSTER' -o jsonpath='{.spec.paused}') != true ]]"
  log "uninstalled: $(wc -l <<<"$objects") CAPK objects served by kube-apiserver again; default/kv with its uid and the change made through ours; the KubevirtCluster's SSH key Secret kept and owned by its new uid"
}
