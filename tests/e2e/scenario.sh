# shellcheck shell=bash
# The Cluster API scenario of `tests/e2e/run scenario` (sourced by run; uses its
# process, PKI and control-plane helpers). See docs/e2e.md for what it checks.
#
# Two management clusters (a, b), each: etcd + kube-apiserver, capmox-apiserver
# registered through deploy/ (APIServices, shadow CRDs, RBAC), the Cluster API
# providers installed from their modules' config/default with webhooks pointed at
# local manager processes, and kube-controller-manager's garbage collector; the
# built-in controller of serve provisions on one shared Proxmox VE simulator. Then
# a cluster from deploy/clusterctl is generated, applied, checked, moved from a to
# b and deleted.

repo=$(cd "$here/../.." && pwd)
CAPMOX_NAMESPACE=capmox-system
CAPMOX_SERVICE=capmox-apiserver
CLUSTER_NAMESPACE=e2e
CLUSTER_NAME=e2e
INFRA_GROUP=infrastructure.cluster.x-k8s.io
PROXMOX_KINDS=proxmoxclusters.$INFRA_GROUP,proxmoxclustertemplates.$INFRA_GROUP,proxmoxmachines.$INFRA_GROUP,proxmoxmachinetemplates.$INFRA_GROUP

kx() { # KUBECONFIG ARGS...: kubectl against one management cluster
  local config=$1
  shift
  "$KUBECTL" --kubeconfig "$config" --request-timeout 60s "$@"
}

# poll SECONDS WHAT COMMAND...: run COMMAND (after one tick of the stand-ins)
# until it succeeds; fail with WHAT and the command's last output.
poll() {
  local deadline=$((SECONDS + $1)) what=$2 start=$SECONDS out
  shift 2
  while true; do
    standin_tick
    if out=$("$@" 2>&1); then
      log "$what after $((SECONDS - start)) s"
      return 0
    fi
    if ((SECONDS >= deadline)); then
      die "timed out after $((SECONDS - start)) s waiting for: $what; last output: $out (state: $run/state-*.yaml)"
    fi
    sleep 1
  done
}

# Every object of the scenario's namespace on both management clusters, and the
# workload stand-in's nodes, for the kept run dir (run's cleanup calls it when a
# check failed).
dump_state() {
  local name config
  [[ -n ${a_kubeconfig:-} ]] || return 0
  for name in a b; do
    config=${name}_kubeconfig
    [[ -n ${!config:-} ]] || continue
    kx "${!config}" -n "$CLUSTER_NAMESPACE" get "$PROXMOX_KINDS,clusters.cluster.x-k8s.io,machines.cluster.x-k8s.io,machinesets.cluster.x-k8s.io,kubeadmcontrolplanes.controlplane.cluster.x-k8s.io,kubeadmconfigs.bootstrap.cluster.x-k8s.io,$IPAM_KINDS" \
      -o yaml >"$run/state-$name.yaml" 2>&1 || true
  done
  [[ -z $workload_kubeconfig ]] || kx "$workload_kubeconfig" get nodes -o yaml >"$run/state-workload.yaml" 2>&1 || true
}

# ---------------------------------------------------------------------------
# Build and isolation

capmox_build() {
  if [[ -n ${E2E_CAPMOX_BIN:-} ]]; then
    capmox_bin=$E2E_CAPMOX_BIN
  else
    log "building capmox-apiserver (cargo build --bin capmox-apiserver)"
    (cd "$repo" && cargo build --quiet --bin capmox-apiserver) || die "cargo build failed"
    capmox_bin=$(cd "$repo" && cargo metadata --format-version 1 --no-deps |
      python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')/debug/capmox-apiserver
  fi
  [[ -x $capmox_bin ]] || die "capmox-apiserver binary not found: $capmox_bin"
}

need_python_yaml() {
  python3 -c 'import yaml' 2>/dev/null && return
  log "installing python3-yaml"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-yaml >/dev/null ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-yaml >/dev/null; } ||
    die "python3 yaml module missing"
}

# The Cluster API managers' webhook servers listen on every interface (no flag
# to bind them). In a private network namespace (only lo) nothing is reachable
# from outside; where unshare is not permitted the run stays in the host's.
in_private_network() {
  [[ ${E2E_NETNS:-} == private ]]
}

# reexec_in_private_network [INSIDE]: run `run INSIDE` (default scenario-inside) in a private
# network namespace, or return to go on in the host's where that is not possible.
reexec_in_private_network() {
  local why= inside=${1:-scenario-inside}
  if [[ ${E2E_NETNS:-} == host ]]; then
    why="E2E_NETNS=host"
  elif ! command -v ip >/dev/null; then
    why="no ip command"
  elif ! unshare -n true 2>/dev/null; then
    why="unshare -n not permitted"
  fi
  if [[ -n $why ]]; then
    log "staying in the host's network namespace ($why): the webhook servers listen on all interfaces"
    export E2E_NETNS=host
    return
  fi
  log "entering a private network namespace (loopback only)"
  # shellcheck disable=SC2016 # $0 is expanded by the inner bash
  E2E_NETNS=private capmox_bin=$capmox_bin exec unshare -n -- \
    bash -c 'ip link set lo up && exec "$0" "$1"' "$here/run" "$inside"
}

# ---------------------------------------------------------------------------
# capmox-apiserver, registered from deploy/

# Renders deploy/overlays/manual-certs as a local process needs it: no
# StatefulSet, the Service an ExternalName of 127.0.0.1, the APIServices on
# PORT with the harness CA, and the label clusterctl init adds to every object.
render_capmox_deploy() {
  local port=$1 dir=$run/deploy$tag
  mkdir -p "$dir"
  cat >"$dir/kustomization.yaml" <<EOF2
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- $(relative_to "$dir" "$repo/deploy/overlays/manual-certs")
labels:
- pairs:
    clusterctl.cluster.x-k8s.io: ""
patches:
- patch: |-
    \$patch: delete
    apiVersion: apps/v1
    kind: StatefulSet
    metadata: {name: $CAPMOX_SERVICE, namespace: $CAPMOX_NAMESPACE}
- target: {kind: Service, name: $CAPMOX_SERVICE}
  patch: |-
    - {op: replace, path: /spec, value: {type: ExternalName, externalName: 127.0.0.1}}
- target: {kind: APIService}
  patch: |-
    - {op: replace, path: /spec/service/port, value: $port}
    - {op: add, path: /spec/caBundle, value: $(base64 -w0 "$pki/ca.crt")}
EOF2
  kc kustomize "$dir"
}

# A kubeconfig with a token of the capmox-apiserver ServiceAccount: the server
# authenticates and authorizes with exactly the RBAC deploy/ grants it.
capmox_kubeconfig() {
  local out=$run/capmox$tag.kubeconfig token
  token=$(kc -n "$CAPMOX_NAMESPACE" create token "$CAPMOX_SERVICE" --duration 6h) ||
    die "cannot create a token for the capmox-apiserver ServiceAccount"
  "$KUBECTL" --kubeconfig "$out" config set-cluster mgmt --server "https://127.0.0.1:$kas_port" \
    --certificate-authority "$pki/ca.crt" --embed-certs >/dev/null
  "$KUBECTL" --kubeconfig "$out" config set-credentials capmox-apiserver --token "$token" >/dev/null
  "$KUBECTL" --kubeconfig "$out" config set-context mgmt --cluster mgmt --user capmox-apiserver >/dev/null
  "$KUBECTL" --kubeconfig "$out" config use-context mgmt >/dev/null
  printf '%s' "$out"
}

start_capmox() {
  capmox_port=$(free_port)
  render_capmox_deploy "$capmox_port" >"$run/deploy$tag.yaml" || die "kustomize of deploy/ failed"
  kc apply --server-side --field-manager capmox-e2e -f "$run/deploy$tag.yaml" >/dev/null
  run_capmox
}

# serve on $capmox_port with its data in the run dir, once deploy/ is applied (its
# ServiceAccount, RBAC and APIServices), as the StatefulSet's pod would start.
run_capmox() {
  local config
  config=$(capmox_kubeconfig)
  start_process "capmox-apiserver$tag" env "${controller_env[@]}" "$capmox_bin" serve "${controller_flags[@]}" \
    --bind-address 127.0.0.1 --secure-port "$capmox_port" \
    --tls-cert-file "$pki/capmox-serving.crt" --tls-private-key-file "$pki/capmox-serving.key" \
    --data-dir "$run/capmox-data$tag" \
    --authentication-kubeconfig "$config" --authorization-kubeconfig "$config"
  wait_until 60 "${pids[-1]}" "capmox-apiserver$tag" curl -fsS --cacert "$pki/ca.crt" \
    --resolve "$CAPMOX_SERVICE.$CAPMOX_NAMESPACE.svc:$capmox_port:127.0.0.1" \
    "https://$CAPMOX_SERVICE.$CAPMOX_NAMESPACE.svc:$capmox_port/readyz"
  kc wait --for condition=Available --timeout 60s \
    apiservice/v1alpha1.$INFRA_GROUP apiservice/v1alpha2.$INFRA_GROUP >/dev/null ||
    die "APIServices not Available: $(kc get apiservice v1alpha2.$INFRA_GROUP -o jsonpath='{.status.conditions}')"
  log "capmox-apiserver$tag registered on port $capmox_port, APIServices v1alpha1/v1alpha2 Available"
}

# ---------------------------------------------------------------------------
# Cluster API providers: components from config/default, managers as processes

# provider label, binary, kustomize dir, health flag
provider_specs() {
  local capi ipam
  capi=$(module_info "$CAPI_MODULE@$CAPI_VERSION" '{{.Dir}}')
  [[ ! -x $bin/capi-ipam-in-cluster-manager ]] || ipam=$(module_info "$IPAM_MODULE@$IPAM_VERSION" '{{.Dir}}')
  cat <<EOF2
cluster-api capi-manager $capi/config/default --health-addr
bootstrap-kubeadm capi-kubeadm-bootstrap-manager $capi/bootstrap/kubeadm/config/default --health-addr
control-plane-kubeadm capi-kubeadm-control-plane-manager $capi/controlplane/kubeadm/config/default --health-addr
EOF2
  [[ ! -x $bin/capi-ipam-in-cluster-manager ]] ||
    echo "ipam-in-cluster capi-ipam-in-cluster-manager $ipam/config/default --health-probe-bind-address"
}

# PROVIDER BINARY DIR HEALTH_FLAG: a provider's components (config/default of its module) as
# clusterctl would install them, its manager as a process with webhooks on loopback.
start_provider() {
  local provider=$1 binary=$2 dir=$3 health_flag=$4 port health flags
  need "$binary"
  port=$(free_port)
  health=$(free_port)
  kc kustomize "$dir" 2>>"$run/kustomize.log" | python3 "$here/components.py" "$provider" "$port" "$pki/ca.crt" \
    >"$run/$provider$tag.json" || die "rendering $provider components failed"
  kc apply --server-side --field-manager clusterctl -f "$run/$provider$tag.json" >/dev/null ||
    die "applying $provider components failed"
  # The admin kubeconfig (system:masters): the managers' own RBAC from
  # config/rbac is installed but not what they authenticate with.
  case $provider in
    # Sidero Labs' managers: no leader election by default, tls.crt and tls.key by name.
    *-talos) flags=() ;;
    # ClusterTopology: the ClusterClass scenario (KCP's template webhook needs it as well).
    ipam-in-cluster) flags=(--leader-elect=false --webhook-cert-name tls.crt --webhook-key-name tls.key) ;;
    *) flags=(--leader-elect=false --webhook-cert-name tls.crt --webhook-key-name tls.key
      --feature-gates ClusterTopology=true) ;;
  esac
  start_process "$binary$tag" "$bin/$binary" --kubeconfig "$kubeconfig" "${flags[@]}" \
    --webhook-port "$port" --webhook-cert-dir "$pki/webhook" "$health_flag" "127.0.0.1:$health" \
    --diagnostics-address "127.0.0.1:$(free_port)" --insecure-diagnostics
  wait_until 90 "${pids[-1]}" "$binary$tag" curl -fsS "http://127.0.0.1:$health/readyz"
}

start_providers() {
  local provider binary dir health_flag port specs
  specs=$(provider_specs) || die "Cluster API module source not available"
  while read -r provider binary dir health_flag; do
    start_provider "$provider" "$binary" "$dir" "$health_flag"
  done <<<"$specs"
  kc wait --for condition=Established --timeout 60s crd --all >/dev/null
  need kube-controller-manager
  port=$(free_port)
  # Only the garbage collector: it removes what CAPI leaves to owner references
  # (templates owned by the Cluster, IP claims owned by ProxmoxMachines).
  start_process "kube-controller-manager$tag" "$bin/kube-controller-manager" \
    --kubeconfig "$kubeconfig" --controllers garbagecollector --leader-elect=false \
    --bind-address 127.0.0.1 --secure-port "$port" \
    --authentication-kubeconfig "$kubeconfig" --authorization-kubeconfig "$kubeconfig"
  wait_until 60 "${pids[-1]}" "kube-controller-manager$tag" curl -fsS -k "https://127.0.0.1:$port/healthz"
  install_inventory
}

# What clusterctl init records: its Provider CRD and one Provider per provider.
install_inventory() {
  local capi
  capi=$(module_info "$CAPI_MODULE@$CAPI_VERSION" '{{.Dir}}')
  kc apply --server-side --field-manager clusterctl -f "$capi/cmd/clusterctl/config/manifest/clusterctl-api.yaml" >/dev/null
  kc wait --for condition=Established --timeout 60s crd/providers.clusterctl.cluster.x-k8s.io >/dev/null
  {
    inventory_entry cluster-api capi-system CoreProvider cluster-api "$CAPI_VERSION"
    inventory_entry bootstrap-kubeadm capi-kubeadm-bootstrap-system BootstrapProvider kubeadm "$CAPI_VERSION"
    inventory_entry control-plane-kubeadm capi-kubeadm-control-plane-system ControlPlaneProvider kubeadm "$CAPI_VERSION"
    [[ ! -x $bin/capi-ipam-in-cluster-manager ]] ||
      inventory_entry ipam-in-cluster capi-ipam-in-cluster-system IPAMProvider in-cluster "$IPAM_VERSION"
    inventory_entry infrastructure-proxmox "$CAPMOX_NAMESPACE" InfrastructureProvider proxmox "$capmox_version"
  } | kc apply --server-side --field-manager clusterctl -f - >/dev/null
}

inventory_entry() { # NAME NAMESPACE TYPE PROVIDER_NAME VERSION
  cat <<EOF2
---
apiVersion: clusterctl.cluster.x-k8s.io/v1alpha3
kind: Provider
metadata:
  name: $1
  namespace: $2
  labels: {clusterctl.cluster.x-k8s.io: "", cluster.x-k8s.io/provider: $1}
type: $3
providerName: $4
version: $5
EOF2
}

# Our APIService has taken the name kube-aggregator gave the CRD version.
ours_registered() {
  [[ $(kc get apiservice "v1alpha2.$INFRA_GROUP" -o jsonpath='{.spec.service.name}' 2>/dev/null) == "$CAPMOX_SERVICE" ]]
}

# deploy/migrate-from-upstream with ARGS into this cluster's data dir (docs/migration.md), its
# output in LOG; capmox-apiserver starts once the script has applied deploy/, as the
# StatefulSet's pod would.
migrate_and_serve() { # LOG ARGS...
  local log=$1 script
  shift
  "$repo/deploy/migrate-from-upstream" --kubeconfig "$kubeconfig" --manifests "$run/deploy$tag.yaml" \
    --capmox-bin "$capmox_bin" --work-dir "$run/migration$tag" --import-into "--data-dir $run/capmox-data$tag" \
    --backup "$run/cotenants-backup$tag.json" "$@" >"$log" 2>&1 &
  script=$!
  until ours_registered; do
    kill -0 "$script" 2>/dev/null || { wait "$script" || true; die "migrate-from-upstream: $(tail -n 8 "$log")"; }
    sleep 1
  done
  run_capmox
  wait "$script" || die "migrate-from-upstream: $(tail -n 8 "$log")"
}

# One management cluster: control plane, capmox-apiserver, providers. With COTENANT_FIRST=1,
# another provider's CRDs and an object of theirs are there before capmox-apiserver, which is
# installed by deploy/migrate-from-upstream (install_cotenant_first).
start_management_cluster() {
  tag=$1
  start_etcd
  start_kube_apiserver
  write_kubeconfig
  ((${COTENANT_FIRST:-0})) && install_cotenant_first
  if ((${COTENANT_FIRST:-0})); then
    capmox_port=$(free_port)
    render_capmox_deploy "$capmox_port" >"$run/deploy$tag.yaml" || die "kustomize of deploy/ failed"
    migrate_and_serve "$run/migration$tag.log"
    check_cotenant_first
  else
    start_capmox
  fi
  start_providers
  log "management cluster $(name=${tag#-} && echo "${name:-a}") ready: $kubeconfig"
}

# CAPK's CRDs and a KubevirtCluster before capmox-apiserver: kube-aggregator makes an
# automanaged APIService for v1alpha1, which ours (labelled automanaged "false") must take over
# for good; deploy/migrate-from-upstream, without upstream here, moves the KubevirtCluster in
# with its uid, and ours serves CAPK's kinds from their CRDs (docs/deploy.md, "Other providers
# in our group-versions"). Nothing when the module proxy did not give CAPK's CRDs.
install_cotenant_first() {
  local dir
  dir=$(grep -o '[^ ]*cluster-api-provider-kubevirt[^ ]*' <<<"${COTENANT_CRDS:-}") || {
    log "co-tenant first: skipped, no CAPK CRDs (named above)"
    COTENANT_FIRST=0
    return 0
  }
  kc apply --server-side --field-manager capmox-e2e -f "$dir" >/dev/null
  kc wait --for condition=Established --timeout 60s "crd/kubevirtclusters.$INFRA_GROUP" >/dev/null
  wait_until 30 "$(pid_of "kube-apiserver$tag")" "kube-aggregator's APIService for CAPK's CRDs" \
    eval "[[ \$(kc get apiservice v1alpha1.$INFRA_GROUP -o jsonpath='{.metadata.labels.kube-aggregator\.kubernetes\.io/automanaged}') == true ]]"
  printf '%s\n' "apiVersion: $INFRA_GROUP/v1alpha1" "kind: KubevirtCluster" \
    "metadata: {name: kv, namespace: default, labels: {e2e: moved-in}}" \
    "spec: {controlPlaneEndpoint: {host: 10.0.0.9, port: 6443}}" | kc create -f - >/dev/null
  cotenant_uid=$(kc get "kubevirtclusters.$INFRA_GROUP" kv -o jsonpath='{.metadata.uid}')
}

check_cotenant_first() {
  local out
  sleep 5 # kube-aggregator's autoregister controller would put its spec back within this
  out=$(kc get apiservice "v1alpha1.$INFRA_GROUP" \
    -o jsonpath='{.spec.service.name} {.metadata.labels.kube-aggregator\.kubernetes\.io/automanaged}')
  [[ $out == "$CAPMOX_SERVICE false" ]] ||
    die "co-tenant first: v1alpha1.$INFRA_GROUP is not ours after the install: $out"
  # kubectl maps the name through kube-aggregator's copy of our discovery, which it refetches
  # once a minute: a copy taken before our CRD informer listed lacks the kind until then.
  poll 90 "co-tenant first: ours serves CAPK's KubevirtCluster beside its own kinds in v1alpha1" eval \
    "kc get --raw /apis/$INFRA_GROUP/v1alpha1 | grep -q '\"kubevirtclusters\"' &&
     kc get --raw /apis/$INFRA_GROUP/v1alpha1 | grep -q '\"proxmoxclusters\"' &&
     kc get --raw /apis/$INFRA_GROUP/v1alpha1/namespaces/default/kubevirtclusters >/dev/null &&
     kc get kubevirtclusters.$INFRA_GROUP kv >/dev/null"
  out=$(kc get "kubevirtclusters.$INFRA_GROUP" kv -o jsonpath='{.metadata.uid} {.metadata.labels.e2e}')
  [[ $out == "$cotenant_uid moved-in" ]] ||
    die "co-tenant first: the KubevirtCluster did not move in with its uid ($cotenant_uid): $out"
  grep -q "\"uid\": \"$cotenant_uid\"" "$run/cotenants-backup$tag.json" ||
    die "co-tenant first: the install's backup lacks the KubevirtCluster"
  log "co-tenant first: its KubevirtCluster moved in with its uid, served by ours, and is in the install's backup"
}

# uninstall_capmox TAG KUBECONFIG [ARGS...]: deploy/uninstall with ARGS on that management
# cluster, whose server is the process capmox-apiserver$TAG (not deploy/'s StatefulSet: it is
# stopped by its PID); its backup, work dir and log in the run dir, named with TAG. Then our
# APIService routes to no service any more.
uninstall_capmox() {
  local tag=$1 config=$2 server
  shift 2
  server=$(pid_of "capmox-apiserver$tag")
  "$repo/deploy/uninstall" --kubeconfig "$config" --backup "$run/uninstall-backup$tag.json" \
    --work-dir "$run/uninstall$tag" --stop-server "kill $server; while kill -0 $server 2>/dev/null; do sleep 0.2; done" \
    "$@" >"$run/uninstall$tag.log" 2>&1 || die "deploy/uninstall$tag failed: $(tail -n 8 "$run/uninstall$tag.log")"
  [[ -z $(kx "$config" get apiservice "v1alpha1.$INFRA_GROUP" -o jsonpath='{.spec.service.name}') ]] ||
    die "after deploy/uninstall$tag: v1alpha1.$INFRA_GROUP still routes to a service"
}

# Last, deploy/uninstall on b (docs/migration.md, "The way back"): the KubevirtCluster that
# moved in, changed through ours since, is served by kube-apiserver again with its uid and the
# change (an update of kube's own copy); ours no longer holds the group-versions.
uninstall_b() {
  local out start=$SECONDS
  kx "$b_kubeconfig" label "kubevirtclusters.$INFRA_GROUP" kv e2e=changed-through-ours --overwrite >/dev/null
  uninstall_capmox -b "$b_kubeconfig" --quiet-seconds 2
  out=$(kx "$b_kubeconfig" get --raw "/apis/$INFRA_GROUP/v1alpha1/namespaces/default/kubevirtclusters/kv" |
    python3 -c 'import json, sys; m = json.load(sys.stdin)["metadata"]; print(m["uid"], m["labels"]["e2e"])')
  [[ $out == "$cotenant_uid changed-through-ours" ]] ||
    die "after deploy/uninstall on b: the KubevirtCluster should keep its uid $cotenant_uid and the label set through ours: $out"
  log "deploy/uninstall on b ($((SECONDS - start)) s): the KubevirtCluster served by kube-apiserver again, its uid kept, the change made through ours in it"
}

# ---------------------------------------------------------------------------
# Step 2: our kinds through kube-apiserver with kubectl

api_check() { # PORT: the ProxmoxCluster the API checks apply, with its endpoint on PORT
  cat <<EOF2
apiVersion: $INFRA_GROUP/v1alpha2
kind: ProxmoxCluster
metadata: {name: api-check}
spec:
  controlPlaneEndpoint: {host: 10.0.0.10, port: $1}
  ipv4Config: {addresses: [10.0.0.20-10.0.0.30], prefix: 24, gateway: 10.0.0.1}
  dnsServers: [10.0.0.1]
EOF2
}

check_api_through_aggregator() {
  local ns=e2e-api out events watcher
  out=$(kc api-resources --api-group "$INFRA_GROUP" -o name | sort | tr '\n' ' ')
  [[ $out == "proxmoxclusters.$INFRA_GROUP proxmoxclustertemplates.$INFRA_GROUP proxmoxkubernetesreleases.$INFRA_GROUP proxmoxmachines.$INFRA_GROUP proxmoxmachinetemplates.$INFRA_GROUP " ]] ||
    die "api-resources for $INFRA_GROUP: $out"
  kc create namespace "$ns" >/dev/null
  # A watch first, so that every later change must arrive as an event.
  events=$run/watch-events.txt
  spawn "$KUBECTL" --kubeconfig "$kubeconfig" -n "$ns" get proxmoxclusters -w --output-watch-events \
    -o jsonpath='{.type} {.object.metadata.name} {.object.spec.controlPlaneEndpoint.port}{"\n"}' >"$events" 2>"$run/watch.log"
  watcher=${pids[-1]}
  sleep 1
  api_check 6443 | kc -n "$ns" apply -f - >/dev/null || die "kubectl apply (client-side) of a ProxmoxCluster failed"
  out=$(kc -n "$ns" get proxmoxcluster api-check -o jsonpath='{.metadata.annotations.kubectl\.kubernetes\.io/last-applied-configuration}')
  [[ $out == *api-check* ]] || die "client-side apply left no last-applied annotation"
  # The same manifest, changed, applied server-side (kubectl migrates the
  # client-side field ownership to its manager); the manager must show up in
  # managedFields.
  api_check 7443 | kc -n "$ns" apply --server-side -f - >"$run/ssa.out" 2>&1 || die "kubectl apply --server-side failed: $(cat "$run/ssa.out")"
  ! grep -qi warning "$run/ssa.out" || die "kubectl apply --server-side warned: $(cat "$run/ssa.out")"
  out=$(kc -n "$ns" get proxmoxcluster api-check -o jsonpath='{.spec.controlPlaneEndpoint.port} {range .metadata.managedFields[*]}{.manager}/{.operation} {end}')
  # kubectl moved the client-side apply ownership to its SSA managers.
  [[ $out == "7443 "*" kubectl/Apply "* && $out != *kubectl-client-side-apply* ]] ||
    die "server-side apply (port, managers): $out"
  # Read back at the other version (conversion in the server).
  out=$(kc -n "$ns" get proxmoxclusters.v1alpha1.$INFRA_GROUP api-check -o jsonpath='{.apiVersion} {.spec.controlPlaneEndpoint.port}')
  [[ $out == "$INFRA_GROUP/v1alpha1 7443" ]] || die "v1alpha1 read: $out"
  kc -n "$ns" delete proxmoxcluster api-check --wait=true --timeout 30s >/dev/null || die "delete failed"
  poll 30 "watch delivered ADDED, MODIFIED and DELETED" \
    grep -qx 'DELETED api-check 7443' "$events"
  if ! grep -qx 'ADDED api-check 6443' "$events" || ! grep -qx 'MODIFIED api-check 7443' "$events"; then
    die "watch events: $(cat "$events")"
  fi
  kill "$watcher" 2>/dev/null || true
  out=$(kc explain proxmoxmachines.spec.network --api-version "$INFRA_GROUP/v1alpha2") || die "kubectl explain failed"
  [[ $out == *"KIND:"*"ProxmoxMachine"* && $out == *networkDevices* ]] || die "kubectl explain output: $out"
  # Through kube-apiserver a user without RBAC is refused by kube-apiserver's own
  # authorizer before the request is proxied.
  out=$(kc -n "$ns" get proxmoxclusters --as e2e-nobody 2>&1) && die "e2e-nobody may list proxmoxclusters"
  [[ $out == *'cannot list resource "proxmoxclusters"'* ]] || die "unexpected answer for e2e-nobody: $out"
  check_delegated_authorization
  log "kubectl: api-resources, apply, apply --server-side, v1alpha1 read, get -w events, explain, RBAC refusal ok"
}

# Our server's own SubjectAccessReview: a client certificate from the cluster CA
# goes straight to capmox-apiserver (kube-apiserver cannot refuse it first).
check_delegated_authorization() {
  local user out path=/apis/$INFRA_GROUP/v1alpha2/proxmoxclusters
  for user in e2e-nobody e2e-viewer; do
    new_cert "$user" ca client "/CN=$user"
  done
  kc create clusterrolebinding e2e-viewer --clusterrole capmox-view --user e2e-viewer >/dev/null
  direct_get() {
    curl -sS -o "$run/direct.json" -w '%{http_code}' --cacert "$pki/ca.crt" \
      --cert "$pki/$1.crt" --key "$pki/$1.key" \
      --resolve "$CAPMOX_SERVICE.$CAPMOX_NAMESPACE.svc:$capmox_port:127.0.0.1" \
      "https://$CAPMOX_SERVICE.$CAPMOX_NAMESPACE.svc:$capmox_port$path"
  }
  out=$(direct_get e2e-nobody)
  if [[ $out != 403 ]] || ! grep -q 'e2e-nobody' "$run/direct.json"; then
    die "capmox-apiserver did not refuse e2e-nobody (HTTP $out): $(cat "$run/direct.json")"
  fi
  poll 30 "capmox-apiserver allows e2e-viewer (capmox-view) after its SubjectAccessReview" \
    test "$(direct_get e2e-viewer)" = 200
}

# ---------------------------------------------------------------------------
# Stand-ins for what has no process here. They act only through the APIs the
# real actors use, and only where the real actor would (after CAPI's owner
# references, after bootstrap data exist).
#
# - infrastructure: until the built-in controller runs in `serve`, marks a
#   ProxmoxCluster provisioned and gives a ProxmoxMachine a providerID
#   (proxmox://<uuid>) and provisioned status, as the controller would after
#   creating the VM.
# - workload cluster: a kube-apiserver at the control-plane endpoint, serving
#   with the cluster CA that KCP generated, holding the kubeadm-config ConfigMap
#   (what `kubeadm init` writes; KCP's "initialized" signal) and one Node per
#   Machine with its providerID (what the kubelets register; CAPI's nodeRef).

standins_active=0
standin_infrastructure=1
workload_kubeconfig=

standin_tick() {
  ((standins_active)) || return 0
  ((standin_infrastructure == 0)) || standin_provision
  standin_workload
}

IPAM=ipam.cluster.x-k8s.io
# Claims and addresses are Cluster API's; pools come with the in-cluster provider.
IPAM_KINDS=inclusterippools.$IPAM,ipaddressclaims.$IPAM,ipaddresses.$IPAM
ipam_provider=1

standin_provision() {
  local name provisioned owner provider_id uid cluster secret address
  while IFS='|' read -r name provisioned owner uid; do
    [[ -n $name && $provisioned != true && -n $owner ]] || continue
    ((ipam_provider == 0)) || standin_node_pool "$name" "$uid" || continue
    kc -n "$CLUSTER_NAMESPACE" patch proxmoxcluster "$name" --subresource status --type merge \
      -p '{"status":{"initialization":{"provisioned":true}}}' >/dev/null
  done < <(kc -n "$CLUSTER_NAMESPACE" get proxmoxclusters -o \
    jsonpath='{range .items[*]}{.metadata.name}|{.status.initialization.provisioned}|{.metadata.ownerReferences[?(@.kind=="Cluster")].name}|{.metadata.uid}{"\n"}{end}' 2>/dev/null)
  while IFS='|' read -r name provider_id provisioned owner uid cluster; do
    [[ -n $name && -n $owner && $provisioned != true ]] || continue
    secret=$(kc -n "$CLUSTER_NAMESPACE" get machine "$owner" -o jsonpath='{.spec.bootstrap.dataSecretName}' 2>/dev/null) || continue
    [[ -n $secret ]] || continue
    if ((ipam_provider)); then
      address=$(standin_claimed_address "$name" "$uid" "$cluster") || continue
    else
      address=127.0.1.$((RANDOM % 40 + 10))
    fi
    [[ -n $provider_id ]] ||
      kc -n "$CLUSTER_NAMESPACE" patch proxmoxmachine "$name" --type merge \
        -p "{\"spec\":{\"providerID\":\"proxmox://$(cat /proc/sys/kernel/random/uuid)\"}}" >/dev/null || continue
    kc -n "$CLUSTER_NAMESPACE" patch proxmoxmachine "$name" --subresource status --type merge \
      -p "{\"status\":{\"initialization\":{\"provisioned\":true},\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"$address\"},{\"type\":\"Hostname\",\"address\":\"$name\"}]}}" >/dev/null
  done < <(kc -n "$CLUSTER_NAMESPACE" get proxmoxmachines -o \
    jsonpath='{range .items[*]}{.metadata.name}|{.spec.providerID}|{.status.initialization.provisioned}|{.metadata.ownerReferences[?(@.kind=="Machine")].name}|{.metadata.uid}|{.metadata.labels.cluster\.x-k8s\.io/cluster-name}{"\n"}{end}' 2>/dev/null)
}

# PROXMOXCLUSTER UID: the node pool the controller derives from ipv4Config
# (<cluster>-v4-icip, controller-owned by the ProxmoxCluster).
standin_node_pool() {
  local addresses prefix gateway
  IFS='|' read -r addresses prefix gateway < <(kc -n "$CLUSTER_NAMESPACE" get proxmoxcluster "$1" -o \
    jsonpath='{.spec.ipv4Config.addresses}|{.spec.ipv4Config.prefix}|{.spec.ipv4Config.gateway}{"\n"}')
  kc apply --server-side --field-manager capmox-standin -f - >/dev/null <<EOF2
apiVersion: $IPAM/v1alpha2
kind: InClusterIPPool
metadata:
  name: $1-v4-icip
  namespace: $CLUSTER_NAMESPACE
  labels: {topology.kubernetes.io/proxmox-zone: default}
  annotations: {ipam.capmox.cluster.x-k8s.io/ip-family: ipv4}
  ownerReferences:
  - {apiVersion: $INFRA_GROUP/v1alpha2, kind: ProxmoxCluster, name: $1, uid: $2, controller: true, blockOwnerDeletion: true}
spec: {addresses: $addresses, prefix: $prefix, gateway: $gateway}
EOF2
}

# PROXMOXMACHINE UID CLUSTER: the address of the machine's claim on the node
# pool, as the controller claims it (<machine>-net0-00-inet, owned by the
# ProxmoxMachine); creates the claim first, fails until it is bound.
standin_claimed_address() {
  local claim=$1-net0-00-inet ref
  if ! kc -n "$CLUSTER_NAMESPACE" get "ipaddressclaims.$IPAM" "$claim" >/dev/null 2>&1; then
    kc create -f - >/dev/null <<EOF2
apiVersion: $IPAM/v1beta2
kind: IPAddressClaim
metadata:
  name: $claim
  namespace: $CLUSTER_NAMESPACE
  labels: {cluster.x-k8s.io/cluster-name: $3}
  annotations: {ipam.capmox.cluster.x-k8s.io/pool-ref-counter: "0", ipam.capmox.cluster.x-k8s.io/default-gateway: "true"}
  ownerReferences:
  - {apiVersion: $INFRA_GROUP/v1alpha2, kind: ProxmoxMachine, name: $1, uid: $2, controller: true, blockOwnerDeletion: true}
spec:
  poolRef: {apiGroup: $IPAM, kind: InClusterIPPool, name: $3-v4-icip}
EOF2
    return 1
  fi
  ref=$(kc -n "$CLUSTER_NAMESPACE" get "ipaddressclaims.$IPAM" "$claim" -o jsonpath='{.status.addressRef.name}')
  [[ -n $ref ]] && kc -n "$CLUSTER_NAMESPACE" get "ipaddresses.$IPAM" "$ref" -o jsonpath='{.spec.address}'
}

standin_workload() {
  local endpoint name provider_id role
  if [[ -z $workload_kubeconfig ]]; then
    # The Cluster's endpoint, which Cluster API copies from the infrastructure cluster
    # (named after the Cluster, or generated by the topology controller).
    endpoint=$(kc -n "$CLUSTER_NAMESPACE" get cluster "$CLUSTER_NAME" \
      -o jsonpath='{.spec.controlPlaneEndpoint.host}:{.spec.controlPlaneEndpoint.port}' 2>/dev/null) || return 0
    [[ $endpoint != :* && $endpoint != *: ]] || return 0
    kc -n "$CLUSTER_NAMESPACE" get secret "$CLUSTER_NAME-ca" >/dev/null 2>&1 || return 0
    start_workload_apiserver "${endpoint%:*}" "${endpoint#*:}"
  fi
  while IFS='|' read -r name provider_id role; do
    [[ -n $provider_id ]] || continue
    kx "$workload_kubeconfig" get node "$name" >/dev/null 2>&1 && continue
    kx "$workload_kubeconfig" create -f - >/dev/null <<EOF2 || true
apiVersion: v1
kind: Node
metadata:
  name: $name
  labels: {kubernetes.io/hostname: $name${role:+, node-role.kubernetes.io/control-plane: ""}}
spec: {providerID: "$provider_id"}
EOF2
    # Healthy, as its kubelet would report it: Machines count as available (a MachineSet
    # rolls over only once the new ones are) when their node is.
    kx "$workload_kubeconfig" patch node "$name" --subresource status --type merge \
      -p "$(node_conditions)" >/dev/null || true
    [[ -z $role ]] || ((standin_static_pods == 0)) || standin_static_pods_of "$name"
  done < <(kc -n "$CLUSTER_NAMESPACE" get machines -o \
    jsonpath='{range .items[*]}{.metadata.name}|{.spec.providerID}|{.metadata.labels.cluster\.x-k8s\.io/control-plane-name}{"\n"}{end}' 2>/dev/null)
}

# The status conditions of a healthy node, as a merge patch.
node_conditions() {
  local now type status conditions=
  now=$(date -u +%FT%TZ)
  for type in Ready:True MemoryPressure:False DiskPressure:False PIDPressure:False; do
    status=${type#*:} type=${type%%:*}
    conditions+="${conditions:+,}{\"type\":\"$type\",\"status\":\"$status\",\"reason\":\"StandIn\",\"lastHeartbeatTime\":\"$now\",\"lastTransitionTime\":\"$now\"}"
  done
  echo "{\"status\":{\"conditions\":[$conditions]}}"
}

# With standin_static_pods=1, a control-plane node also gets what its kubelet would publish:
# the mirror pods of kube-apiserver, kube-controller-manager and kube-scheduler, Running and
# Ready. KCP reads them (ControlPlaneComponentsHealthy) before it adds a control-plane machine.
standin_static_pods=0
standin_static_pods_of() { # NODE
  local component
  for component in kube-apiserver kube-controller-manager kube-scheduler; do
    # Kept from a node of that name registered before (nothing collects pods here).
    kx "$workload_kubeconfig" create -f - >/dev/null 2>&1 <<EOF2 || true
apiVersion: v1
kind: Pod
metadata:
  name: $component-$1
  namespace: kube-system
  labels: {component: $component, tier: control-plane}
  annotations: {kubernetes.io/config.mirror: stand-in}
spec:
  nodeName: $1
  containers: [{name: $component, image: $component:stand-in}]
EOF2
    kx "$workload_kubeconfig" -n kube-system patch pod "$component-$1" --subresource status --type merge \
      -p '{"status":{"phase":"Running","conditions":[{"type":"PodScheduled","status":"True"},{"type":"Initialized","status":"True"},{"type":"Ready","status":"True"}]}}' >/dev/null || true
  done
}

start_workload_apiserver() {
  local host=$1 port=$2 dir=$run/workload$tag
  mkdir -p "$dir"
  kc -n "$CLUSTER_NAMESPACE" get secret "$CLUSTER_NAME-ca" -o jsonpath='{.data.tls\.crt}' | base64 -d >"$dir/ca.crt"
  kc -n "$CLUSTER_NAMESPACE" get secret "$CLUSTER_NAME-ca" -o jsonpath='{.data.tls\.key}' | base64 -d >"$dir/ca.key"
  (
    pki=$dir
    new_cert apiserver ca server /CN=kube-apiserver "IP:$host, DNS:localhost"
    new_cert admin ca client "/O=system:masters/CN=e2e-workload-admin"
  )
  start_process "workload-apiserver$tag" "$bin/kube-apiserver" \
    --bind-address "$host" --advertise-address "$host" --secure-port "$port" \
    --etcd-servers "http://127.0.0.1:$a_etcd_port" --etcd-prefix "/workload$tag" \
    --tls-cert-file "$dir/apiserver.crt" --tls-private-key-file "$dir/apiserver.key" \
    --client-ca-file "$dir/ca.crt" --authorization-mode RBAC \
    --service-cluster-ip-range 10.97.0.0/16 \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
    --endpoint-reconciler-type none --profiling=false
  wait_until 120 "${pids[-1]}" "workload-apiserver$tag" curl -fsS --cacert "$dir/ca.crt" \
    --cert "$dir/admin.crt" --key "$dir/admin.key" "https://$host:$port/readyz"
  workload_kubeconfig=$dir/admin.kubeconfig
  kx "$workload_kubeconfig" config set-cluster workload --server "https://$host:$port" \
    --certificate-authority "$dir/ca.crt" --embed-certs >/dev/null
  kx "$workload_kubeconfig" config set-credentials admin --client-certificate "$dir/admin.crt" \
    --client-key "$dir/admin.key" --embed-certs >/dev/null
  kx "$workload_kubeconfig" config set-context workload --cluster workload --user admin >/dev/null
  kx "$workload_kubeconfig" config use-context workload >/dev/null
  kx "$workload_kubeconfig" create -f - >/dev/null <<EOF2
apiVersion: v1
kind: ConfigMap
metadata: {name: kubeadm-config, namespace: kube-system}
data:
  ClusterConfiguration: |
    apiVersion: kubeadm.k8s.io/v1beta4
    kind: ClusterConfiguration
    kubernetesVersion: $KUBERNETES_VERSION
    controlPlaneEndpoint: $host:$port
EOF2
  log "workload cluster stand-in at https://$host:$port (cluster CA from $CLUSTER_NAME-ca)"
}

# ---------------------------------------------------------------------------
# The built-in controller, when `serve` runs it: VMs on a Proxmox VE simulator
# (one for both management clusters, as one real Proxmox VE would be), node IPs
# and the control-plane VIP claimed from the in-cluster IPAM provider.

controller_mode=0
VIP_POOL=capmox-vips
# What `serve` gets for its controller (set by enable_controller).
controller_env=()
controller_flags=()

# start_pve_sim [PROFILE [NAME]]: a simulator (fast by default) whose requests NAME's log
# records (pve-requests-NAME.jsonl in the run dir) when NAME is given.
start_pve_sim() {
  local port profile=${1:-fast} name=${2:-} log=()
  port=$(free_port)
  pve_secret=$(openssl rand -hex 16)
  pve_ca=$run/pve-ca${name:+-$name}.pem
  [[ -z $name ]] || log=(--request-log "$run/pve-requests-$name.jsonl")
  start_process "pve-sim${name:+-$name}" "$capmox_bin" pve-sim --port "$port" --profile "$profile" \
    --token-secret "$pve_secret" --ca-out "$pve_ca" "${log[@]}"
  pve_url=https://127.0.0.1:$port
  # The environment both controllers (ours and upstream's) take their global credentials from.
  pve_credentials=("PROXMOX_URL=$pve_url" "PROXMOX_TOKEN=capmox@pve!capi" "PROXMOX_SECRET=$pve_secret"
    PROXMOX_INSECURE=false)
  wait_until 30 "${pids[-1]}" pve-sim curl -fsS --cacert "$pve_ca" "$pve_url/_sim/state"
}

# The VMIDs of the simulator's VMs that are not templates, sorted.
pve_vms() {
  curl -fsS --cacert "$pve_ca" "$pve_url/_sim/state" | python3 -c '
import json, sys
print(" ".join(sorted(str(v["vmid"]) for v in json.load(sys.stdin)["vms"] if not v["template"])))'
}

# The VIP pool the vip-pool flavor names (an admin creates it, docs/deploy.md),
# on both management clusters: it is cluster-scoped, clusterctl move does not
# carry it.
create_vip_pool() { # KUBECONFIG
  kx "$1" apply --server-side --field-manager capmox-e2e -f - >/dev/null <<EOF2
apiVersion: $IPAM/v1alpha2
kind: GlobalInClusterIPPool
metadata: {name: $VIP_POOL}
spec: {addresses: [$vip], prefix: 24, gateway: ${vip%.*}.1}
EOF2
}

# Machines report InfrastructureReady with proxmox:// providerIDs, and one
# running VM per ProxmoxMachine exists on the simulator.
machines_on_proxmox() { # [COUNT, default 2]
  local out vms vmid count=${1:-2}
  out=$(kc -n "$CLUSTER_NAMESPACE" get machines -o \
    jsonpath='{range .items[*]}{.metadata.name}|{.spec.providerID}|{.status.conditions[?(@.type=="InfrastructureReady")].status}{"\n"}{end}')
  [[ $(grep -c '|proxmox://[^|]*|True$' <<<"$out") == "$count" ]] || { echo "Machines: $out"; return 1; }
  vms=" $(pve_vms) "
  # During the failure-domains step, rack-c's VM is in the second simulator.
  [[ -z ${pve_b_url:-} ]] || vms+="$(pve_url=$pve_b_url pve_ca=$pve_b_ca pve_vms) "
  for vmid in $(kc -n "$CLUSTER_NAMESPACE" get proxmoxmachines -o jsonpath='{.items[*].spec.virtualMachineID}'); do
    [[ $vms == *" $vmid "* ]] || { echo "VM $vmid not on the simulator ($vms)"; return 1; }
  done
  [[ $(wc -w <<<"$vms") == "$count" ]] || { echo "simulator VMs: $vms"; return 1; }
}

# The ProxmoxCluster's endpoint is the address claimed from the VIP pool by a
# claim it owns.
vip_claimed() {
  local uid host claim address
  IFS='|' read -r uid host < <(kc -n "$CLUSTER_NAMESPACE" get proxmoxcluster "$CLUSTER_NAME" -o \
    jsonpath='{.metadata.uid}|{.spec.controlPlaneEndpoint.host}{"\n"}')
  claim=$(kc -n "$CLUSTER_NAMESPACE" get "ipaddressclaims.$IPAM" -o \
    jsonpath="{range .items[?(@.spec.poolRef.name==\"$VIP_POOL\")]}{.metadata.name}|{.metadata.ownerReferences[0].uid}|{.status.addressRef.name}{\"\\n\"}{end}")
  [[ $claim == *"|$uid|"?* ]] || { echo "VIP claim: $claim (ProxmoxCluster uid $uid)"; return 1; }
  address=$(kc -n "$CLUSTER_NAMESPACE" get "ipaddresses.$IPAM" "${claim##*|}" -o jsonpath='{.spec.address}')
  [[ -n $host && $host == "$address" && $host == "$vip" ]] || { echo "endpoint $host, claimed $address"; return 1; }
}

# Runs the controller of `serve` against the simulator when the IPAM provider
# (node IPs, VIP) was built; otherwise `--controller=false` and the
# infrastructure stand-in acts.
configure_controller() {
  if ! "$capmox_bin" serve --help 2>/dev/null | grep -q -- '--controller '; then
    log "serve runs no built-in controller: the infrastructure stand-in acts for it"
    return
  fi
  if ((ipam_provider == 0)); then
    log "serve runs with --controller=false (the controller needs the IPAM provider): the stand-in acts"
    controller_flags=(--controller=false)
    return
  fi
  start_pve_sim
  serve_uses_pve_sim
}

# serve's controller on the simulator start_pve_sim started last.
serve_uses_pve_sim() {
  controller_mode=1
  # Global credentials, TLS verified against the simulator's CA. The
  # management kubeconfig defaults to --authentication-kubeconfig: the
  # controller works with the RBAC deploy/ grants the ServiceAccount.
  controller_env=("${pve_credentials[@]}")
  controller_flags=(--controller=true --proxmox-root-cert-file "$pve_ca")
  log "serve runs its controller against the Proxmox VE simulator at $pve_url"
}

no_vms_left() {
  local vms
  vms=$(pve_vms)
  [[ -z $vms ]] || { echo "VMs left on the simulator: $vms"; return 1; }
}

# ---------------------------------------------------------------------------
# Step 4: a cluster from our clusterctl provider repository

KUBERNETES_VERSION=v1.34.3
# Machines of the generated cluster (the controllers comparison asks for more).
cluster_control_plane=1
cluster_workers=1
# Boot disk size: every clone of the seed's template lands on pve1's 500 GB local-lvm.
boot_volume_gb=100

# A loopback address for the control-plane endpoint: in the private network
# namespace any is free; in the host's, one where port 6443 is free.
endpoint_ip() {
  local ip
  if in_private_network; then
    echo 127.0.0.2
    return
  fi
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    ip=127.$((RANDOM % 200 + 20)).$((RANDOM % 250 + 1)).$((RANDOM % 250 + 2))
    python3 -c 'import socket, sys; s=socket.socket(); s.bind((sys.argv[1], 6443))' "$ip" 2>/dev/null &&
      echo "$ip" && return
  done
  die "no loopback address with port 6443 free"
}

clusterctl_() { CLUSTERCTL_DISABLE_VERSIONCHECK=true XDG_CONFIG_HOME=$run/xdg "$bin/clusterctl" --config "$run/clusterctl.yaml" "$@"; }

# With the flavor vip-pool the controller claims the endpoint; static_endpoint=1 keeps
# CONTROL_PLANE_ENDPOINT_IP (all upstream supports).
static_endpoint=0

# COMMAND...: run with the variables the cluster templates (ours and upstream's) take.
with_cluster_variables() (
  export CONTROL_PLANE_ENDPOINT_IP=$vip CONTROL_PLANE_ENDPOINT_IP_POOL=$VIP_POOL \
    NODE_IP_RANGES='[127.0.1.10-127.0.1.50]' IP_PREFIX=24 \
    GATEWAY=127.0.1.1 DNS_SERVERS='[127.0.1.1]' VM_SSH_KEYS='ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE2e2e e2e' \
    PROXMOX_SOURCENODE=pve1 TEMPLATE_VMID=9000 BRIDGE=vmbr0 BOOT_VOLUME_DEVICE=scsi0 \
    CLUSTER_NAME KUBERNETES_VERSION MEMORY_MIB=4096 NUM_CORES=2 NUM_SOCKETS=1 \
    CONTROL_PLANE_MACHINE_COUNT=$cluster_control_plane WORKER_MACHINE_COUNT=$cluster_workers \
    BOOT_VOLUME_SIZE=$boot_volume_gb
  "$@"
)

# FLAVOR CONTROL_PLANE WORKERS: `clusterctl generate cluster` of our FLAVOR for CLUSTER_NAME in
# CLUSTER_NAMESPACE, with the scenario's variables, on standard output.
generate_flavor() {
  clusterctl_config
  with_cluster_variables clusterctl_ generate cluster "$CLUSTER_NAME" --kubeconfig "$kubeconfig" \
    --infrastructure "proxmox:$capmox_version" --target-namespace "$CLUSTER_NAMESPACE" \
    --kubernetes-version "$KUBERNETES_VERSION" --flavor "$1" \
    --control-plane-machine-count "$2" --worker-machine-count "$3"
}

# clusterctl's configuration: our provider from a local repository (a copy of deploy/clusterctl).
clusterctl_config() {
  local repository=$run/repository
  [[ -f $run/clusterctl.yaml ]] && return
  cp -r "$repo/deploy/clusterctl" "$repository"
  cat >"$run/clusterctl.yaml" <<EOF2
providers:
- name: proxmox
  type: InfrastructureProvider
  url: file://$repository/infrastructure-proxmox/$capmox_version/infrastructure-components.yaml
EOF2
}

generate_cluster() {
  clusterctl_config
  local flavor=()
  ((controller_mode == 0 || static_endpoint)) || flavor=(--flavor vip-pool)
  with_cluster_variables clusterctl_ generate cluster "$CLUSTER_NAME" --kubeconfig "$kubeconfig" \
    --infrastructure "proxmox:$capmox_version" --target-namespace "$CLUSTER_NAMESPACE" \
    --kubernetes-version "$KUBERNETES_VERSION" --control-plane-machine-count "$cluster_control_plane" \
    --worker-machine-count "$cluster_workers" \
    "${flavor[@]}" >"$run/cluster.yaml" || die "clusterctl generate cluster failed"
}

# A cluster of the default flavor (v1alpha1 can express all of it; the vip-pool flavor's
# endpoint pool it cannot) through `clusterctl capmox-convert` into v1alpha1: clusterctl finds
# our binary, linked as clusterctl-capmox_convert, on the PATH; every Proxmox object is
# converted, every other kept, and the server admits all of it (server-side dry run).
convert_with_clusterctl_plugin() {
  local plugins=$run/plugins proxmox converted
  mkdir -p "$plugins"
  ln -sf "$capmox_bin" "$plugins/clusterctl-capmox_convert"
  with_cluster_variables clusterctl_ generate cluster "$CLUSTER_NAME" --kubeconfig "$kubeconfig" \
    --infrastructure "proxmox:$capmox_version" --target-namespace "$CLUSTER_NAMESPACE" \
    --kubernetes-version "$KUBERNETES_VERSION" >"$run/cluster-default.yaml" ||
    die "clusterctl generate cluster (default flavor) failed"
  # Flags before a plugin's name stop clusterctl's plugin lookup: no --config here.
  PATH=$plugins:$PATH CLUSTERCTL_DISABLE_VERSIONCHECK=true XDG_CONFIG_HOME=$run/xdg "$bin/clusterctl" \
    capmox-convert -f "$run/cluster-default.yaml" --output-version "$INFRA_GROUP/v1alpha1" \
    >"$run/cluster-v1alpha1.yaml" || die "clusterctl capmox-convert failed"
  proxmox=$(grep -c "^kind: Proxmox" "$run/cluster-default.yaml")
  converted=$(grep -c "^apiVersion: $INFRA_GROUP/v1alpha1\$" "$run/cluster-v1alpha1.yaml")
  ((proxmox > 0 && converted == proxmox)) || die "clusterctl capmox-convert converted $converted of $proxmox Proxmox objects"
  [[ $(grep -c '^kind:' "$run/cluster-v1alpha1.yaml") == $(grep -c '^kind:' "$run/cluster-default.yaml") ]] ||
    die "clusterctl capmox-convert changed the number of objects"
  kc apply --dry-run=server -f "$run/cluster-v1alpha1.yaml" >/dev/null ||
    die "the server refused the cluster converted to v1alpha1"
  log "clusterctl capmox-convert: $converted Proxmox objects to v1alpha1, admitted by a server-side dry run"
}

# MANAGER: some ProxmoxMachine has an Apply entry of MANAGER in its managedFields.
applied_by() {
  kc -n "$CLUSTER_NAMESPACE" get proxmoxmachines -o \
    jsonpath='{range .items[*]}{range .metadata.managedFields[*]}{.manager}/{.operation}{"\n"}{end}{end}' |
    grep -qx "$1/Apply"
}

# KIND OWNER_KIND [COUNT]: every object of KIND (COUNT of them, if given) has an
# owner reference of OWNER_KIND carrying the owner's current uid (clusterctl
# move must rewrite them).
owned_by() {
  local name owner uid want count=0
  while IFS='|' read -r name owner uid; do
    [[ -n $name ]] || continue
    [[ -n $owner && -n $uid ]] || { echo "$1 $name has no $2 owner"; return 1; }
    want=$(kc -n "$CLUSTER_NAMESPACE" get "$2" "$owner" -o jsonpath='{.metadata.uid}') || return 1
    [[ $uid == "$want" ]] || { echo "$1 $name: owner uid $uid, $2 $owner has $want"; return 1; }
    count=$((count + 1))
  done < <(kc -n "$CLUSTER_NAMESPACE" get "$1" -o \
    jsonpath="{range .items[*]}{.metadata.name}|{.metadata.ownerReferences[?(@.kind==\"$2\")].name}|{.metadata.ownerReferences[?(@.kind==\"$2\")].uid}{\"\\n\"}{end}")
  ((count > 0 && (${3:-0} == 0 || count == ${3:-0}))) || { echo "$count $1 owned by a $2"; return 1; }
}

machines_have_node_refs() {
  local refs
  refs=$(kc -n "$CLUSTER_NAMESPACE" get machines -o jsonpath='{range .items[*]}{.metadata.name}={.status.nodeRef.name} {end}')
  [[ -n $refs && $refs != *'= '* ]] || { echo "nodeRefs: $refs"; return 1; }
  refs=$(kc -n "$CLUSTER_NAMESPACE" get cluster "$CLUSTER_NAME" -o \
    jsonpath='{.status.initialization.infrastructureProvisioned} {.status.initialization.controlPlaneInitialized}')
  [[ $refs == 'true true' ]] || { echo "Cluster infrastructureProvisioned, controlPlaneInitialized: $refs"; return 1; }
}

# addresses_from_claims [IN_RANGE]: every ProxmoxMachine's InternalIP is the address the IPAM
# provider allocated for the machine's claim (owned by that ProxmoxMachine) from the node range,
# which `IN_RANGE ADDRESS` tells (in_node_range, the scenario's, by default).
addresses_from_claims() {
  local in_range=${1:-in_node_range} name uid internal owner ref address count=0
  while IFS='|' read -r name uid internal; do
    [[ -n $name ]] || continue
    IFS='|' read -r owner ref < <(kc -n "$CLUSTER_NAMESPACE" get "ipaddressclaims.$IPAM" "$name-net0-00-inet" -o \
      jsonpath='{.metadata.ownerReferences[?(@.kind=="ProxmoxMachine")].uid}|{.status.addressRef.name}{"\n"}' 2>&1)
    [[ $owner == "$uid" && -n $ref ]] || { echo "claim of $name: owner $owner, address $ref"; return 1; }
    address=$(kc -n "$CLUSTER_NAMESPACE" get "ipaddresses.$IPAM" "$ref" -o jsonpath='{.spec.address}')
    [[ -n $internal && $address == "$internal" ]] || { echo "$name: InternalIP $internal, claimed $address"; return 1; }
    "$in_range" "$address" || { echo "$name: $address outside the node range"; return 1; }
    count=$((count + 1))
  done < <(kc -n "$CLUSTER_NAMESPACE" get proxmoxmachines -o \
    jsonpath='{range .items[*]}{.metadata.name}|{.metadata.uid}|{.status.addresses[?(@.type=="InternalIP")].address}{"\n"}{end}')
  ((count == 2)) || { echo "$count ProxmoxMachines with claimed addresses"; return 1; }
}

# The scenario's node range: 127.0.1.10 to 127.0.1.50.
in_node_range() {
  [[ $1 =~ ^127\.0\.1\.([0-9]+)$ ]] && ((BASH_REMATCH[1] >= 10 && BASH_REMATCH[1] <= 50))
}

ipam_objects() { # KUBECONFIG
  kx "$1" -n "$CLUSTER_NAMESPACE" get "$IPAM_KINDS" -o name | sort
}

# The IPAddresses of the VIP pool on a, as `kubectl get -o name` names them.
global_pool_addresses() {
  ((controller_mode)) || return 0
  kx "$a_kubeconfig" -n "$CLUSTER_NAMESPACE" get "ipaddresses.$IPAM" -o \
    jsonpath='{range .items[?(@.spec.poolRef.kind=="GlobalInClusterIPPool")]}ipaddress.ipam.cluster.x-k8s.io/{.metadata.name}{"\n"}{end}' | sort
}

provider_ids() { # KUBECONFIG
  kx "$1" -n "$CLUSTER_NAMESPACE" get proxmoxmachines -o jsonpath='{range .items[*]}{.metadata.name}={.spec.providerID} {end}'
}

proxmox_objects() { # KUBECONFIG
  kx "$1" -n "$CLUSTER_NAMESPACE" get "$PROXMOX_KINDS" -o name | sort
}

# Another provider's objects in the moved cluster (clusterctl move with both providers'
# objects). install_capk_for_move: CAPK's CRDs on both management clusters, labelled and in
# clusterctl's inventory as `clusterctl init --infrastructure kubevirt` leaves them (its manager
# is not needed: nothing is provisioned), before the cluster is applied, so that kubectl and
# clusterctl map CAPK's kinds on a by the time of the move (kube-aggregator refetches our
# discovery once a minute). kubevirt_in_cluster: a MachineDeployment of no replicas whose
# machines would be KubeVirt VMs, beside the Proxmox ones; its KubevirtMachineTemplate, served
# by ours from CAPK's CRD on both sides, moves with the Cluster.
install_capk_for_move() {
  local dir config crds
  dir=$(grep -o '[^ ]*cluster-api-provider-kubevirt[^ ]*' <<<"${COTENANT_CRDS:-}") || return 1
  for config in "$a_kubeconfig" "$b_kubeconfig"; do
    kx "$config" apply --server-side --field-manager clusterctl -f "$dir" >/dev/null
    crds=$(kx "$config" get crd -o name | grep "kubevirt.*\.$INFRA_GROUP\$")
    # clusterctl's labels, and the contract label CAPK's config/crd kustomization sets (Cluster
    # API reads a kind's version for its contract from it).
    # shellcheck disable=SC2086 # one argument per CRD
    kx "$config" label --overwrite $crds clusterctl.cluster.x-k8s.io= \
      cluster.x-k8s.io/provider=infrastructure-kubevirt cluster.x-k8s.io/v1beta1=v1alpha1 >/dev/null
    kx "$config" create namespace capk-system --dry-run=client -o yaml | kx "$config" apply -f - >/dev/null
    inventory_entry infrastructure-kubevirt capk-system InfrastructureProvider kubevirt v0.1.10 |
      kx "$config" apply --server-side --field-manager clusterctl -f - >/dev/null
  done
}

kubevirt_in_cluster() {
  poll 60 "kubectl maps CAPK's KubevirtMachineTemplate on a" \
    kc -n "$CLUSTER_NAMESPACE" get "kubevirtmachinetemplates.$INFRA_GROUP" -o name
  kc -n "$CLUSTER_NAMESPACE" apply -f - >/dev/null <<EOF2 || die "creating the KubeVirt MachineDeployment failed"
apiVersion: $INFRA_GROUP/v1alpha1
kind: KubevirtMachineTemplate
metadata: {name: $CLUSTER_NAME-kubevirt}
spec:
  template:
    spec:
      virtualMachineTemplate:
        spec:
          runStrategy: Once
          template: {spec: {domain: {devices: {}}}}
---
apiVersion: cluster.x-k8s.io/v1beta2
kind: MachineDeployment
metadata: {name: $CLUSTER_NAME-kubevirt}
spec:
  clusterName: $CLUSTER_NAME
  replicas: 0
  selector: {matchLabels: {}}
  template:
    spec:
      clusterName: $CLUSTER_NAME
      version: $KUBERNETES_VERSION
      bootstrap:
        configRef: {apiGroup: bootstrap.cluster.x-k8s.io, kind: KubeadmConfigTemplate, name: $CLUSTER_NAME-worker}
      infrastructureRef: {apiGroup: $INFRA_GROUP, kind: KubevirtMachineTemplate, name: $CLUSTER_NAME-kubevirt}
EOF2
  poll 60 "the KubevirtMachineTemplate owned by the Cluster, as its MachineDeployment makes it" \
    kubevirt_template_owned_by "$a_kubeconfig"
}

kubevirt_template_owned_by() { # KUBECONFIG: the template's owner is that cluster's Cluster
  local cluster owner
  cluster=$(kx "$1" -n "$CLUSTER_NAMESPACE" get cluster "$CLUSTER_NAME" -o jsonpath='{.metadata.uid}')
  owner=$(kx "$1" -n "$CLUSTER_NAMESPACE" get "kubevirtmachinetemplates.$INFRA_GROUP" "$CLUSTER_NAME-kubevirt" \
    -o jsonpath='{.metadata.ownerReferences[?(@.kind=="Cluster")].uid}')
  [[ -n $cluster && $owner == "$cluster" ]] || { echo "owner $owner, Cluster $cluster"; return 1; }
}

cluster_unpaused() {
  [[ $(kc -n "$CLUSTER_NAMESPACE" get cluster "$CLUSTER_NAME" -o jsonpath='{.spec.paused}') != true ]]
}

cluster_gone() {
  local left
  left=$(kc -n "$CLUSTER_NAMESPACE" get "$PROXMOX_KINDS,clusters.cluster.x-k8s.io,machines.cluster.x-k8s.io,$IPAM_KINDS" -o name)
  [[ -z $left ]] || { echo "left: $left"; return 1; }
}

run_cluster_scenario() {
  local out before after provider_ids ipam_before start vms_before capk kubevirt
  generate_cluster
  if ((controller_mode)); then
    standin_infrastructure=0
    create_vip_pool "$a_kubeconfig"
    create_vip_pool "$b_kubeconfig"
  fi
  kc create namespace "$CLUSTER_NAMESPACE" >/dev/null
  capk=0
  ! install_capk_for_move || capk=1
  convert_with_clusterctl_plugin
  kc apply -f "$run/cluster.yaml" >/dev/null || die "applying the generated cluster failed"
  log "applied the cluster generated by clusterctl from deploy/clusterctl ($(grep -c '^kind:' "$run/cluster.yaml") objects)"
  standins_active=1
  poll 120 "ProxmoxCluster owned by its Cluster" owned_by proxmoxclusters Cluster 1
  poll 180 "KubeadmControlPlane created a ProxmoxMachine by server-side apply (capi-kubeadmcontrolplane)" \
    applied_by capi-kubeadmcontrolplane
  poll 240 "MachineSet created a ProxmoxMachine by server-side apply (capi-machineset)" applied_by capi-machineset
  poll 120 "both ProxmoxMachines owned by their Machines" owned_by proxmoxmachines Machine 2
  poll 60 "both ProxmoxMachineTemplates owned by the Cluster" owned_by proxmoxmachinetemplates Cluster 2
  poll 300 "Machines have nodeRefs, Cluster infrastructure provisioned and control plane initialized" \
    machines_have_node_refs
  if ((ipam_provider)); then
    poll 60 "ProxmoxMachine addresses are the IPAM provider's allocations for claims they own" addresses_from_claims
  else
    log "SKIPPED the IPAM checks: the in-cluster IPAM provider was not built"
  fi
  if ((controller_mode)); then
    poll 120 "the controller: VIP claimed from $VIP_POOL as the control-plane endpoint" vip_claimed
    poll 120 "the controller: Machines InfrastructureReady with proxmox:// providerIDs, one VM each on the simulator" \
      machines_on_proxmox
  fi
  out=$(kc -n "$CLUSTER_NAMESPACE" get "proxmoxmachines.v1alpha1.$INFRA_GROUP" -o jsonpath='{range .items[*]}{.apiVersion}{"\n"}{end}')
  [[ $(grep -cx "$INFRA_GROUP/v1alpha1" <<<"$out") == 2 ]] || die "the ProxmoxMachines read at v1alpha1: $out"
  out=$(clusterctl_ describe cluster "$CLUSTER_NAME" -n "$CLUSTER_NAMESPACE" --kubeconfig "$kubeconfig" \
    --show-templates --grouping=false --echo 2>&1) || die "clusterctl describe failed: $out"
  printf '%s\n' "$out" >"$run/describe.txt"
  [[ $out == *"ClusterInfrastructure - ProxmoxCluster/$CLUSTER_NAME"* &&
    $(grep -c 'MachineInfrastructure - ProxmoxMachine/' <<<"$out") == 2 &&
    $(grep -c 'MachineInfrastructureTemplate - ProxmoxMachineTemplate/' <<<"$out") == 2 ]] ||
    die "clusterctl describe lacks the Proxmox objects: $out"
  log "clusterctl describe cluster:"
  sed 's/ *$//' <<<"$out" >&2

  kubevirt=0
  if ((capk)) && kubevirt_in_cluster; then
    kubevirt=1
    log "a MachineDeployment of KubeVirt machines beside the Proxmox ones, its KubevirtMachineTemplate owned by the Cluster"
  else
    log "SKIPPED the KubeVirt MachineDeployment in the moved cluster: no CAPK CRDs (named above)"
  fi
  before=$(proxmox_objects "$kubeconfig")
  provider_ids=$(provider_ids "$kubeconfig")
  ipam_before=$(ipam_objects "$kubeconfig")
  ((controller_mode == 0)) || vms_before=$(pve_vms)
  # b's ValidatingAdmissionPolicy, denying, refuses the ProxmoxMachines clusterctl move
  # creates there: the move fails in the policy's words and stores no machine on b. A failed
  # move leaves the source Cluster paused; unpaused, it is moved again with the policy warning.
  log "clusterctl move against b's ValidatingAdmissionPolicy capping cores (Deny)"
  kubeconfig=$b_kubeconfig cores_policy apply e2e-move-cores Deny
  poll 30 "b's server enforces the policy" b_refuses_machines e2e-move-cores
  ! clusterctl_ move -n "$CLUSTER_NAMESPACE" --kubeconfig "$kubeconfig" --to-kubeconfig "$b_kubeconfig" \
    >"$run/move-refused.log" 2>&1 || die "clusterctl move passed b's ValidatingAdmissionPolicy (Deny)"
  grep -q "ValidatingAdmissionPolicy 'e2e-move-cores' with binding 'e2e-move-cores' denied request: spec.numCores" \
    "$run/move-refused.log" || die "clusterctl move failed otherwise: $(tail -5 "$run/move-refused.log")"
  [[ -z $(kx "$b_kubeconfig" -n "$CLUSTER_NAMESPACE" get proxmoxmachines -o name) ]] ||
    die "b stored a ProxmoxMachine its policy refused"
  log "clusterctl move refused by b's policy: $(grep -o "ValidatingAdmissionPolicy 'e2e-move-cores'[^\"]*" "$run/move-refused.log" | head -1)"
  kc -n "$CLUSTER_NAMESPACE" patch cluster "$CLUSTER_NAME" --type merge -p '{"spec":{"paused":false}}' >/dev/null ||
    die "unpausing the Cluster after the refused move failed"
  kubeconfig=$b_kubeconfig cores_policy apply e2e-move-cores Warn
  log "moving $(grep -c . <<<"$before") Proxmox objects to management cluster b"
  start=$SECONDS
  clusterctl_ move -n "$CLUSTER_NAMESPACE" --kubeconfig "$kubeconfig" --to-kubeconfig "$b_kubeconfig" \
    >"$run/move.log" 2>&1 || die "clusterctl move failed: $(tail -20 "$run/move.log")"
  log "clusterctl move took $((SECONDS - start)) s"
  poll 30 "clusterctl move: b's ValidatingAdmissionPolicy (Warn) saw both moved ProxmoxMachines"     policy_warned e2e-move-cores 2
  kubeconfig=$b_kubeconfig cores_policy delete e2e-move-cores Warn
  after=$(proxmox_objects "$b_kubeconfig")
  [[ $after == "$before" ]] || die "Proxmox objects differ after move: before: $before; after: $after"
  # clusterctl move copies, but never deletes, objects below a cluster-scoped
  # owner: the VIP's IPAddress (owned by the GlobalInClusterIPPool) stays on a.
  [[ $(ipam_objects "$b_kubeconfig") == "$ipam_before" && $(ipam_objects "$kubeconfig") == "$(global_pool_addresses)" ]] ||
    die "IPAM objects after move: before on a: $ipam_before; on b: $(ipam_objects "$b_kubeconfig"); left on a: $(ipam_objects "$kubeconfig")"
  [[ $(provider_ids "$b_kubeconfig") == "$provider_ids" ]] ||
    die "providerIDs differ after move: $provider_ids; now $(provider_ids "$b_kubeconfig")"
  [[ -z $(proxmox_objects "$kubeconfig") ]] || die "Proxmox objects left on a after move: $(proxmox_objects "$kubeconfig")"
  if ((kubevirt)); then
    out=$(kubevirt_template_owned_by "$b_kubeconfig") &&
      [[ -z $(kc -n "$CLUSTER_NAMESPACE" get "kubevirtmachinetemplates.$INFRA_GROUP" -o name) ]] ||
      die "clusterctl move and CAPK's KubevirtMachineTemplate: $out; left on a: $(kc -n "$CLUSTER_NAMESPACE" get "kubevirtmachinetemplates.$INFRA_GROUP" -o name)"
    log "clusterctl move: CAPK's KubevirtMachineTemplate moved with the Proxmox objects, owned by b's Cluster, none left on a"
  fi
  kubeconfig=$b_kubeconfig
  out=$(owned_by proxmoxclusters Cluster 1 && owned_by proxmoxmachines Machine 2 &&
    owned_by proxmoxmachinetemplates Cluster 2) || die "owner references on b: $out"
  out="none left on a"
  ((controller_mode == 0)) || out+=" but the VIP's IPAddress under the cluster-scoped pool"
  log "clusterctl move: the same $(grep -c . <<<"$after") Proxmox objects and $(grep -c . <<<"$ipam_before") IPAM objects (pools, claims, addresses) on b, $out, owner uids rewritten"
  poll 60 "Cluster on b unpaused" cluster_unpaused
  poll 120 "Machines on b keep nodeRefs" machines_have_node_refs
  ((ipam_provider == 0)) || poll 60 "on b too, ProxmoxMachine addresses are the allocations of their claims" addresses_from_claims
  if ((controller_mode)); then
    [[ $(pve_vms) == "$vms_before" ]] || die "VMs changed across the move: $vms_before; now $(pve_vms)"
    poll 120 "the controller on b: the moved machines InfrastructureReady on the same VMs" machines_on_proxmox
    poll 60 "the controller on b: the VIP claim and endpoint" vip_claimed
  fi

  kc -n "$CLUSTER_NAMESPACE" delete cluster "$CLUSTER_NAME" --wait=false >/dev/null
  poll 300 "deleting the Cluster on b removed every Proxmox and IPAM object (templates, claims and pool through the garbage collector)" \
    cluster_gone
  ((controller_mode == 0)) || poll 120 "deleting the Cluster removed every VM from the simulator" no_vms_left
}

# KIND: the names of the objects of KIND whose managedFields hold an Apply of capi-topology.
applied_by_topology() {
  kc -n "$CLUSTER_NAMESPACE" get "$1" -o \
    jsonpath='{range .items[*]}{.metadata.name}|{range .metadata.managedFields[*]}{.manager}/{.operation} {end}{"\n"}{end}' |
    grep 'capi-topology/Apply' | cut -d'|' -f1
}

# The Cluster of the ClusterClass reports InfrastructureReady; its ProxmoxCluster is the one the
# topology controller applied, with the pool from the class's patch and the VIP claimed from it.
topology_infrastructure_ready() {
  local ready infra pool host
  IFS='|' read -r ready infra < <(kc -n "$CLUSTER_NAMESPACE" get cluster "$CLUSTER_NAME" -o \
    jsonpath='{.status.conditions[?(@.type=="InfrastructureReady")].status}|{.spec.infrastructureRef.name}{"\n"}')
  [[ $ready == True && -n $infra ]] || { echo "InfrastructureReady $ready, infrastructureRef $infra"; return 1; }
  [[ $(applied_by_topology proxmoxclusters) == "$infra" ]] ||
    { echo "ProxmoxCluster $infra not applied by capi-topology"; return 1; }
  IFS='|' read -r pool host < <(kc -n "$CLUSTER_NAMESPACE" get proxmoxcluster "$infra" -o \
    jsonpath='{.spec.controlPlaneEndpointIPPoolRef.name}|{.spec.controlPlaneEndpoint.host}{"\n"}')
  [[ $pool == "$VIP_POOL" && $host == "$vip" ]] || { echo "ProxmoxCluster $infra: pool $pool, endpoint $host"; return 1; }
}

# A Cluster with spec.topology from the topology flavor: clusterctl adds our ClusterClass, Cluster
# API's topology controller server-side-applies (after dry runs) the ProxmoxCluster and the
# machine templates cloned from the class, the controller claims the VIP and provisions the
# machines on the simulator; a changed class variable and then a Kubernetes version bump roll
# every machine over; deleting the Cluster removes all of it.

# The name of the ProxmoxMachineTemplate the topology's control plane clones (v1beta2, or v1beta1).
control_plane_template() {
  kc -n "$CLUSTER_NAMESPACE" get kubeadmcontrolplanes -o \
    jsonpath='{.items[0].spec.machineTemplate.spec.infrastructureRef.name}{.items[0].spec.machineTemplate.infrastructureRef.name}'
}

# YAML NEXT: the generated topology cluster made to clone from releases (the class's
# `machine.kubernetesRelease`), one for KUBERNETES_VERSION (the template tagged kube-v1.32,
# 9001 on pve2's shared storage) and one for NEXT (9000 on pve1), and its control plane given an
# external etcd, so that KubeadmControlPlane rolls machines over on the workload stand-in.
topology_with_releases() {
  python3 - "$1" "$KUBERNETES_VERSION" "$2" "$INFRA_GROUP" <<'EOF2' || die "preparing $1 failed"
import sys, yaml
path, version, next_version, group = sys.argv[1:]
docs = [d for d in yaml.safe_load_all(open(path)) if d]
for doc in docs:
    if doc["kind"] == "Cluster":
        for variable in doc["spec"]["topology"]["variables"]:
            if variable["name"] == "machine":
                value = variable["value"]
                value.pop("sourceNode"), value.pop("templateID")
                value["kubernetesRelease"] = True
namespace = next(d for d in docs if d["kind"] == "Cluster")["metadata"]["namespace"]
def release(v, templates):
    return {"apiVersion": f"{group}/v1alpha2", "kind": "ProxmoxKubernetesRelease",
            "metadata": {"name": f"kubernetes-{v}", "namespace": namespace},
            "spec": {"version": v, "templates": templates}}
docs.append(release(version, [{"templateSelector": {"matchTags": ["capmox", "kube-v1.32", "ubuntu"],
                                                    "matchPolicy": "exact"}}]))
docs.append(release(next_version, [{"sourceNode": "pve1", "templateID": 9000}]))
yaml.safe_dump_all(docs, open(path, "w"), sort_keys=False)
EOF2
  external_etcd "$1"
}

# The topology's machines are COUNT, all ready on the simulator, every one of Kubernetes VERSION
# with CORES cores, cloned from TEMPLATE ("pve1/9000") of VERSION's release.
topology_machines_are() { # COUNT VERSION CORES TEMPLATE
  local out line
  machines_on_proxmox "$1" || return 1
  out=$(kc -n "$CLUSTER_NAMESPACE" get machines -o jsonpath='{range .items[*]}{.spec.version}{"\n"}{end}' | sort -u)
  [[ $out == "$2" ]] || { echo "Machine versions: $out"; return 1; }
  out=$(kc -n "$CLUSTER_NAMESPACE" get proxmoxmachines -o \
    jsonpath='{range .items[*]}{.metadata.name} {.spec.numCores} {.status.template.sourceNode}/{.status.template.templateID} {.status.template.kubernetesRelease}{"\n"}{end}')
  while read -r line; do
    [[ -z $line || $line == *" $3 $4 kubernetes-$2" ]] || { echo "ProxmoxMachine: $line"; return 1; }
  done <<<"$out"
}

# The Cluster's topology is reconciled, and the topology controller was never refused by the
# template immutability (upstream #735).
topology_reconciled() {
  [[ $(kc -n "$CLUSTER_NAMESPACE" get cluster "$CLUSTER_NAME" \
    -o jsonpath='{.status.conditions[?(@.type=="TopologyReconciled")].status}') == True ]] || return 1
  ! grep -q 'ProxmoxMachineTemplate is immutable' "$run/capi-manager$1.log" ||
    die "the topology controller was refused by the template immutability (its log: $run/capi-manager$1.log)"
}

# A ClusterClass variable changes (the machine's cores, one more): the topology controller learns that
# the machine templates must be rotated from dry-run applies of the changed templates with its
# dry-run annotation, which our immutability lets through (upstream #735), and rotates them;
# KubeadmControlPlane and the MachineDeployment then replace their machines with ones of the
# new size. Refused, the Cluster's topology would stay unreconciled.
rotate_topology_template() { # MANAGEMENT_TAG
  local before index old_cores new_cores
  before=$(control_plane_template)
  [[ -n $before ]] || die "the topology's KubeadmControlPlane names no ProxmoxMachineTemplate"
  read -r index old_cores < <(kc -n "$CLUSTER_NAMESPACE" get cluster "$CLUSTER_NAME" -o json | python3 -c '
import json, sys
variables = json.load(sys.stdin)["spec"]["topology"]["variables"]
index = [v["name"] for v in variables].index("machine")
print(index, variables[index]["value"]["numCores"])')
  new_cores=$((old_cores + 1))
  kc -n "$CLUSTER_NAMESPACE" patch cluster "$CLUSTER_NAME" --type json \
    -p "[{\"op\": \"replace\", \"path\": \"/spec/topology/variables/$index/value/numCores\", \"value\": $new_cores}]" >/dev/null ||
    die "changing the topology's machine variable failed"
  poll 120 "topology: a changed machine variable rotated the control plane's ProxmoxMachineTemplate" \
    eval '[[ -n $(control_plane_template) && $(control_plane_template) != "$before" ]]'
  local after cores
  after=$(control_plane_template)
  cores=$(kc -n "$CLUSTER_NAMESPACE" get proxmoxmachinetemplate "$after" -o jsonpath='{.spec.template.spec.numCores}')
  [[ $cores == "$new_cores" ]] || die "the rotated ProxmoxMachineTemplate $after has $cores cores, not $new_cores"
  # The old template stays as it was until the topology controller deletes it.
  cores=$(kc -n "$CLUSTER_NAMESPACE" get proxmoxmachinetemplate "$before" --ignore-not-found \
    -o jsonpath='{.spec.template.spec.numCores}')
  [[ -z $cores || $cores == "$old_cores" ]] || die "the ProxmoxMachineTemplate $before changed: templates are immutable"
  log "topology: $before rotated to $after ($old_cores to $new_cores cores) through capi-topology's dry run, no refusal"
  poll 600 "topology: both machines replaced by machines of $new_cores cores" \
    topology_machines_are 2 "$KUBERNETES_VERSION" "$new_cores" pve2/9001
  poll 60 "topology: the Cluster's topology reconciled after the rotation" topology_reconciled "$1"
  topology_cores=$new_cores
}

# The topology's version moves to NEXT: Cluster API upgrades the control plane, then the
# MachineDeployment; every new machine takes NEXT's release and its template.
upgrade_topology() { # NEXT MANAGEMENT_TAG
  kc -n "$CLUSTER_NAMESPACE" patch cluster "$CLUSTER_NAME" --type merge \
    -p "{\"spec\": {\"topology\": {\"version\": \"$1\"}}}" >/dev/null || die "bumping the topology's version failed"
  poll 900 "topology: $KUBERNETES_VERSION to $1, both machines replaced by ones cloned from pve1/9000 of release kubernetes-$1" \
    topology_machines_are 2 "$1" "$topology_cores" pve1/9000
  poll 60 "topology: the Cluster's topology reconciled after the upgrade" topology_reconciled "$2"
}

run_topology_scenario() {
  if ((controller_mode == 0)); then
    log "SKIPPED the ClusterClass scenario: it needs the controller (and so the IPAM provider)"
    return
  fi
  # On the management cluster the steps before left current (b after the cluster step), with a
  # VIP pool of its own at an address no other cluster's stand-in serves.
  CLUSTER_NAME=e2e-topology CLUSTER_NAMESPACE=e2e-topology standins_active=0
  local out yaml=$run/cluster-topology.yaml saved_vip=$vip saved_tag=$tag saved_pool=$VIP_POOL
  local next_version=v1.34.4
  vip=127.0.0.6
  in_private_network || vip=$(endpoint_ip)
  VIP_POOL=capmox-vips-topology
  create_vip_pool "$kubeconfig"
  generate_flavor topology 1 1 >"$yaml" || die "clusterctl generate cluster --flavor topology failed"
  out=$(grep '^kind:' "$yaml" | sort | uniq -c | tr -s ' ' | tr '\n' ',')
  [[ $out == *"1 kind: ClusterClass,"* && $out == *"2 kind: ProxmoxMachineTemplate,"* &&
    $out == *"1 kind: ProxmoxClusterTemplate,"* && $out == *"1 kind: Cluster,"* ]] ||
    die "clusterctl did not add the ClusterClass and its templates: $out"
  kc create namespace "$CLUSTER_NAMESPACE" >/dev/null
  topology_with_releases "$yaml" "$next_version"
  kc apply -f "$yaml" >/dev/null || die "applying the topology cluster failed"
  log "applied a Cluster of the ClusterClass proxmox with the class clusterctl added ($out), its machines from releases"
  tag=-topology workload_kubeconfig= standin_static_pods=1 standins_active=1
  poll 180 "topology: InfrastructureReady, the ProxmoxCluster applied by capi-topology with the VIP from $VIP_POOL" \
    topology_infrastructure_ready
  poll 60 "topology: both ProxmoxMachineTemplates cloned from the class by capi-topology" \
    eval '[[ $(applied_by_topology proxmoxmachinetemplates | wc -l) == 2 ]]'
  topology_cores=2
  poll 300 "topology: the control-plane and worker Machines ready on the simulator, cloned from pve2/9001 of release kubernetes-$KUBERNETES_VERSION" \
    topology_machines_are 2 "$KUBERNETES_VERSION" "$topology_cores" pve2/9001
  # Each pass the topology controller compares a dry-run apply with the stored object; an
  # answer that differed would make it patch the ProxmoxCluster (and fight the controller's
  # endpoint) again and again. One patch is Cluster API's own race: it dry-runs its intent,
  # then the stored object, and our controller's endpoint write can land between the two (the
  # second then shows the endpoint, the first not); the patch leaves the endpoint, which our
  # controller owns, in place.
  local patches
  patches=$(awk '/"Patching ProxmoxCluster"|"Patching ProxmoxMachineTemplate"/ {open = 1}
    open && / > patch=/ {sub(/.* > patch=/, " > patch="); print; open = 0}' "$run/capi-manager$saved_tag.log")
  [[ -z $patches || $patches == ' > patch="{\"spec\":{\"controlPlaneEndpoint\":null}}"' ]] ||
    die "the topology controller keeps patching our objects: its dry runs differ from what is stored: $patches"
  log "topology: the dry-run applies of capi-topology matched what the server stores (no patch after creation${patches:+ but one raced by the endpoint write})"
  rotate_topology_template "$saved_tag"
  upgrade_topology "$next_version" "$saved_tag"
  kc -n "$CLUSTER_NAMESPACE" delete cluster "$CLUSTER_NAME" --wait=false >/dev/null
  poll 300 "deleting the topology Cluster removed every Proxmox and IPAM object but the class's templates and the releases" \
    only_class_templates_left
  poll 120 "deleting the topology Cluster removed its VMs from the simulator" no_vms_left
  kc delete -f "$yaml" --ignore-not-found >/dev/null ||
    die "deleting the ClusterClass, its templates and the releases failed"
  poll 60 "the ClusterClass and its templates deleted" cluster_gone
  standins_active=0 standin_static_pods=0 tag=$saved_tag vip=$saved_vip VIP_POOL=$saved_pool
}

# "VMID NODE" per VM of the simulator, templates included.
pve_vm_nodes() {
  curl -fsS --cacert "$pve_ca" "$pve_url/_sim/state" | python3 -c '
import json, sys
for v in json.load(sys.stdin)["vms"]:
    print(v["vmid"], v["node"])'
}

# Three control-plane Machines in three failure domains: KubeadmControlPlane gave each Machine
# another of the three (spec.failureDomain), its ProxmoxMachine reports it, its VM runs on the
# domain's node (pveN for rack-a/b/c) in the domain's Proxmox VE cluster (rack-c's is the second
# simulator, pve-b), and Cluster API copied the domains to the Cluster.
machines_in_their_domains() {
  local cluster_domains placed vm_nodes line name domain vmid node want pve
  cluster_domains=$(kc -n "$CLUSTER_NAMESPACE" get cluster "$CLUSTER_NAME" -o \
    jsonpath='{range .status.failureDomains[*]}{.name}={.controlPlane} {end}')
  [[ $cluster_domains == "rack-a=true rack-b=true rack-c=true " ]] ||
    { echo "Cluster.status.failureDomains: $cluster_domains"; return 1; }
  placed=$(kc -n "$CLUSTER_NAMESPACE" get proxmoxmachines -o \
    jsonpath='{range .items[*]}{.metadata.name}|{.status.failureDomain}|{.spec.virtualMachineID}|{.status.pveCluster}{"\n"}{end}')
  [[ $(cut -d'|' -f2 <<<"$placed" | sort -u | tr '\n' ' ') == "rack-a rack-b rack-c " ]] ||
    { echo "ProxmoxMachines: $placed"; return 1; }
  while IFS='|' read -r name domain vmid pve; do
    case $domain in rack-a) want=pve1 ;; rack-b) want=pve2 ;; *) want=pve3 ;; esac
    if [[ $domain == rack-c ]]; then
      vm_nodes=$(pve_url=$pve_b_url pve_ca=$pve_b_ca pve_vm_nodes)
      [[ $pve == pve-b ]] || { echo "$name in $domain records Proxmox VE cluster '$pve'"; return 1; }
    else
      vm_nodes=$(pve_vm_nodes)
    fi
    node=$(awk -v id="$vmid" '$1 == id {print $2}' <<<"$vm_nodes")
    [[ $node == "$want" ]] || { echo "$name in $domain runs on '$node' of its cluster, not $want"; return 1; }
  done <<<"$placed"
  line=$(kc -n "$CLUSTER_NAMESPACE" get machines -o jsonpath='{range .items[*]}{.spec.failureDomain}{"\n"}{end}')
  [[ $(sort <<<"$line" | tr '\n' ' ') == "rack-a rack-b rack-c " ]] ||
    { echo "Machines' spec.failureDomain: $line"; return 1; }
}

# The failure-domains flavor with the real Cluster API managers: KubeadmControlPlane scales to
# three control-plane machines, one after the other as each becomes healthy (the workload
# stand-in publishes their control-plane pods; etcd is external, as in the controllers run), and
# spreads them over the cluster's three failure domains; the controller places each VM on its
# domain's node. Domain rack-c is a second Proxmox VE cluster (a second simulator, pve-b, with
# the same node names; its credentials in a Secret the generated ProxmoxCluster's rack-c names).
# The template is the simulators' on shared storage (9001, ceph on pve2), which every node can
# clone from.
run_failure_domain_scenario() {
  if ((controller_mode == 0)); then
    log "SKIPPED the failure-domain scenario: it needs the controller (and so the IPAM provider)"
    return
  fi
  CLUSTER_NAME=e2e-domains CLUSTER_NAMESPACE=e2e-domains standins_active=0
  local yaml=$run/cluster-domains.yaml saved_vip=$vip saved_tag=$tag
  vip=127.0.0.4
  in_private_network || vip=$(endpoint_ip)
  domains_generate() {
    export PROXMOX_SOURCENODE=pve2 TEMPLATE_VMID=9001
    export FAILURE_DOMAIN_A_NODES='[pve1]' FAILURE_DOMAIN_B_NODES='[pve2]' FAILURE_DOMAIN_C_NODES='[pve3]'
    clusterctl_ generate cluster "$CLUSTER_NAME" --kubeconfig "$kubeconfig" \
      --infrastructure "proxmox:$capmox_version" --target-namespace "$CLUSTER_NAMESPACE" \
      --kubernetes-version "$KUBERNETES_VERSION" --flavor failure-domains \
      --control-plane-machine-count 3 --worker-machine-count 0
  }
  clusterctl_config
  with_cluster_variables domains_generate >"$yaml" || die "clusterctl generate cluster --flavor failure-domains failed"
  kc create namespace "$CLUSTER_NAMESPACE" >/dev/null
  external_etcd "$yaml"
  second_pve_cluster_for_rack_c "$yaml"
  kc apply -f "$yaml" >/dev/null || die "applying the failure-domains cluster failed"
  log "applied a cluster of the failure-domains flavor: 3 control-plane machines, domains rack-a (pve1), rack-b (pve2), rack-c (pve3 of a second Proxmox VE cluster)"
  tag=-domains workload_kubeconfig= standin_static_pods=1 standins_active=1
  poll 600 "failure domains: 3 control-plane Machines InfrastructureReady, one VM each" machines_on_proxmox 3
  poll 60 "failure domains: KubeadmControlPlane spread the 3 control-plane Machines over rack-a, rack-b, rack-c; each VM on its domain's node" \
    machines_in_their_domains
  kc -n "$CLUSTER_NAMESPACE" delete cluster "$CLUSTER_NAME" --wait=false >/dev/null
  poll 300 "deleting the failure-domains Cluster removed every Proxmox and IPAM object" cluster_gone
  poll 120 "deleting the failure-domains Cluster removed its VMs from the simulator" no_vms_left
  poll 60 "deleting the failure-domains Cluster removed its VM from the second Proxmox VE cluster" \
    no_vms_left_in_pve_b
  pve_b_url=
  standins_active=0 standin_static_pods=0 tag=$saved_tag vip=$saved_vip
}

no_vms_left_in_pve_b() {
  local left
  left=$(pve_url=$pve_b_url pve_ca=$pve_b_ca pve_vms)
  [[ -z $left ]] || { echo "VMs left in pve-b: $left"; return 1; }
}

# A second simulated Proxmox VE cluster, pve-b, for failure domain rack-c of the cluster in
# YAML: its credentials in Secret $CLUSTER_NAME-pve-b, which rack-c's credentialsRef names.
second_pve_cluster_for_rack_c() { # YAML
  local port secret
  port=$(free_port)
  secret=$(openssl rand -hex 16)
  pve_b_ca=$run/pve-ca-b.pem
  pve_b_url=https://127.0.0.1:$port
  # Another random sequence than the first's: its VMs' SMBIOS UUIDs (providerIDs) must differ.
  start_process pve-sim-b "$capmox_bin" pve-sim --port "$port" --profile fast --name pve-b \
    --rng-seed 2 --token-secret "$secret" --ca-out "$pve_b_ca"
  wait_until 30 "${pids[-1]}" pve-sim-b curl -fsS --cacert "$pve_b_ca" "$pve_b_url/_sim/state"
  kc -n "$CLUSTER_NAMESPACE" create secret generic "$CLUSTER_NAME-pve-b" --from-literal url="$pve_b_url" \
    --from-literal token='capmox@pve!capi' --from-literal secret="$secret" \
    --from-literal insecure=false --from-file root_ca="$pve_b_ca" >/dev/null ||
    die "creating the second Proxmox VE cluster's credentials failed"
  python3 - "$1" "$CLUSTER_NAME-pve-b" <<'EOF2' || die "pointing rack-c of $1 at the second Proxmox VE cluster failed"
import sys, yaml
path, secret = sys.argv[1], sys.argv[2]
docs = [d for d in yaml.safe_load_all(open(path)) if d]
for doc in docs:
    if doc["kind"] == "ProxmoxCluster":
        for domain in doc["spec"]["failureDomains"]:
            if domain["name"] == "rack-c":
                domain["credentialsRef"] = {"name": secret}
yaml.safe_dump_all(docs, open(path, "w"), sort_keys=False)
EOF2
}

# What the ClusterClass owns stays when a Cluster of it goes: its three Proxmox templates.
only_class_templates_left() {
  local left
  left=$(kc -n "$CLUSTER_NAMESPACE" get "$PROXMOX_KINDS,clusters.cluster.x-k8s.io,machines.cluster.x-k8s.io,$IPAM_KINDS" -o name | sort | tr '\n' ' ')
  [[ $left == "proxmoxclustertemplate.$INFRA_GROUP/proxmox-cluster proxmoxmachinetemplate.$INFRA_GROUP/proxmox-control-plane proxmoxmachinetemplate.$INFRA_GROUP/proxmox-worker " ]] ||
    { echo "left: $left"; return 1; }
}

# ---------------------------------------------------------------------------
# Step 7: machines from a ProxmoxKubernetesRelease, and a rebuilt template rolled out

# ProxmoxMachine NAME|sourceNode/templateID|release and the node of its VM, one line per machine.
release_machines() {
  local placed vm_nodes name source release vmid
  placed=$(kc -n "$CLUSTER_NAMESPACE" get proxmoxmachines -o \
    jsonpath='{range .items[*]}{.metadata.name}|{.status.template.sourceNode}/{.status.template.templateID}|{.status.template.kubernetesRelease}|{.spec.virtualMachineID}{"\n"}{end}')
  vm_nodes=$(pve_vm_nodes)
  while IFS='|' read -r name source release vmid; do
    [[ -n $name ]] || continue
    echo "$name|$source|$release|$(awk -v id="$vmid" '$1 == id {print $2}' <<<"$vm_nodes")"
  done <<<"$placed"
}

# The one control-plane machine was cloned from TEMPLATE ("pve2/9001") of the release, and its
# VM runs on NODE (any node for a template on shared storage when NODE is empty).
cloned_from_release() { # TEMPLATE [NODE]
  local lines name source release node
  lines=$(release_machines)
  [[ $(grep -c . <<<"$lines") == 1 ]] || { echo "ProxmoxMachines: $lines"; return 1; }
  IFS='|' read -r name source release node <<<"$lines"
  [[ $source == "$1" && $release == "kubernetes-$KUBERNETES_VERSION" ]] ||
    { echo "$name: cloned from $source of release '$release'"; return 1; }
  [[ -z ${2:-} || $node == "$2" ]] || { echo "$name runs on $node, not $2"; return 1; }
}

# cores_policy apply|delete NAME Deny|Warn [NAMESPACE]: a ValidatingAdmissionPolicy on new
# ProxmoxMachines of more than 1 core (the scenario's have NUM_CORES=2), on the cluster
# kubeconfig names, its binding acting as told, in NAMESPACE only when one is given.
cores_policy() {
  local scope=
  [[ -z ${4:-} ]] || scope="  matchResources:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: $4}}"
  kc "$1" -f - >/dev/null <<EOF || die "cores_policy $1 $2 failed"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: $2}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [infrastructure.cluster.x-k8s.io], apiVersions: ["*"], operations: [CREATE], resources: [proxmoxmachines]}
  validations:
  - expression: object.spec.numCores <= 1
    messageExpression: "'spec.numCores: ' + string(object.spec.numCores) + ' exceeds the 1 core allowed'"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: $2}
spec:
  policyName: $2
  validationActions: [$3]
$scope
EOF
}

# b's server refuses, by POLICY, a server-side dry-run create of a copy of one of a's
# ProxmoxMachines.
b_refuses_machines() { # POLICY
  local copy out
  copy=$(kc -n "$CLUSTER_NAMESPACE" get proxmoxmachines -o json | python3 -c '
import json, sys
m = json.load(sys.stdin)["items"][0]
print(json.dumps({"apiVersion": m["apiVersion"], "kind": m["kind"],
                  "metadata": {"name": "policy-probe", "namespace": "default"}, "spec": m["spec"]}))')
  out=$(kx "$b_kubeconfig" create --dry-run=server -f - <<<"$copy" 2>&1) && { echo "admitted"; return 1; }
  [[ $out == *"ValidatingAdmissionPolicy '$1'"* ]] || { echo "$out"; return 1; }
}

# Our servers logged at least COUNT warnings of POLICY (Warn: the writer got them too).
policy_warned() { # POLICY COUNT
  local n
  n=$(grep -h 'admission policy warned about a write' "$run"/capmox-apiserver*.log | grep -c "$1")
  ((n >= $2)) || { echo "$n warnings by $1 in the servers' logs"; return 1; }
}

# Our server logged that POLICY denied a write (a controller's: no client here sees the error).
policy_denied() { # POLICY
  grep -h 'admission policy denied a write' "$run"/capmox-apiserver*.log | grep -q "$1" ||
    { echo "no denial by $1 in the server's log"; return 1; }
}

# The kubernetes-release flavor with the real Cluster API managers: its machine templates name
# no template; the control-plane machine takes the release of KUBERNETES_VERSION, whose tags
# find the simulator's 9001 (shared storage on pve2). Then the release changes, as when
# image-builder rebuilt the template (9000, local to pve1): the existing machine is left alone,
# and `clusterctl alpha rollout restart` has KubeadmControlPlane replace it with one cloned
# from the new template: first refused by a ValidatingAdmissionPolicy capping cores (KCP's
# server-side apply through our server), then, the policy removed, created.
run_release_scenario() {
  if ((controller_mode == 0)); then
    log "SKIPPED the release scenario: it needs the controller (and so the IPAM provider)"
    return
  fi
  CLUSTER_NAME=e2e-release CLUSTER_NAMESPACE=e2e-release standins_active=0
  local yaml=$run/cluster-release.yaml saved_vip=$vip saved_tag=$tag first
  vip=127.0.0.5
  in_private_network || vip=$(endpoint_ip)
  release_generate() {
    export TEMPLATE_TAGS='capmox, kube-v1.32, ubuntu'
    clusterctl_ generate cluster "$CLUSTER_NAME" --kubeconfig "$kubeconfig" \
      --infrastructure "proxmox:$capmox_version" --target-namespace "$CLUSTER_NAMESPACE" \
      --kubernetes-version "$KUBERNETES_VERSION" --flavor kubernetes-release \
      --control-plane-machine-count 1 --worker-machine-count 0
  }
  with_cluster_variables release_generate >"$yaml" || die "clusterctl generate cluster --flavor kubernetes-release failed"
  kc create namespace "$CLUSTER_NAMESPACE" >/dev/null
  external_etcd "$yaml"
  kc apply -f "$yaml" >/dev/null || die "applying the kubernetes-release cluster failed"
  log "applied a cluster of the kubernetes-release flavor: release kubernetes-$KUBERNETES_VERSION, templates by the tags capmox, kube-v1.32, ubuntu"
  tag=-release workload_kubeconfig= standin_static_pods=1 standins_active=1
  poll 300 "release: the control-plane Machine InfrastructureReady, one VM" machines_on_proxmox 1
  poll 30 "release: the ProxmoxMachine was cloned from the release's template 9001 (pve2)" cloned_from_release pve2/9001
  first=$(release_machines)
  kc -n "$CLUSTER_NAMESPACE" patch proxmoxkubernetesrelease "kubernetes-$KUBERNETES_VERSION" --type merge \
    -p '{"spec": {"templates": [{"sourceNode": "pve1", "templateID": 9000}]}}' >/dev/null ||
    die "changing the release failed"
  sleep 5
  [[ $(release_machines) == "$first" ]] || die "changing the release touched the existing machine: $(release_machines) (was $first)"
  log "release: changed to template 9000 on pve1; the existing machine kept its VM and record"
  cores_policy apply e2e-core-cap Deny "$CLUSTER_NAMESPACE"
  clusterctl_ alpha rollout restart "kubeadmcontrolplane/$CLUSTER_NAME-control-plane" \
    --kubeconfig "$kubeconfig" -n "$CLUSTER_NAMESPACE" >/dev/null || die "clusterctl alpha rollout restart failed"
  poll 120 "release: the ValidatingAdmissionPolicy refused the ProxmoxMachine KubeadmControlPlane creates" \
    policy_denied e2e-core-cap
  (($(release_machines | grep -c .) == 1)) || die "a machine the policy refuses was stored: $(release_machines)"
  cores_policy delete e2e-core-cap Deny "$CLUSTER_NAMESPACE"
  log "release: without the policy the rollout proceeds"
  poll 600 "release: KubeadmControlPlane replaced the machine with one cloned from 9000 on pve1" \
    cloned_from_release pve1/9000 pve1
  poll 120 "release: the replacement InfrastructureReady, the old VM gone" machines_on_proxmox 1
  kc -n "$CLUSTER_NAMESPACE" delete cluster "$CLUSTER_NAME" --wait=false >/dev/null
  poll 300 "deleting the kubernetes-release Cluster removed every Proxmox and IPAM object" cluster_gone
  poll 120 "deleting the kubernetes-release Cluster removed its VMs from the simulator" no_vms_left
  kc -n "$CLUSTER_NAMESPACE" delete proxmoxkubernetesrelease "kubernetes-$KUBERNETES_VERSION" >/dev/null ||
    die "deleting the release failed"
  standins_active=0 standin_static_pods=0 tag=$saved_tag vip=$saved_vip
}

# ---------------------------------------------------------------------------
# Step 8: Talos, with Sidero Labs' bootstrap and control-plane providers

# The specs (as provider_specs) of the Talos providers.
talos_provider_specs() {
  local cabpt cacppt
  cabpt=$(module_info "$CABPT_MODULE@$CABPT_VERSION" '{{.Dir}}') &&
    cacppt=$(module_info "$CACPPT_MODULE@$CACPPT_VERSION" '{{.Dir}}') || return 1
  printf '%s\n' "bootstrap-talos talos-bootstrap-manager $cabpt/config/default --health-addr" \
    "control-plane-talos talos-control-plane-manager $cacppt/config/default --health-addr"
}

# VMID DIR: Talos' own NoCloud reader (built with the others) over the VM's seed, its NIC
# given the MAC Proxmox VE assigned; sets reader to talos_seed.py's flag for the result.
# Without the reader (its module refused), says so and leaves the check to talos_seed.py's
# reading of Talos' rules.
talos_reader() {
  local vmid=$1 dir=$2 node mac
  if [[ ! -x $bin/talos-nocloud-reader ]]; then
    log "talos: Talos' own NoCloud reader was not built (see above): its rules alone check network-config"
    return 0
  fi
  mkdir -p "$dir/files"
  python3 -c '
import base64, json, sys
files = json.load(open(sys.argv[1]))["files"]
for name in ("network-config", "meta-data"):
    open(f"{sys.argv[2]}/{name}", "wb").write(base64.b64decode(files[name]))' "$dir/seed.json" "$dir/files"
  node=$(kc -n "$CLUSTER_NAMESPACE" get proxmoxmachines -o \
    jsonpath="{.items[?(@.spec.virtualMachineID==$vmid)].status.proxmoxNode}")
  mac=$(curl -fsS --cacert "$pve_ca" -H "Authorization: PVEAPIToken=capmox@pve!capi=$pve_secret" \
    "$pve_url/api2/json/nodes/$node/qemu/$vmid/config" |
    python3 -c 'import json, re, sys; print(re.search(r"=([0-9A-Fa-f:]{17})", json.load(sys.stdin)["data"]["net0"]).group(1))') ||
    die "talos: the MAC of VM $vmid's net0"
  CAPMOX_SEED_DIR=$dir/files CAPMOX_SEED_MAC=$mac CAPMOX_SEED_OUT=$dir/talos-parsed.yaml \
    "$bin/talos-nocloud-reader" -test.run '^TestCapmoxSeed$' >"$dir/talos-reader.log" 2>&1 ||
    die "talos: Talos' NoCloud reader rejects the seed: $(tail -n 5 "$dir/talos-reader.log")"
  reader=(--reader "$dir/talos-parsed.yaml")
}

# The control-plane machine's seed on the simulator, checked as Talos reads it (talos_seed.py).
talos_seed_checked() {
  local machine infra secret vmid talos_api dir=$run/talos-seed reader=()
  mkdir -p "$dir"
  # TalosControlPlane names the ProxmoxMachine apart from the Machine.
  IFS='|' read -r machine infra secret < <(kc -n "$CLUSTER_NAMESPACE" get machines -o \
    jsonpath='{.items[0].metadata.name}|{.items[0].spec.infrastructureRef.name}|{.items[0].spec.bootstrap.dataSecretName}{"\n"}')
  kc -n "$CLUSTER_NAMESPACE" get machine "$machine" -o json >"$dir/machine.json"
  kc -n "$CLUSTER_NAMESPACE" get proxmoxmachine "$infra" -o json >"$dir/proxmoxmachine.json"
  kc -n "$CLUSTER_NAMESPACE" get secret "$secret" -o json >"$dir/secret.json"
  vmid=$(kc -n "$CLUSTER_NAMESPACE" get proxmoxmachine "$infra" -o jsonpath='{.spec.virtualMachineID}')
  curl -fsS --cacert "$pve_ca" "$pve_url/_sim/vms/$vmid/seed" >"$dir/seed.json" ||
    die "talos: the simulator has no seed on VM $vmid"
  talos_reader "$vmid" "$dir"
  python3 "$here/talos_seed.py" "${reader[@]}" "$dir/seed.json" "$dir/secret.json" "$dir/machine.json" \
    "$dir/proxmoxmachine.json" "$vip" 127.0.1.1 127.0.1.1 >"$dir/checks.txt" ||
    die "talos: the seed of VM $vmid (files in $dir)"
  while read -r line; do log "talos: $line"; done <"$dir/checks.txt"
  # The addresses reach TalosControlPlane through the Machine: it dials the node's Talos API
  # there to bootstrap etcd, which is as far as a run without Talos goes.
  talos_api=$(kc -n "$CLUSTER_NAMESPACE" get machine "$machine" \
    -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}'):50000
  poll 90 "talos: TalosControlPlane dials the node's Talos API at $talos_api to bootstrap etcd" \
    grep -q "dial tcp $talos_api" "$run/talos-control-plane-manager$tag.log"
}

# The talos flavor with Sidero Labs' providers (CABPT, CACPPT) beside Cluster API v1.12: the
# control-plane machine's VM boots with CABPT's machine config as user-data, unchanged, and the
# network-config and meta-data Talos reads. Talos itself does not run here (no Talos image, no
# guest), so TalosControlPlane waits to bootstrap etcd through the Talos API of that node, and
# the run stops there; deleting the Cluster removes everything.
run_talos_scenario() {
  if ((controller_mode == 0)); then
    log "SKIPPED the Talos step: it needs the controller (and so the IPAM provider)"
    return
  fi
  if [[ ! -x $bin/talos-bootstrap-manager || ! -x $bin/talos-control-plane-manager ]]; then
    log "SKIPPED the Talos step: Sidero Labs' providers were not built (see above)"
    return
  fi
  CLUSTER_NAME=e2e-talos CLUSTER_NAMESPACE=e2e-talos standins_active=0
  local yaml=$run/cluster-talos.yaml saved_vip=$vip provider binary dir health_flag specs
  vip=127.0.0.7
  in_private_network || vip=$(endpoint_ip)
  specs=$(talos_provider_specs) || die "the Talos providers' module source is not available"
  while read -r provider binary dir health_flag; do
    start_provider "$provider" "$binary" "$dir" "$health_flag"
  done <<<"$specs"
  kc wait --for condition=Established --timeout 60s crd/talosconfigs.bootstrap.cluster.x-k8s.io \
    crd/taloscontrolplanes.controlplane.cluster.x-k8s.io >/dev/null
  log "talos: Sidero Labs' bootstrap ($CABPT_VERSION) and control-plane ($CACPPT_VERSION) providers running"
  generate_flavor talos 1 0 >"$yaml" || die "clusterctl generate cluster --flavor talos failed"
  kc create namespace "$CLUSTER_NAMESPACE" >/dev/null
  kc apply -f "$yaml" >/dev/null || die "applying the talos cluster failed"
  log "applied a cluster of the talos flavor (TalosControlPlane, one machine)"
  poll 300 "talos: the control-plane Machine InfrastructureReady on a VM of the simulator" machines_on_proxmox 1
  talos_seed_checked
  kc -n "$CLUSTER_NAMESPACE" delete cluster "$CLUSTER_NAME" --wait=false >/dev/null
  poll 300 "deleting the talos Cluster removed every Proxmox and IPAM object" cluster_gone
  poll 120 "deleting the talos Cluster removed its VM from the simulator" no_vms_left
  vip=$saved_vip
}

scenario_inside() {
  local start=$SECONDS
  need_python_yaml
  capmox_version=v$(sed -n 's/^version = "\(.*\)"/\1/p' "$repo/Cargo.toml" | head -n1)
  if [[ ! -x $bin/capi-ipam-in-cluster-manager ]]; then
    ipam_provider=0
    IPAM_KINDS=ipaddressclaims.$IPAM,ipaddresses.$IPAM
  fi
  open_run
  vip=$(endpoint_ip)
  configure_controller
  new_cert capmox-serving ca server "/CN=$CAPMOX_SERVICE.$CAPMOX_NAMESPACE.svc" \
    "DNS:$CAPMOX_SERVICE.$CAPMOX_NAMESPACE.svc, IP:127.0.0.1"
  mkdir -p "$pki/webhook"
  new_cert webhook/tls ca server /CN=capi-webhooks "IP:127.0.0.1, DNS:localhost"
  start_management_cluster ""
  a_kubeconfig=$kubeconfig a_etcd_port=$etcd_port
  check_api_through_aggregator
  COTENANT_FIRST=1 start_management_cluster -b
  b_kubeconfig=$kubeconfig
  tag= kubeconfig=$a_kubeconfig
  # E2E_STEPS (a developer's shortcut) runs some of the steps: cluster topology domains release talos.
  local step steps=${E2E_STEPS:-cluster topology domains release talos}
  for step in $steps; do
    case $step in
      cluster) run_cluster_scenario ;;
      topology) run_topology_scenario ;;
      domains) run_failure_domain_scenario ;;
      release) run_release_scenario ;;
      talos) run_talos_scenario ;;
      *) die "unknown step $step in E2E_STEPS (cluster topology domains release talos)" ;;
    esac
  done
  [[ -z ${cotenant_uid:-} ]] || uninstall_b
  log "scenario passed in $((SECONDS - start)) s"
}

# Exit status of a skipped scenario (binaries whose modules the proxy refused).
SKIPPED=77

# skip_unless_built WHAT NAME...: exit SKIPPED, naming the binaries of bin/ that are missing
# because the module proxy refused their modules.
skip_unless_built() {
  local what=$1 name missing=()
  shift
  for name; do
    [[ -x $bin/$name ]] || missing+=("$name")
  done
  if ((${#missing[@]})); then
    log "SKIPPED $what: not built because the module proxy refused their modules (see above): ${missing[*]}"
    exit "$SKIPPED"
  fi
}

scenario() {
  build_all
  ((${#failed_builds[@]} == 0)) || die "builds failed: ${failed_builds[*]}"
  skip_unless_built "the scenario" kube-apiserver etcd kube-controller-manager clusterctl capi-manager \
    capi-kubeadm-bootstrap-manager capi-kubeadm-control-plane-manager
  [[ -x $bin/capi-ipam-in-cluster-manager ]] ||
    log "the in-cluster IPAM provider was not built (module refused, see above): the scenario runs without it"
  capmox_build
  COTENANT_CRDS=$(cotenant_crd_dirs)
  export COTENANT_CRDS
  reexec_in_private_network
  scenario_inside
}
