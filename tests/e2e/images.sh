# shellcheck shell=bash
# Container images for a real node, built from Go modules without a daemon or a registry
# (sourced by run after its build helpers). `run images [DIR]` builds every image that
# `clusterctl init --infrastructure proxmox --ipam in-cluster` pulls on a node, with the exact
# reference the upstream manifests name, as docker-archive tars for `ctr images import`:
#
#   DIR/images.txt                          one line per image: "REF TAR"
#   DIR/*.tar                               links to the archives in the shared cache
#   DIR/repository/LABEL/VERSION/FILE       a local clusterctl repository: Cluster API's core,
#                                           kubeadm bootstrap and control plane, the IPAM
#                                           provider (kustomize of config/default with the
#                                           release's image and pull policy), cert-manager
#                                           (its Helm chart rendered as its release does)
#   DIR/clusterctl.yaml                     a clusterctl config naming all of them
#
# DIR defaults to tests/e2e/.cache/images. Each image is one layer: the static binary, /etc/passwd
# and /etc/group with distroless's nonroot user (65532), the CA bundle and /tmp, every entry owned
# by root with a fixed mode and time; it runs as 65532 with the binary as its entrypoint. The
# archive is cached in $E2E_CACHE/images, keyed by the binary's checksum and everything else
# that goes into it (reference, path, arguments, CA bundle, this file's recipe, umoci and
# skopeo), so a second run links the same archive again.
#
# Binaries: the harness builds with cgo on (dynamic, glibc); images get builds of the same
# packages with CGO_ENABLED=0 (NAME-static in bin/), as upstream's Dockerfiles build them.
#
# cert-manager's binaries have their main and app packages in nested modules upstream never
# tags, which the module proxy does not serve: its images hold our own entry points over its
# released main module instead (tests/e2e/cert-manager, docs/e2e.md, "Images for a node").

IMAGES_CACHE=$cache/images
IMAGES_DIR=${IMAGES_DIR:-$here/.cache/images}
# etcd's image is tagged with the version it holds: the harness's etcd (tests/e2e/go.mod's
# go.etcd.io/etcd/server/v3, v3.6.4 with Kubernetes v1.34.3) as registry.k8s.io/etcd:3.6.4-0,
# at /usr/local/bin/etcd like upstream's image, the one deploy/components/etcd names.
# ETCD_IMAGE sets another reference.
# distroless's nonroot user, the one upstream's images run as.
IMAGE_UID=65532

# is_static BINARY: an ELF executable that asks for no loader.
is_static() {
  local out
  out=$(file -b "$1")
  [[ $out == ELF* && $out != *"dynamically linked"* && $out != *interpreter* ]]
}

# image_stage ROOT BINARY PATH: the root filesystem of an image.
image_stage() {
  local root=$1 binary=$2 path=$3 lib
  mkdir -p "$root$(dirname "$path")" "$root/etc/ssl/certs" "$root/tmp" "$root/home/nonroot"
  install -m 0755 "$binary" "$root$path"
  if ! is_static "$binary"; then
    # A dynamic binary carries the libraries and the loader it asks for, at their paths.
    log "$(basename "$binary") is dynamically linked: its shared libraries go into the image"
    while read -r lib; do
      mkdir -p "$root$(dirname "$lib")"
      cp -L "$lib" "$root$lib"
    done < <(ldd "$binary" | grep -o '/[^ ]*' | sort -u)
  fi
  cp -L /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
  printf '%s\n' 'root:x:0:0:root:/root:/sbin/nologin' \
    "nonroot:x:$IMAGE_UID:$IMAGE_UID:nonroot:/home/nonroot:/sbin/nologin" >"$root/etc/passwd"
  printf '%s\n' 'root:x:0:' "nonroot:x:$IMAGE_UID:" >"$root/etc/group"
}

# image_layer ROOT TAR: ROOT as one deterministic layer: entries sorted, owned by root,
# directories 0755 (/tmp 1777), files keeping only their executable bit, time 0; the user's home
# /home/nonroot as distroless has it (0700, the user's own): clusterctl's library, in the Cluster
# API Operator, fails without a writable $HOME/.config or /etc/xdg.
image_layer() {
  python3 - "$1" "$2" "$IMAGE_UID" <<'EOF'
import os, sys, tarfile
root, out, uid = sys.argv[1], sys.argv[2], int(sys.argv[3])
with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
    for directory, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(dirs + files):
            path = os.path.join(directory, name)
            rel = os.path.relpath(path, root)
            info = tar.gettarinfo(path, rel)
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            if rel == "tmp":
                info.mode = 0o1777
            elif rel == "home/nonroot":
                info.mode = 0o700
                info.uid = info.gid = uid
                info.uname = info.gname = "nonroot"
            elif info.isdir():
                info.mode = 0o755
            elif info.isfile():
                info.mode = 0o755 if info.mode & 0o100 else 0o644
            if info.isfile():
                with open(path, "rb") as f:
                    tar.addfile(info, f)
            else:
                tar.addfile(info)
EOF
}

# image_key REF BINARY PATH ARGS...: what an image's archive depends on.
image_key() {
  local ref=$1 binary=$2 path=$3
  shift 3
  {
    printf '%s\n' "$ref" "$path" "$@"
    sha256sum <"$binary"
    sha256sum </etc/ssl/certs/ca-certificates.crt
    declare -f is_static image_stage image_layer image_assemble
    printf '%s\n' "$IMAGE_UID"
    umoci --version
    skopeo --version
  } | sha256sum | cut -c1-16
}

# image_assemble WORK REF PATH ARGS...: WORK/layer.tar as an image, exported to WORK/image.tar.
image_assemble() {
  local work=$1 ref=$2 path=$3 entry
  shift 3
  local layout=$work/oci tag=image created=1970-01-01T00:00:00Z
  local -a config=(--config.entrypoint "$path")
  for entry; do config+=(--config.entrypoint "$entry"); done
  umoci init --layout "$layout" &&
    umoci new --image "$layout:$tag" &&
    umoci raw add-layer --image "$layout:$tag" --history.created "$created" \
      --history.created_by "tests/e2e/images.sh" "$work/layer.tar" &&
    umoci config --image "$layout:$tag" --created "$created" --history.created "$created" \
      --architecture amd64 --os linux --config.user "$IMAGE_UID:$IMAGE_UID" --config.workingdir / \
      --config.env PATH=/usr/local/bin:/usr/bin:/bin \
      --config.env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
      "${config[@]}" &&
    umoci gc --layout "$layout" &&
    skopeo --insecure-policy copy --quiet "oci:$layout:$tag" "docker-archive:$work/image.tar:$ref"
}

built_images=()

# build_go_image REF BINARY[:PATH] [ENTRYPOINT_ARGS...]: a one-layer image of BINARY at PATH
# (default /usr/local/bin/NAME, NAME the binary's own name), tagged REF, as a docker-archive in
# the shared cache; links it into $IMAGES_DIR and adds "REF TAR" to $IMAGES_DIR/images.txt.
build_go_image() {
  local ref=$1 spec=$2 binary path name key out work start=$SECONDS
  shift 2
  binary=${spec%%:*}
  path=/usr/local/bin/$(basename "$binary")
  [[ $spec != *:* ]] || path=${spec#*:}
  if [[ ! -x $binary ]]; then
    failed_builds+=("image $ref (no binary $binary)")
    log "FAILED: image $ref: no binary $binary"
    return 0
  fi
  binary=$(readlink -f "$binary")
  name=$(tr '/:' '__' <<<"${ref#*/}")
  key=$(image_key "$ref" "$binary" "$path" "$@")
  out=$IMAGES_CACHE/$name-$key.tar
  mkdir -p "$IMAGES_CACHE" "$IMAGES_DIR"
  if [[ -e $out ]] && ! (cd "$IMAGES_CACHE" && sha256sum --status -c "$(basename "$out").sha256" 2>/dev/null); then
    log "cached image $ref does not match its checksum: rebuilding"
    rm -f "$out" "$out.sha256"
  fi
  if [[ ! -e $out ]]; then
    log "building image $ref from $(basename "$binary")"
    work=$(mktemp -d "$IMAGES_CACHE/.work.XXXXXX")
    if ! { image_stage "$work/rootfs" "$binary" "$path" &&
      image_layer "$work/rootfs" "$work/layer.tar" &&
      image_assemble "$work" "$ref" "$path" "$@"; } >"$work/log" 2>&1; then
      failed_builds+=("image $ref")
      log "FAILED to build image $ref:"
      tail -n 20 "$work/log" >&2
      rm -rf "$work"
      return 0
    fi
    printf '%s  %s\n' "$(sha256sum <"$work/image.tar" | cut -d' ' -f1)" "$(basename "$out")" >"$out.sha256.tmp"
    mv "$work/image.tar" "$out" && mv "$out.sha256.tmp" "$out.sha256"
    rm -rf "$work"
    log "built image $ref in $((SECONDS - start)) s ($(du -h "$out" | cut -f1))"
    record_timing "image $ref" built $((SECONDS - start))
  else
    reused_builds+=("image $ref")
    record_timing "image $ref" reused $((SECONDS - start))
  fi
  ln -sfn "$out" "$IMAGES_DIR/$name.tar"
  built_images+=("$ref $IMAGES_DIR/$name.tar")
}

# check_image REF TAR: the archive read back (skopeo into an OCI layout, umoci unpack
# --rootless), its configuration as built, and its entrypoint run from the unpacked root
# filesystem with --help: it starts (a dynamic one with the host's loader) and prints its usage.
# No container runtime.
check_image() {
  local ref=$1 tar=$2 work entrypoint user linked=static
  work=$(mktemp -d)
  if ! { skopeo --insecure-policy copy --quiet "docker-archive:$tar" "oci:$work/oci:check" &&
    umoci unpack --rootless --image "$work/oci:check" "$work/bundle"; } >"$work/log" 2>&1; then
    log "CHECK FAILED: $ref does not unpack:"
    tail -n 5 "$work/log" >&2
    rm -rf "$work"
    return 1
  fi
  entrypoint=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["process"]["args"][0])' "$work/bundle/config.json")
  user=$(skopeo inspect --config "docker-archive:$tar" | python3 -c 'import json, sys; print(json.load(sys.stdin)["config"]["User"])')
  is_static "$work/bundle/rootfs$entrypoint" || linked=dynamic
  # pflag v1.0.7 (the operator's) exits 2 after printing the usage for --help.
  if [[ $user != "$IMAGE_UID:$IMAGE_UID" ]] || { ! timeout 30 "$work/bundle/rootfs$entrypoint" --help >"$work/log" 2>&1 &&
    [[ $(tail -n1 "$work/log") != "pflag: help requested" ]]; }; then
    log "CHECK FAILED: $ref (user $user, $entrypoint --help):"
    tail -n 5 "$work/log" >&2
    rm -rf "$work"
    return 1
  fi
  log "checked $ref: user $user, $entrypoint $linked, --help ran ($(wc -l <"$work/log") lines)"
  rm -rf "$work"
}

# ---------------------------------------------------------------------------
# The binaries the images hold: cgo off, the same packages and flags as the harness's builds

# etcd's, also for the node action's HA install (build_node).
build_etcd_static() {
  local etcd output
  output=$(mktemp)
  if etcd=$(module_info go.etcd.io/etcd/server/v3 '{{.Version}}' 2>"$output"); then
    CGO_ENABLED=0 build_binary etcd-static "$etcd" "$here" go.etcd.io/etcd/server/v3 "-s -w"
  else
    record_build_failure "etcd-static (go.etcd.io/etcd/server/v3)" "$output" etcd-static
  fi
  rm -f "$output"
}

# etcd's image (after build_etcd_static), the one deploy/components/etcd names.
build_etcd_image() {
  local etcd
  if etcd=$(module_info go.etcd.io/etcd/server/v3 '{{.Version}}'); then
    build_go_image "${ETCD_IMAGE:-registry.k8s.io/etcd:${etcd#v}-0}" "$bin/etcd-static:/usr/local/bin/etcd"
  else
    failed_builds+=("image etcd (no version of go.etcd.io/etcd/server/v3)")
  fi
}

build_image_binaries() {
  build_etcd_static
  CGO_ENABLED=0 build_from_module "$CAPI_MODULE" "$CAPI_VERSION" capi-manager-static="$CAPI_MODULE" \
    capi-kubeadm-bootstrap-manager-static="$CAPI_MODULE/bootstrap/kubeadm" \
    capi-kubeadm-control-plane-manager-static="$CAPI_MODULE/controlplane/kubeadm"
  CGO_ENABLED=0 build_from_module "$IPAM_MODULE" "$IPAM_VERSION" \
    capi-ipam-in-cluster-manager-static="$IPAM_MODULE"
  build_cert_manager
  [[ -z ${E2E_IMAGES_OPERATOR:-} ]] || build_operator
}

# cert-manager's controller, webhook and cainjector: our entry points (tests/e2e/cert-manager,
# whose go.mod requires the release's main module and nothing newer than it needs) built static,
# stamped with the release's version as its Makefile does, and keyed by our sources' checksum
# as well; Helm, from its module, renders the release's manifest (render_cert_manager).
CERT_MANAGER_VERSION=v1.20.3
HELM_MODULE=helm.sh/helm/v4
HELM_VERSION=v4.1.1
build_cert_manager() {
  local dir=$here/cert-manager component stamp
  stamp=$(cd "$dir" && find . -name '*.go' -o -name go.mod -o -name go.sum | LC_ALL=C sort |
    xargs sha256sum | sha256sum | cut -c1-12)
  for component in controller webhook cainjector; do
    CGO_ENABLED=0 build_binary "cert-manager-$component-static" "$CERT_MANAGER_VERSION-$stamp" "$dir" \
      "github.com/cert-manager/cert-manager/capmox-e2e/$component" \
      "-s -w -X github.com/cert-manager/cert-manager/pkg/util.AppVersion=$CERT_MANAGER_VERSION"
  done
  build_from_module "$HELM_MODULE" "$HELM_VERSION" helm="$HELM_MODULE/cmd/helm"
}

# The Cluster API Operator (E2E_IMAGES_OPERATOR=1): its manager, static, at /manager as its
# Dockerfile puts it, tagged as its release's operator-components.yaml names it (the Makefile's
# manifest-modification with PROD_REGISTRY). From its module by default: v0.23.0, the newest
# the module proxy serves, whose go.mod requires sigs.k8s.io/cluster-api v1.10.4 and which
# refuses providers of contract v1beta2 (Cluster API v1.11 and later, ours); E2E_OPERATOR_VERSION
# names another, once the proxy serves one (docs/e2e.md, "The Cluster API Operator").
OPERATOR_MODULE=sigs.k8s.io/cluster-api-operator
OPERATOR_VERSION=${E2E_OPERATOR_VERSION:-v0.23.0}
OPERATOR_IMAGE=registry.k8s.io/capi-operator/cluster-api-operator:$OPERATOR_VERSION
build_operator() {
  CGO_ENABLED=0 build_from_module "$OPERATOR_MODULE" "$OPERATOR_VERSION" \
    capi-operator-manager-static="$OPERATOR_MODULE/cmd"
}

# ---------------------------------------------------------------------------
# Manifests

# render_provider LABEL VERSION MODULE_DIR CONFIG IMAGE FILE: a provider's components as its
# release makes them: CONFIG (a module-relative config dir) copied, its default/ image patch set
# to IMAGE and its pull policy to IfNotPresent (the release's set-manifest-image and
# set-manifest-pull-policy), then kustomize of CONFIG/default into
# $IMAGES_DIR/repository/LABEL/VERSION/FILE, with the module's metadata.yaml beside it.
render_provider() {
  local label=$1 version=$2 dir=$3 config=$4 image=$5 file=$6 work out patch
  out=$IMAGES_DIR/repository/$label/$version
  work=$(mktemp -d)
  mkdir -p "$work/$(dirname "$config")" "$out"
  cp -r "$dir/$config" "$work/$config"
  chmod -R u+w "$work"
  for patch in "$work/$config"/default/manager_{image_patch,pull_policy}.yaml; do
    [[ -f $patch ]] || continue
    sed -i -e "s@image: .*@image: $image@" -e 's@imagePullPolicy: .*@imagePullPolicy: IfNotPresent@' "$patch"
  done
  if ! "$KUBECTL" kustomize "$work/$config/default" >"$out/$file" 2>"$work/log" ||
    ! grep -q "image: $image\$" "$out/$file"; then
    log "rendering $label's components failed:"
    tail -n 20 "$work/log" >&2
    rm -rf "$work"
    failed_builds+=("$label components")
    return 0
  fi
  [[ ! -f $dir/metadata.yaml ]] || install -m 0644 "$dir/metadata.yaml" "$out/metadata.yaml"
  rm -rf "$work"
}

# render_cert_manager FILE: cert-manager's manifest as its release makes it (make/manifests.mk):
# the main module's chart with Chart.yaml from its template (version and appVersion the
# release's), `helm template` with the release's settings and the CRDs, after its namespace.
render_cert_manager() {
  local file=$1 dir work
  if ! dir=$(module_info "github.com/cert-manager/cert-manager@$CERT_MANAGER_VERSION" '{{.Dir}}') ||
    [[ ! -x $bin/helm ]]; then
    failed_builds+=("cert-manager manifest (chart or helm missing)")
    return 0
  fi
  work=$(mktemp -d)
  cp -r "$dir/deploy/charts/cert-manager" "$work/cert-manager"
  chmod -R u+w "$work"
  sed -e "s/^version: .*/version: $CERT_MANAGER_VERSION/" -e "s/^appVersion: .*/appVersion: $CERT_MANAGER_VERSION/" \
    -e 's/{{IS_PRERELEASE}}/false/' "$work/cert-manager/Chart.template.yaml" >"$work/cert-manager/Chart.yaml"
  rm "$work/cert-manager/Chart.template.yaml"
  mkdir -p "$(dirname "$file")"
  if ! { cat "$dir/deploy/manifests/namespace.yaml" &&
    "$bin/helm" template --kube-version=1.29.0 --namespace=cert-manager --set=crds.enabled=true \
      --set=creator=static --set=startupapicheck.enabled=false cert-manager "$work/cert-manager"; } \
    >"$file" 2>"$work/log" || ! grep -q "image: \"quay.io/jetstack/cert-manager-controller:$CERT_MANAGER_VERSION\"" "$file"; then
    log "rendering cert-manager's manifest failed:"
    tail -n 20 "$work/log" >&2
    failed_builds+=("cert-manager manifest")
  fi
  rm -rf "$work"
}

# The operator's components as its release makes them: kustomize of config/default with the
# release's image and pull policy, in DIR/repository/capi-operator/VERSION/operator-components.yaml.
render_operator() {
  local dir
  if dir=$(module_info "$OPERATOR_MODULE@$OPERATOR_VERSION" '{{.Dir}}'); then
    render_provider capi-operator "$OPERATOR_VERSION" "$dir" config "$OPERATOR_IMAGE" operator-components.yaml
  else
    failed_builds+=("operator components (module source)")
  fi
}

# The images `clusterctl init --infrastructure proxmox --ipam in-cluster` pulls on a node (our
# provider's own image is deploy/image's).
images() {
  build_image_binaries
  local capi=registry.k8s.io/cluster-api
  # The previous run's links (only those: DIR may hold other files).
  if [[ -f $IMAGES_DIR/images.txt ]]; then
    local _ref old
    while read -r _ref old; do
      [[ ! -L $old ]] || rm -f "$old"
    done <"$IMAGES_DIR/images.txt"
    rm -f "$IMAGES_DIR/images.txt"
  fi
  build_etcd_image
  build_go_image "$capi/cluster-api-controller:$CAPI_VERSION" "$bin/capi-manager-static:/manager"
  build_go_image "$capi/kubeadm-bootstrap-controller:$CAPI_VERSION" \
    "$bin/capi-kubeadm-bootstrap-manager-static:/manager"
  build_go_image "$capi/kubeadm-control-plane-controller:$CAPI_VERSION" \
    "$bin/capi-kubeadm-control-plane-manager-static:/manager"
  build_go_image "registry.k8s.io/capi-ipam-ic/cluster-api-ipam-in-cluster-controller:$IPAM_VERSION" \
    "$bin/capi-ipam-in-cluster-manager-static:/manager"
  # At the paths of upstream's images (hack/containers/Containerfile.*).
  local component
  for component in controller webhook cainjector; do
    build_go_image "quay.io/jetstack/cert-manager-$component:$CERT_MANAGER_VERSION" \
      "$bin/cert-manager-$component-static:/app/cmd/$component/$component"
  done
  [[ -z ${E2E_IMAGES_OPERATOR:-} ]] ||
    build_go_image "$OPERATOR_IMAGE" "$bin/capi-operator-manager-static:/manager"
  printf '%s\n' "${built_images[@]}" >"$IMAGES_DIR/images.txt"
  local line
  for line in "${built_images[@]}"; do
    # shellcheck disable=SC2086 # "REF TAR"
    check_image $line || failed_builds+=("check of ${line%% *}")
  done
  # A local clusterctl repository ({basepath}/{provider-label}/{version}/{file}) for every
  # provider but ours (deploy/clusterctl).
  local repository=$IMAGES_DIR/repository capi_dir ipam_dir
  rm -rf "$repository"
  find_kubectl
  if capi_dir=$(module_info "$CAPI_MODULE@$CAPI_VERSION" '{{.Dir}}') &&
    ipam_dir=$(module_info "$IPAM_MODULE@$IPAM_VERSION" '{{.Dir}}'); then
    render_provider cluster-api "$CAPI_VERSION" "$capi_dir" config \
      "$capi/cluster-api-controller:$CAPI_VERSION" core-components.yaml
    render_provider bootstrap-kubeadm "$CAPI_VERSION" "$capi_dir" bootstrap/kubeadm/config \
      "$capi/kubeadm-bootstrap-controller:$CAPI_VERSION" bootstrap-components.yaml
    render_provider control-plane-kubeadm "$CAPI_VERSION" "$capi_dir" controlplane/kubeadm/config \
      "$capi/kubeadm-control-plane-controller:$CAPI_VERSION" control-plane-components.yaml
    render_provider ipam-in-cluster "$IPAM_VERSION" "$ipam_dir" config \
      "registry.k8s.io/capi-ipam-ic/cluster-api-ipam-in-cluster-controller:$IPAM_VERSION" ipam-components.yaml
  else
    failed_builds+=("provider components (module source)")
  fi
  render_cert_manager "$repository/cert-manager/$CERT_MANAGER_VERSION/cert-manager.yaml"
  [[ -z ${E2E_IMAGES_OPERATOR:-} ]] || render_operator
  cat >"$IMAGES_DIR/clusterctl.yaml" <<EOF2
# clusterctl configuration for these images (add our provider, deploy/clusterctl, to providers).
providers:
- name: cluster-api
  type: CoreProvider
  url: file://$repository/cluster-api/$CAPI_VERSION/core-components.yaml
- name: kubeadm
  type: BootstrapProvider
  url: file://$repository/bootstrap-kubeadm/$CAPI_VERSION/bootstrap-components.yaml
- name: kubeadm
  type: ControlPlaneProvider
  url: file://$repository/control-plane-kubeadm/$CAPI_VERSION/control-plane-components.yaml
- name: in-cluster
  type: IPAMProvider
  url: file://$repository/ipam-in-cluster/$IPAM_VERSION/ipam-components.yaml
cert-manager:
  url: file://$repository/cert-manager/$CERT_MANAGER_VERSION/cert-manager.yaml
  version: $CERT_MANAGER_VERSION
EOF2
  ((${#reused_builds[@]} == 0)) || log "up to date: ${reused_builds[*]}"
  ((${#failed_builds[@]} == 0)) || log "failed: ${failed_builds[*]}"
  local refused
  for refused in "${unavailable_builds[@]}"; do
    log "not built, module refused by the proxy: $refused"
  done
  log "images in $IMAGES_DIR (images.txt: REF TAR per line)"
}
