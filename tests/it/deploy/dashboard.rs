//! deploy/grafana/capmox-apiserver.json, the Grafana dashboard: every query parses as PromQL
//! (with Grafana's variables substituted), selects only metrics the server exposes, matches
//! and groups by labels those metrics carry, and every provider metric is on it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use capmox_apiserver::controller::observe::ControllerObserver;
use capmox_apiserver::server::metrics::{Metrics, RequestLabels};
use promql_parser::parser::{self, Expr, LabelModifier};
use serde_json::Value;

use super::deploy_dir;
use crate::devstack::samples;

/// Labels Prometheus adds to every scraped series.
const TARGET_LABELS: [&str; 2] = ["job", "instance"];

/// The exposed metric families and the labels of their series, from a `Metrics` that saw
/// one of each measurement.
fn exposed() -> BTreeMap<String, BTreeSet<String>> {
    let metrics = Arc::new(Metrics::new());
    let labels = RequestLabels {
        verb: "GET".into(),
        resource: "proxmoxmachines".into(),
        ..RequestLabels::default()
    };
    metrics.observe_request(&labels, StatusCode::OK, Some(Duration::from_millis(1)));
    drop(metrics.long_running(labels));
    metrics.observe_storage("get", "proxmoxmachines", Duration::from_millis(1));
    metrics.reconciled("ProxmoxMachine", "success", Duration::from_millis(1));
    metrics.queue_depth(0);
    metrics.leader(true);
    metrics.task_finished("qmclone", "success", Duration::from_secs(1));
    metrics.machine_phase("default/m", Some("Provisioned"));
    metrics.machine_provisioned(Duration::from_secs(60));
    metrics.observe_proxmox_request(
        "https://pve:8006",
        "GET /version",
        "200",
        Duration::from_millis(1),
    );
    let call = capmox_apiserver::server::metrics::WebhookCall::Allowed;
    metrics.observe_webhook("w", "validating", "CREATE", call, Duration::from_millis(1));
    metrics.observe_policy("p", "b", "no_error", "deny", Duration::from_millis(1));
    metrics.observe_mutation("p", "b", "no_error", Duration::from_millis(1));

    let text = metrics.encode();
    let mut families: BTreeMap<String, BTreeSet<String>> = text
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .map(|rest| {
            (
                rest.split(' ').next().expect("name").to_owned(),
                BTreeSet::new(),
            )
        })
        .collect();
    for (series, labels, _) in samples(&text) {
        let family = family_of(&families, &series)
            .expect("a sample of a declared family")
            .to_owned();
        let names = families.get_mut(&family).expect("declared");
        names.extend(labels.into_iter().map(|(name, _)| name));
    }
    families
}

/// The family a selected series belongs to (`x_bucket` → `x`).
fn family_of<'a>(families: &'a BTreeMap<String, BTreeSet<String>>, name: &str) -> Option<&'a str> {
    ["", "_total", "_bucket", "_count", "_sum"]
        .iter()
        .find_map(|suffix| {
            let family = name.strip_suffix(suffix)?;
            families.get_key_value(family).map(|(k, _)| k.as_str())
        })
}

/// Checks an expression; returns the label names its series carry.
fn check(
    expr: &Expr,
    families: &BTreeMap<String, BTreeSet<String>>,
    used: &mut BTreeSet<String>,
    query: &str,
) -> BTreeSet<String> {
    let mut inner = |e: &Expr| check(e, families, used, query);
    match expr {
        Expr::VectorSelector(selector) => {
            let name = selector.name.as_deref().expect("selectors name a metric");
            let family = family_of(families, name)
                .unwrap_or_else(|| panic!("{query}: {name} is not exposed"));
            used.insert(family.to_owned());
            let mut labels = families[family].clone();
            labels.extend(TARGET_LABELS.map(String::from));
            if name.ends_with("_bucket") {
                labels.insert("le".into());
            }
            for matcher in &selector.matchers.matchers {
                assert!(
                    labels.contains(&matcher.name),
                    "{query}: {name} has no label {}",
                    matcher.name
                );
            }
            labels
        }
        Expr::MatrixSelector(matrix) => inner(&Expr::VectorSelector(matrix.vs.clone())),
        Expr::Aggregate(aggregate) => {
            let labels = inner(&aggregate.expr);
            match &aggregate.modifier {
                Some(LabelModifier::Include(by)) => {
                    for label in &by.labels {
                        assert!(
                            labels.contains(label),
                            "{query}: no label {label} to group by"
                        );
                    }
                    by.labels.iter().cloned().collect()
                }
                _ => BTreeSet::new(),
            }
        }
        Expr::Call(call) => {
            call.args
                .args
                .iter()
                .map(|arg| inner(arg))
                .fold(BTreeSet::new(), |mut all, labels| {
                    all.extend(labels);
                    all
                })
        }
        Expr::Binary(binary) => {
            let mut labels = inner(&binary.lhs);
            labels.extend(inner(&binary.rhs));
            labels
        }
        Expr::Paren(paren) => inner(&paren.expr),
        Expr::Unary(unary) => inner(&unary.expr),
        Expr::Subquery(subquery) => inner(&subquery.expr),
        Expr::NumberLiteral(_) | Expr::StringLiteral(_) | Expr::Extension(_) => BTreeSet::new(),
    }
}

/// Every `expr` of the dashboard's panels (rows included) and variables.
fn queries(dashboard: &Value) -> Vec<String> {
    fn walk(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                for (key, value) in map {
                    match (key.as_str(), value) {
                        ("expr", Value::String(expr)) => out.push(expr.clone()),
                        _ => walk(value, out),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(dashboard, &mut out);
    out
}

#[test]
fn every_query_uses_exposed_metrics_and_every_provider_metric_is_shown() {
    let path = deploy_dir().join("grafana/capmox-apiserver.json");
    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("dashboard")).expect("JSON");
    let families = exposed();
    let queries = queries(&dashboard);
    assert!(queries.len() >= 15, "{} queries", queries.len());
    let mut used = BTreeSet::new();
    for query in &queries {
        let substituted = query
            .replace("$__rate_interval", "5m")
            .replace("$job", ".*");
        let expr = parser::parse(&substituted).unwrap_or_else(|e| panic!("{query}: {e}"));
        check(&expr, &families, &mut used, query);
    }
    let provider: BTreeSet<String> = families
        .keys()
        .filter(|f| f.starts_with("capmox_"))
        .cloned()
        .collect();
    let missing: Vec<_> = provider.difference(&used).collect();
    assert!(missing.is_empty(), "not on the dashboard: {missing:?}");

    // Panels are placed without overlap, each with its own id, on the chosen data source.
    let panels = dashboard["panels"].as_array().expect("panels");
    let ids: BTreeSet<u64> = panels.iter().filter_map(|p| p["id"].as_u64()).collect();
    assert_eq!(ids.len(), panels.len(), "unique panel ids");
    let mut cells = BTreeSet::new();
    for panel in panels {
        let grid = &panel["gridPos"];
        let [x, y, w, h] = ["x", "y", "w", "h"].map(|k| grid[k].as_u64().expect("gridPos"));
        assert!(
            x + w <= 24,
            "{} is wider than the dashboard",
            panel["title"]
        );
        for cell in (x..x + w).flat_map(|cx| (y..y + h).map(move |cy| (cx, cy))) {
            assert!(
                cells.insert(cell),
                "{} overlaps another panel",
                panel["title"]
            );
        }
        if panel["type"] != "row" {
            assert_eq!(
                panel["datasource"]["uid"], "${datasource}",
                "{}",
                panel["title"]
            );
        }
    }
}
