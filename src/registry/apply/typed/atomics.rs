//! Where an apply configuration sets an atomic list, map or struct as a whole (as
//! structured-merge-diff's typed values tell them apart). Merging such a configuration
//! replaces the live value outright, dropping what it does not name, so callers that merge
//! without ownership refuse it: kube's MutatingAdmissionPolicies do.

use serde_json::Value;

use super::schema::{Atom, Ty};

/// The paths, sorted and in structured-merge-diff's notation (`.spec.tags`,
/// `.spec.disks[0].labels`), at which `value` holds an atomic list, map or struct of schema
/// `ty`. Nodes without a schema are not examined, nor are the entries of maps keyed by
/// arbitrary strings.
pub fn atomic_paths(value: &Value, ty: Ty) -> Vec<String> {
    let mut found = Vec::new();
    walk(value, ty, &mut String::new(), &mut found);
    found.sort();
    found
}

fn walk(value: &Value, ty: Ty, path: &mut String, found: &mut Vec<String>) {
    if matches!(ty, Ty::Deduced) {
        return;
    }
    match (ty.atom(Some(value)), value) {
        (Atom::Map { atomic }, Value::Object(fields)) => {
            if atomic {
                found.push(path.clone());
            }
            for (name, child) in fields {
                let Some((child_ty, Some(_declared))) = ty.lookup(name) else {
                    continue;
                };
                let len = path.len();
                path.push('.');
                path.push_str(name);
                walk(child, child_ty, path, found);
                path.truncate(len);
            }
        }
        (Atom::List { item, kind }, Value::Array(items)) => {
            if matches!(kind, super::ListKind::Atomic) {
                found.push(path.clone());
            }
            for (i, child) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                walk(child, item, path, found);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{Kind, Version, schema};
    use serde_json::json;

    #[test]
    fn atomic_lists_are_named_granular_maps_and_list_maps_are_not() {
        let ty = Ty::Object(schema::structural(Version::V1alpha2, Kind::ProxmoxMachine));
        let granular = json!({"metadata": {"labels": {"a": "b"}}, "spec": {"numCores": 2}});
        assert_eq!(atomic_paths(&granular, ty), Vec::<String>::new());
        let atomic = json!({"spec": {"tags": ["a"], "network": {"networkDevices": [
            {"name": "net0", "routes": [{"table": 1}], "ipPoolRef": [{"name": "p"}]},
        ]}}});
        assert_eq!(
            atomic_paths(&atomic, ty),
            vec![
                ".spec.network.networkDevices[0].ipPoolRef".to_owned(),
                ".spec.network.networkDevices[0].ipPoolRef[0]".to_owned(),
                ".spec.network.networkDevices[0].routes".to_owned(),
            ]
        );
    }
}
