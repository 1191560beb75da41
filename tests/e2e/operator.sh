# shellcheck shell=bash
# The Cluster API Operator on a real node (sourced by run after node.sh; uses its node). See
# docs/e2e.md, "The Cluster API Operator".
#
# E2E_NODE_OPERATOR=DIR (a `run images` directory made with E2E_IMAGES_OPERATOR=1), instead of
# deploy/overlays/manual-certs and `clusterctl init`: DIR's images imported; cert-manager as
# node_cert_manager installs it; the operator's components (DIR/repository/capi-operator) applied
# and its manager Available; then what a GitOps user commits: for each provider a namespace, a
# ConfigMap holding its components and metadata.yaml (labelled for the provider, the operator's
# `spec.fetchConfig.selector`; gzipped into binaryData with the provider.cluster.x-k8s.io/compressed
# annotation when too large for a ConfigMap, as the operator itself stores them) and its provider
# object: CoreProvider cluster-api, BootstrapProvider and ControlPlaneProvider kubeadm,
# IPAMProvider in-cluster, and InfrastructureProvider proxmox from deploy/clusterctl with
# `spec.configSecret` (PROXMOX_URL/TOKEN/SECRET, CAPMOX_IMAGE our image as node_images imports
# it). Checks: every provider's ProviderInstalled condition, our StatefulSet's pod Ready, both
# APIServices Available, ProxmoxClusters listed; and every provider's Ready condition, which the
# operator sets only from a Deployment the provider object owns (its healthcheck controller):
# ours has none, so the proxmox object's Ready is reported, not required.

OPERATOR_NAMESPACE=capi-operator-system
OPERATOR_API=operator.cluster.x-k8s.io/v1alpha2
# ConfigMap data is limited to 1 MiB; the operator compresses above this (needToCompress).
OPERATOR_COMPRESS_ABOVE=$((1024 * 1024 - 64 * 1024))
# CAPMOX_LOG_LEVEL in the configSecret: found in the StatefulSet, the variables were processed.
OPERATOR_LOG_LEVEL=info,capmox=debug

# NAMESPACE NAME TYPE VERSION COMPONENTS METADATA: a provider's ConfigMap, as JSON on stdout.
operator_configmap() {
  python3 - "$@" "$OPERATOR_COMPRESS_ABOVE" <<'EOF'
import base64, gzip, json, sys
ns, name, kind, version, components, metadata, limit = sys.argv[1:]
data = open(components, "rb").read()
cm = {"apiVersion": "v1", "kind": "ConfigMap",
      "metadata": {"name": f"{kind}-{name}-{version}", "namespace": ns,
                   "labels": {"provider.cluster.x-k8s.io/name": name,
                              "provider.cluster.x-k8s.io/type": kind,
                              "provider.cluster.x-k8s.io/version": version}},
      "data": {"metadata": open(metadata).read()}}
if len(data) > int(limit):
    cm["metadata"]["annotations"] = {"provider.cluster.x-k8s.io/compressed": "true"}
    cm["binaryData"] = {"components": base64.b64encode(gzip.compress(data, mtime=0)).decode()}
else:
    cm["data"]["components"] = data.decode()
json.dump(cm, sys.stdout)
EOF
}

# KIND NAMESPACE NAME TYPE VERSION [EXTRA_SPEC_YAML]: a provider object on stdout.
operator_provider() {
  cat <<EOF
apiVersion: $OPERATOR_API
kind: $1
metadata: {name: $3, namespace: $2}
spec:
  version: $5
  fetchConfig:
    selector:
      matchLabels:
        provider.cluster.x-k8s.io/name: $3
        provider.cluster.x-k8s.io/type: $4
${6:-}
---
EOF
}

# NAMESPACE NAME CONDITION: the provider object's condition's status (empty when unset).
operator_condition() {
  kc -n "$1" get "$2" -o jsonpath="{.status.conditions[?(@.type==\"$3\")].status}" 2>/dev/null
}

node_operator() {
  local dir=$E2E_NODE_OPERATOR start=$SECONDS ref tar out version repository manifest
  local data=$run/volumes/capmox-data t_infra i ns name kind label spec
  repository=$dir/repository
  version=$(find "$repository/capi-operator" -mindepth 1 -maxdepth 1 -printf '%f\n' 2>/dev/null | head -n1)
  manifest=$repository/capi-operator/$version/operator-components.yaml
  [[ -f $manifest ]] || die "no operator components in $dir (run images with E2E_IMAGES_OPERATOR=1)"
  while read -r ref tar; do
    ctr -a "$node_containerd_sock" -n k8s.io images import "$tar" >/dev/null || die "importing $ref failed"
  done <"$dir/images.txt"
  E2E_NODE_CERT_MANAGER=$dir node_cert_manager
  kc apply --server-side --field-manager capmox-e2e -f "$manifest" >/dev/null ||
    die "applying the operator's components failed"
  kc -n "$OPERATOR_NAMESPACE" wait --for condition=Available --timeout 180s \
    deployment/capi-operator-controller-manager >/dev/null ||
    die "the operator is not Available: $(kc -n "$OPERATOR_NAMESPACE" get pods -o wide 2>&1)"
  log "operator $version Available after $((SECONDS - start)) s"
  # Our StatefulSet's claim: a hostPath PersistentVolume bound ahead (no provisioner).
  node_volume capmox-e2e-data "$data" 1Gi "data-$CAPMOX_SERVICE-0"
  # KIND NAMESPACE NAME TYPE VERSION COMPONENTS-FILE METADATA-FILE, one provider a line.
  local providers=(
    "CoreProvider capi-system cluster-api core $CAPI_VERSION $repository/cluster-api/$CAPI_VERSION/core-components.yaml"
    "BootstrapProvider capi-kubeadm-bootstrap-system kubeadm bootstrap $CAPI_VERSION $repository/bootstrap-kubeadm/$CAPI_VERSION/bootstrap-components.yaml"
    "ControlPlaneProvider capi-kubeadm-control-plane-system kubeadm control-plane $CAPI_VERSION $repository/control-plane-kubeadm/$CAPI_VERSION/control-plane-components.yaml"
    "IPAMProvider capi-ipam-in-cluster-system in-cluster ipam $IPAM_VERSION $repository/ipam-in-cluster/$IPAM_VERSION/ipam-components.yaml"
    "InfrastructureProvider $CAPMOX_NAMESPACE proxmox infrastructure $capmox_version $repo/deploy/clusterctl/infrastructure-proxmox/$capmox_version/infrastructure-components.yaml"
  )
  : >"$run/operator-objects.yaml"
  for i in "${providers[@]}"; do
    read -r kind ns name label ref tar <<<"$i"
    kc create namespace "$ns" --dry-run=client -o yaml | kc apply -f - >/dev/null || die "creating namespace $ns failed"
    operator_configmap "$ns" "$name" "$label" "$ref" "$tar" "$(dirname "$tar")/metadata.yaml" |
      kc apply --server-side --field-manager capmox-e2e -f - >/dev/null || die "creating $kind $name's ConfigMap failed"
  done
  # The variables of our components, from a Secret (no Proxmox: the server starts without one).
  kc -n "$CAPMOX_NAMESPACE" create secret generic proxmox-variables --from-literal PROXMOX_URL= \
    --from-literal PROXMOX_TOKEN= --from-literal PROXMOX_SECRET= \
    --from-literal "CAPMOX_IMAGE=capmox-apiserver:$capmox_version" \
    --from-literal "CAPMOX_LOG_LEVEL=$OPERATOR_LOG_LEVEL" --dry-run=client -o yaml |
    kc apply -f - >/dev/null || die "creating Secret proxmox-variables failed"
  for i in "${providers[@]}"; do
    read -r kind ns name label ref tar <<<"$i"
    spec=
    [[ $kind != InfrastructureProvider ]] ||
      spec="  configSecret: {name: proxmox-variables, namespace: $CAPMOX_NAMESPACE}"
    operator_provider "$kind" "$ns" "$name" "$label" "$ref" "$spec" >>"$run/operator-objects.yaml"
  done
  # The operator's webhook may not answer yet when its Deployment turns Available.
  wait_until 120 "$node_kubelet_pid" "the provider objects accepted by the operator's webhook" \
    kc apply -f "$run/operator-objects.yaml" >/dev/null
  t_infra=$SECONDS
  # Installed: every provider, in order (the others wait for the CoreProvider's Ready).
  local deadline=$((SECONDS + 420)) pending
  while :; do
    pending=()
    for i in "${providers[@]}"; do
      read -r kind ns name label ref tar <<<"$i"
      [[ $(operator_condition "$ns" "$kind/$name" ProviderInstalled) == True ]] || pending+=("$kind/$name")
    done
    ((${#pending[@]} == 0)) && break
    if ((SECONDS >= deadline)); then
      for i in "${providers[@]}"; do
        read -r kind ns name label ref tar <<<"$i"
        log "$kind/$name: $(kc -n "$ns" get "$kind/$name" -o jsonpath='{range .status.conditions[*]}{.type}={.status} {.reason}: {.message}; {end}' 2>&1)"
      done
      kc -n "$OPERATOR_NAMESPACE" logs deployment/capi-operator-controller-manager >"$run/operator.log" 2>&1
      die "providers not installed after 420 s: ${pending[*]} (the operator's log: $run/operator.log)"
    fi
    sleep 2
  done
  log "operator: every provider installed $((SECONDS - t_infra)) s after the provider objects were created"
  kc -n "$CAPMOX_NAMESPACE" rollout status "statefulset/$CAPMOX_SERVICE" --timeout 180s >/dev/null ||
    die "StatefulSet $CAPMOX_SERVICE not ready: $(kc -n "$CAPMOX_NAMESPACE" get pod "$CAPMOX_SERVICE-0" -o jsonpath='{.status}' 2>&1)"
  node_apiservices_available
  out=$(kc get "proxmoxclusters.$INFRA_GROUP" -A 2>&1) || die "listing ProxmoxClusters failed: $out"
  log "operator: $CAPMOX_SERVICE-0 Ready, APIServices Available $((SECONDS - t_infra)) s after the provider objects were created (our kinds in discovery ${node_discovery_lag} s after); ProxmoxClusters listed"
  # Ready: from the Deployments each provider object owns.
  local not_ready=()
  deadline=$((SECONDS + 120))
  for i in "${providers[@]}"; do
    read -r kind ns name label ref tar <<<"$i"
    [[ $kind == InfrastructureProvider ]] && continue
    until [[ $(operator_condition "$ns" "$kind/$name" Ready) == True ]]; do
      ((SECONDS < deadline)) || { not_ready+=("$kind/$name") && break; }
      sleep 2
    done
  done
  ((${#not_ready[@]} == 0)) || die "providers not Ready: ${not_ready[*]}"
  out=$(kc -n "$CAPMOX_NAMESPACE" get infrastructureprovider/proxmox \
    -o jsonpath='{range .status.conditions[*]}{.type}={.status}{" "}{end}installedVersion={.status.installedVersion}')
  log "operator: CoreProvider, BootstrapProvider, ControlPlaneProvider, IPAMProvider Ready; InfrastructureProvider proxmox: $out"
  out=$(kc -n "$CAPMOX_NAMESPACE" get "statefulset/$CAPMOX_SERVICE" \
    -o jsonpath='{.spec.template.spec.containers[0].env[?(@.name=="RUST_LOG")].value} {.spec.template.spec.containers[0].image} {.metadata.ownerReferences[*].kind}/{.metadata.ownerReferences[*].name}')
  [[ $out == "$OPERATOR_LOG_LEVEL capmox-apiserver:$capmox_version InfrastructureProvider/proxmox" ]] ||
    die "StatefulSet $CAPMOX_SERVICE is not what the configSecret's variables make: $out"
  log "operator install done in $((SECONDS - start)) s (StatefulSet: RUST_LOG, image, owner: $out)"
  node_operator_delete
}

# The InfrastructureProvider deleted: what the operator removes (its clusterctl inventory's kinds
# and, through the ownerReferences it sets, our namespaced objects) and what it leaves behind.
node_operator_delete() {
  local start=$SECONDS out left=() kind
  kc -n "$CAPMOX_NAMESPACE" delete infrastructureprovider/proxmox --timeout 180s >/dev/null ||
    die "deleting InfrastructureProvider proxmox failed"
  kc -n "$CAPMOX_NAMESPACE" wait --for delete --timeout 120s "statefulset/$CAPMOX_SERVICE" "service/$CAPMOX_SERVICE" >/dev/null ||
    die "StatefulSet or Service $CAPMOX_SERVICE left after deleting InfrastructureProvider proxmox"
  for kind in "apiservice/v1alpha1.$INFRA_GROUP" "apiservice/v1alpha2.$INFRA_GROUP" \
    "crd/proxmoxclusters.$INFRA_GROUP" "clusterrole/capmox-manager" "namespace/$CAPMOX_NAMESPACE"; do
    [[ -z $(kc get "$kind" --ignore-not-found -o name 2>/dev/null) ]] || left+=("$kind")
  done
  out=$(kc get apiservice "v1alpha2.$INFRA_GROUP" --ignore-not-found \
    -o jsonpath='{.status.conditions[?(@.type=="Available")].status} {.status.conditions[?(@.type=="Available")].reason}')
  log "operator: InfrastructureProvider proxmox deleted in $((SECONDS - start)) s; StatefulSet and Service gone; left: ${left[*]:-nothing}${out:+ (v1alpha2 APIService Available: $out)}"
}
