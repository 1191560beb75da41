#!/usr/bin/env python3
"""Turns a provider's components YAML (the `kustomize build config/default` that
upstream releases ship) into what the e2e harness applies: the manager runs as a
local process, so its Deployment, webhook Service and cert-manager objects are
dropped, and every webhook (admission and CRD conversion) is pointed at
`https://127.0.0.1:<port><path>` with the harness CA as caBundle. Labels are added
as `clusterctl init` adds them. Reads YAML on stdin, writes a JSON List on stdout.

usage: components.py PROVIDER_LABEL WEBHOOK_PORT CA_BUNDLE_FILE
"""

import base64
import json
import sys

import yaml

# Run by the harness instead (process, serving cert made with openssl).
DROPPED_KINDS = {"Deployment", "Service", "Certificate", "Issuer"}


def point_at_local(client_config, port, ca_bundle):
    service = client_config.pop("service", None)
    if service is None:
        return
    client_config["url"] = f"https://127.0.0.1:{port}{service.get('path', '/')}"
    client_config["caBundle"] = ca_bundle


def transform(doc, provider, port, ca_bundle):
    meta = doc.setdefault("metadata", {})
    annotations = meta.get("annotations") or {}
    # cainjector is not running; the caBundle is set here.
    annotations.pop("cert-manager.io/inject-ca-from", None)
    meta["annotations"] = annotations
    labels = meta.get("labels") or {}
    labels["clusterctl.cluster.x-k8s.io"] = ""
    labels["cluster.x-k8s.io/provider"] = provider
    meta["labels"] = labels
    kind = doc.get("kind")
    if kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        for webhook in doc.get("webhooks") or []:
            point_at_local(webhook.setdefault("clientConfig", {}), port, ca_bundle)
    elif kind == "CustomResourceDefinition":
        conversion = doc.get("spec", {}).get("conversion") or {}
        if conversion.get("strategy") == "Webhook":
            point_at_local(conversion["webhook"].setdefault("clientConfig", {}), port, ca_bundle)
    return doc


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    provider, port = sys.argv[1], int(sys.argv[2])
    with open(sys.argv[3], "rb") as ca_file:
        ca_bundle = base64.b64encode(ca_file.read()).decode()
    items = [
        transform(doc, provider, port, ca_bundle)
        for doc in yaml.safe_load_all(sys.stdin)
        if doc and doc.get("kind") not in DROPPED_KINDS
    ]
    json.dump({"apiVersion": "v1", "kind": "List", "items": items}, sys.stdout)


if __name__ == "__main__":
    main()
