//! Validation of `metadata` with kube's paths and messages (apimachinery
//! `api/validation/objectmeta.go`, as custom resources use it: names are DNS-1123
//! subdomains), and `generateName` name generation.
//!
//! Works on the JSON form so that a malformed field (a number where a string belongs) is
//! reported at its path instead of failing a typed decode.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::field_error::{BadValue, FieldError, FieldPath};
use super::validation::{
    is_label_value, is_qualified_name, name_is_dns_label, name_is_dns_subdomain,
    name_is_path_segment,
};

/// Total size limit of all annotation keys and values (256 KiB).
pub const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;
/// Field manager names are at most this long.
pub const FIELD_MANAGER_MAX_LENGTH: usize = 128;
const MAX_SUBRESOURCE_NAME_LENGTH: usize = 256;

pub const FINALIZER_ORPHAN_DEPENDENTS: &str = "orphan";
pub const FINALIZER_DELETE_DEPENDENTS: &str = "foregroundDeletion";

fn metadata_path() -> FieldPath {
    FieldPath::new("metadata")
}

/// Reads a value of the expected JSON type: `None` when absent or null, and also when of
/// another type, which is reported (kube would have failed to decode it).
fn typed<'a, T>(
    value: Option<&'a Value>,
    path: &FieldPath,
    errs: &mut Vec<FieldError>,
    expected: &str,
    get: impl Fn(&'a Value) -> Option<T>,
) -> Option<T> {
    let value = value.filter(|v| !v.is_null())?;
    let typed = get(value);
    if typed.is_none() {
        errs.push(FieldError::type_invalid(
            path,
            BadValue::from_json(value),
            expected,
        ));
    }
    typed
}

fn string_field<'a>(
    meta: &'a Map<String, Value>,
    key: &str,
    path: &FieldPath,
    errs: &mut Vec<FieldError>,
) -> &'a str {
    typed(
        meta.get(key),
        &path.child(key),
        errs,
        "must be a string",
        Value::as_str,
    )
    .unwrap_or("")
}

fn as_object<'a>(
    value: &'a Value,
    path: &FieldPath,
    errs: &mut Vec<FieldError>,
) -> Option<&'a Map<String, Value>> {
    typed(
        Some(value),
        path,
        errs,
        "must be an object",
        Value::as_object,
    )
}

fn string_map<'a>(
    value: Option<&'a Value>,
    path: &FieldPath,
    errs: &mut Vec<FieldError>,
) -> Vec<(&'a str, &'a str)> {
    let Some(map) = typed(value, path, errs, "must be an object", Value::as_object) else {
        return Vec::new();
    };
    map.iter()
        .filter_map(|(k, v)| {
            typed(
                Some(v),
                &path.key(k),
                errs,
                "must be a string",
                Value::as_str,
            )
            .map(|s| (k.as_str(), s))
        })
        .collect()
}

fn array<'a>(
    value: Option<&'a Value>,
    path: &FieldPath,
    errs: &mut Vec<FieldError>,
) -> &'a [Value] {
    typed(value, path, errs, "must be an array", Value::as_array).map_or(&[], Vec::as_slice)
}

/// `ValidateLabels`: keys are qualified names, values valid label values.
pub fn validate_labels(labels: Option<&Value>, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (k, v) in string_map(labels, path, &mut errs) {
        for msg in is_qualified_name(k) {
            errs.push(FieldError::invalid(path, k, msg));
        }
        for msg in is_label_value(v) {
            errs.push(FieldError::invalid(path, v, msg));
        }
    }
    errs
}

/// `ValidateAnnotations`: keys are qualified names (case-insensitive), total size ≤ 256 KiB.
pub fn validate_annotations(annotations: Option<&Value>, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let pairs = string_map(annotations, path, &mut errs);
    for (k, _) in &pairs {
        for msg in is_qualified_name(&k.to_lowercase()) {
            errs.push(FieldError::invalid(path, *k, msg));
        }
    }
    let total: usize = pairs.iter().map(|(k, v)| k.len() + v.len()).sum();
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        errs.push(FieldError::too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT));
    }
    errs
}

/// `ValidateFinalizers`: qualified names; `orphan` and `foregroundDeletion` are exclusive.
pub fn validate_finalizers(finalizers: Option<&Value>, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let items = array(finalizers, path, &mut errs);
    let mut names = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        if let Some(name) = typed(
            Some(item),
            &path.index(i),
            &mut errs,
            "must be a string",
            Value::as_str,
        ) {
            for msg in is_qualified_name(name) {
                errs.push(FieldError::invalid(path, name, msg));
            }
            names.push(name);
        }
    }
    if names.contains(&FINALIZER_ORPHAN_DEPENDENTS) && names.contains(&FINALIZER_DELETE_DEPENDENTS)
    {
        errs.push(FieldError::invalid(
            path,
            Value::from(names.clone()),
            format!("finalizer {FINALIZER_ORPHAN_DEPENDENTS} and {FINALIZER_DELETE_DEPENDENTS} cannot be both set"),
        ));
    }
    errs
}

/// `ValidateNoNewFinalizers`: a terminating object may only lose finalizers.
pub fn validate_no_new_finalizers(
    new: Option<&Value>,
    old: Option<&Value>,
    path: &FieldPath,
) -> Vec<FieldError> {
    let names = |v: Option<&Value>| -> BTreeSet<String> {
        super::lifecycle::string_items(v)
            .map(str::to_owned)
            .collect()
    };
    let old = names(old);
    let extra: Vec<String> = names(new)
        .into_iter()
        .filter(|n| !old.contains(n))
        .collect();
    if extra.is_empty() {
        return Vec::new();
    }
    let quoted: Vec<String> = extra.iter().map(|n| super::gofmt::quote(n)).collect();
    vec![FieldError::forbidden(
        path,
        format!(
            "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
            quoted.join(", ")
        ),
    )]
}

/// `ValidateOwnerReferences`: complete references, at most one controller.
pub fn validate_owner_references(refs: Option<&Value>, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let items = array(refs, path, &mut errs);
    let mut first_controller: Option<String> = None;
    for (i, item) in items.iter().enumerate() {
        let ref_path = path.index(i);
        let Some(reference) = as_object(item, &ref_path, &mut errs) else {
            continue;
        };
        let api_version = string_field(reference, "apiVersion", &ref_path, &mut errs);
        let kind = string_field(reference, "kind", &ref_path, &mut errs);
        let name = string_field(reference, "name", &ref_path, &mut errs);
        let uid = string_field(reference, "uid", &ref_path, &mut errs);
        let version_ok = match api_version.matches('/').count() {
            0 => true,
            1 => api_version
                .split_once('/')
                .is_some_and(|(_, v)| !v.is_empty()),
            _ => false,
        };
        if api_version.is_empty() {
            errs.push(FieldError::required(
                &ref_path.child("apiVersion"),
                "must not be empty",
            ));
        } else if !version_ok {
            errs.push(FieldError::invalid(
                &ref_path.child("apiVersion"),
                api_version,
                "must be <group>/<version> or <version>",
            ));
        }
        for (field, value) in [("kind", kind), ("name", name), ("uid", uid)] {
            if value.is_empty() {
                errs.push(FieldError::required(
                    &ref_path.child(field),
                    "must not be empty",
                ));
            }
        }
        if api_version == "v1" && kind == "Event" {
            errs.push(FieldError::invalid(
                &ref_path,
                item.clone(),
                "/v1, Kind=Event is disallowed from being an owner",
            ));
        }
        if reference.get("controller").and_then(Value::as_bool) == Some(true) {
            let current = format!("{kind}/{name}");
            match &first_controller {
                Some(first) => errs.push(FieldError::invalid(
                    path,
                    Value::from(items.to_vec()),
                    format!(
                        "Only one reference can have Controller set to true. Found \"true\" in references for {first} and {current}"
                    ),
                )),
                None => first_controller = Some(current),
            }
        }
    }
    errs
}

/// `ValidateFieldManager`: at most 128 bytes of printable characters.
pub fn validate_field_manager(manager: &str, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if manager.len() > FIELD_MANAGER_MAX_LENGTH {
        errs.push(FieldError::too_long(path, FIELD_MANAGER_MAX_LENGTH));
    }
    for (i, c) in manager.char_indices() {
        if c.is_control() {
            errs.push(FieldError::invalid(
                path,
                manager,
                format!("invalid character U+{:04X} (at position {i})", c as u32),
            ));
        }
    }
    errs
}

/// `ValidateManagedFields`: operation Apply/Update, fieldsType FieldsV1, valid manager.
pub fn validate_managed_fields(entries: Option<&Value>, path: &FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, entry) in array(entries, path, &mut errs).iter().enumerate() {
        let entry_path = path.index(i);
        let Some(entry) = as_object(entry, &entry_path, &mut errs) else {
            continue;
        };
        match string_field(entry, "operation", &entry_path, &mut errs) {
            "" => errs.push(FieldError::required(
                &entry_path.child("operation"),
                "must not be empty",
            )),
            "Apply" | "Update" => {}
            other => errs.push(FieldError::not_supported(
                &entry_path.child("operation"),
                other,
                &["Apply", "Update"],
            )),
        }
        let fields_type = string_field(entry, "fieldsType", &entry_path, &mut errs);
        if !fields_type.is_empty() && fields_type != "FieldsV1" {
            errs.push(FieldError::invalid(
                &entry_path.child("fieldsType"),
                fields_type,
                "must be `FieldsV1`",
            ));
        }
        let manager = string_field(entry, "manager", &entry_path, &mut errs);
        errs.extend(validate_field_manager(
            manager,
            &entry_path.child("manager"),
        ));
        if string_field(entry, "subresource", &entry_path, &mut errs).len()
            > MAX_SUBRESOURCE_NAME_LENGTH
        {
            errs.push(FieldError::too_long(
                &entry_path.child("subresource"),
                MAX_SUBRESOURCE_NAME_LENGTH,
            ));
        }
    }
    errs
}

fn integer(meta: &Map<String, Value>, key: &str) -> Option<i64> {
    meta.get(key).and_then(Value::as_i64)
}

fn validate_generation(meta: &Map<String, Value>, path: &FieldPath, errs: &mut Vec<FieldError>) {
    if let Some(generation) = integer(meta, "generation").filter(|g| *g < 0) {
        errs.push(FieldError::invalid(
            &path.child("generation"),
            generation,
            "must be greater than or equal to 0",
        ));
    }
}

/// A check of one metadata field, given its value and path.
type FieldCheck = fn(Option<&Value>, &FieldPath) -> Vec<FieldError>;

/// Runs field checks in order, each on `metadata.<field>`.
fn run_checks(
    meta: &Map<String, Value>,
    path: &FieldPath,
    errs: &mut Vec<FieldError>,
    checks: &[(&str, FieldCheck)],
) {
    for (field, check) in checks {
        errs.extend(check(meta.get(*field), &path.child(field)));
    }
}

/// Label, annotation and owner reference checks shared by create and update.
const COMMON_CHECKS: &[(&str, FieldCheck)] = &[
    ("labels", validate_labels),
    ("annotations", validate_annotations),
    ("ownerReferences", validate_owner_references),
];

/// `ValidateObjectMetaAccessor` with `NameIsDNSSubdomain`, as for custom resources on create.
/// The name must already be generated from `generateName` when one was given.
pub fn validate_create(metadata: Option<&Value>, namespaced: bool) -> Vec<FieldError> {
    let rules = MetaRules {
        name: name_is_dns_subdomain,
        name_required: true,
        namespaced,
    };
    validate_object_meta(metadata, &metadata_path(), &rules)
}

/// The `metadata` of an object embedded in a custom resource (`x-kubernetes-embedded-resource`),
/// as apiextensions validates it: names need only be URL path segments, a missing name is
/// fine, and a namespace is checked only when one is given.
pub fn validate_embedded(metadata: &Value, path: &FieldPath) -> Vec<FieldError> {
    let rules = MetaRules {
        name: name_is_path_segment,
        name_required: false,
        namespaced: metadata
            .get("namespace")
            .and_then(Value::as_str)
            .is_some_and(|ns| !ns.is_empty()),
    };
    validate_object_meta(Some(metadata), path, &rules)
}

/// What `ValidateObjectMetaAccessor` is told of an object.
struct MetaRules {
    /// How names (and `generateName` prefixes) are checked.
    name: fn(&str, bool) -> Vec<String>,
    /// Whether a name is required.
    name_required: bool,
    /// Whether a namespace is required (otherwise one is forbidden).
    namespaced: bool,
}

fn validate_object_meta(
    metadata: Option<&Value>,
    path: &FieldPath,
    rules: &MetaRules,
) -> Vec<FieldError> {
    let path = path.clone();
    let mut errs = Vec::new();
    let empty = Map::new();
    let meta = metadata
        .and_then(|m| as_object(m, &path, &mut errs))
        .unwrap_or(&empty);
    let generate_name = string_field(meta, "generateName", &path, &mut errs);
    if !generate_name.is_empty() {
        for msg in (rules.name)(generate_name, true) {
            errs.push(FieldError::invalid(
                &path.child("generateName"),
                generate_name,
                msg,
            ));
        }
    }
    let name = string_field(meta, "name", &path, &mut errs);
    if name.is_empty() {
        if rules.name_required {
            errs.push(FieldError::required(
                &path.child("name"),
                "name or generateName is required",
            ));
        }
    } else {
        for msg in (rules.name)(name, false) {
            errs.push(FieldError::invalid(&path.child("name"), name, msg));
        }
    }
    let namespace = string_field(meta, "namespace", &path, &mut errs);
    if rules.namespaced {
        if namespace.is_empty() {
            errs.push(FieldError::required(&path.child("namespace"), ""));
        } else {
            for msg in name_is_dns_label(namespace, false) {
                errs.push(FieldError::invalid(
                    &path.child("namespace"),
                    namespace,
                    msg,
                ));
            }
        }
    } else if !namespace.is_empty() {
        errs.push(FieldError::forbidden(
            &path.child("namespace"),
            "not allowed on this type",
        ));
    }
    validate_generation(meta, &path, &mut errs);
    run_checks(meta, &path, &mut errs, COMMON_CHECKS);
    run_checks(
        meta,
        &path,
        &mut errs,
        &[
            ("finalizers", validate_finalizers),
            ("managedFields", validate_managed_fields),
        ],
    );
    errs
}

/// `ValidateObjectMetaAccessorUpdate`: immutable identity, no new finalizers while
/// terminating, a resourceVersion, and the shared checks, finalizer names included (kube's
/// `validateCommonFields` runs the create checks on every update too).
pub fn validate_update(new: Option<&Value>, old: Option<&Value>) -> Vec<FieldError> {
    let path = metadata_path();
    let mut errs = Vec::new();
    let empty = Map::new();
    let new_meta = new
        .and_then(|m| as_object(m, &path, &mut errs))
        .unwrap_or(&empty);
    let old_meta = old.and_then(Value::as_object).unwrap_or(&empty);

    if old_meta
        .get("deletionTimestamp")
        .is_some_and(|v| !v.is_null())
    {
        errs.extend(validate_no_new_finalizers(
            new_meta.get("finalizers"),
            old_meta.get("finalizers"),
            &path.child("finalizers"),
        ));
    }
    let rv = string_field(new_meta, "resourceVersion", &path, &mut errs);
    if rv.is_empty() {
        errs.push(FieldError::invalid(
            &path.child("resourceVersion"),
            rv,
            "must be specified for an update",
        ));
    }
    validate_generation(new_meta, &path, &mut errs);
    if let (Some(new_gen), Some(old_gen)) = (
        integer(new_meta, "generation"),
        integer(old_meta, "generation"),
    ) && new_gen < old_gen
    {
        errs.push(FieldError::invalid(
            &path.child("generation"),
            new_gen,
            "must not be decremented",
        ));
    }
    for field in [
        "name",
        "namespace",
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
    ] {
        let null = Value::Null;
        let new_value = new_meta.get(field).unwrap_or(&null);
        let old_value = old_meta.get(field).unwrap_or(&null);
        if !same_value(new_value, old_value) {
            errs.push(FieldError::invalid(
                &path.child(field),
                BadValue::from_json(new_value),
                "field is immutable",
            ));
        }
    }
    run_checks(new_meta, &path, &mut errs, COMMON_CHECKS);
    run_checks(
        new_meta,
        &path,
        &mut errs,
        &[
            ("finalizers", validate_finalizers),
            ("managedFields", validate_managed_fields),
        ],
    );
    errs
}

/// Equality where an empty string and an absent/null field are the same (Go zero values).
fn same_value(a: &Value, b: &Value) -> bool {
    let normalise = |v: &Value| match v {
        Value::String(s) if s.is_empty() => Value::Null,
        other => other.clone(),
    };
    normalise(a) == normalise(b)
}

/// The alphabet of generated name suffixes (no vowels, no confusable characters).
const NAME_SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
const GENERATED_SUFFIX_LENGTH: usize = 5;
/// `maxNameLength (63) - randomLength (5)`: kube truncates longer prefixes.
pub const MAX_GENERATED_PREFIX_LENGTH: usize = 63 - GENERATED_SUFFIX_LENGTH;

/// `SimpleNameGenerator.GenerateName`: the (truncated) prefix plus 5 random characters.
pub fn generate_name(prefix: &str) -> String {
    let mut cut = prefix.len().min(MAX_GENERATED_PREFIX_LENGTH);
    while !prefix.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut name = String::with_capacity(cut + GENERATED_SUFFIX_LENGTH);
    name.push_str(&prefix[..cut]);
    name.extend(random_suffix().iter().map(|b| char::from(*b)));
    name
}

fn random_suffix() -> [u8; GENERATED_SUFFIX_LENGTH] {
    use ring::rand::{SecureRandom, SystemRandom};
    let rng = SystemRandom::new();
    let n = NAME_SUFFIX_ALPHABET.len();
    // Largest multiple of the alphabet size below 256, so every letter is equally likely.
    let limit = (256 / n * n) as u16;
    let mut out = [NAME_SUFFIX_ALPHABET[0]; GENERATED_SUFFIX_LENGTH];
    let mut filled = 0;
    let mut buf = [0u8; 16];
    while filled < GENERATED_SUFFIX_LENGTH {
        if rng.fill(&mut buf).is_err() {
            // The OS RNG failing is not recoverable in any meaningful way; fall back to the
            // clock so name generation still makes progress (collisions are retried).
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0);
            buf = [0; 16];
            buf[..4].copy_from_slice(&nanos.to_le_bytes());
        }
        for b in buf {
            if filled == GENERATED_SUFFIX_LENGTH {
                break;
            }
            if u16::from(b) < limit {
                out[filled] = NAME_SUFFIX_ALPHABET[usize::from(b) % n];
                filled += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn valid_metadata_passes() {
        let meta = json!({
            "name": "m1", "namespace": "default",
            "labels": {"cluster.x-k8s.io/cluster-name": "c1", "empty": ""},
            "annotations": {"Example.com/Some-Key": "anything at all"},
            "finalizers": ["proxmoxmachine.infrastructure.cluster.x-k8s.io"],
            "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Machine", "name": "m", "uid": "u", "controller": true}],
            "managedFields": [{"manager": "kubectl", "operation": "Apply", "fieldsType": "FieldsV1"}]
        });
        assert_eq!(
            messages(&validate_create(Some(&meta), true)),
            Vec::<String>::new()
        );
    }

    #[test]
    fn create_errors_match_kube() {
        let meta = json!({
            "name": "Bad_Name", "namespace": "a.b", "generateName": "-x",
            "generation": -1,
            "labels": {"bad key!": "v", "ok": "-bad"},
            "finalizers": ["orphan", "foregroundDeletion", "a/b/c"],
            "ownerReferences": [
                {"apiVersion": "a/b/c", "kind": "K", "name": "n", "uid": "1", "controller": true},
                {"apiVersion": "", "kind": "", "name": "n2", "uid": "", "controller": true}
            ]
        });
        let got = messages(&validate_create(Some(&meta), true));
        let subdomain = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric \
            characters, '-' or '.', and must start and end with an alphanumeric character (e.g. \
            'example.com', regex used for validation is \
            '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
        let expected_prefixes = [
            format!("metadata.generateName: Invalid value: \"-x\": {subdomain}"),
            format!("metadata.name: Invalid value: \"Bad_Name\": {subdomain}"),
            "metadata.namespace: Invalid value: \"a.b\": must not contain dots".to_owned(),
            "metadata.generation: Invalid value: -1: must be greater than or equal to 0".to_owned(),
            "metadata.labels: Invalid value: \"bad key!\": name part must consist of alphanumeric characters".to_owned(),
            "metadata.labels: Invalid value: \"-bad\": a valid label must be an empty string".to_owned(),
            "metadata.ownerReferences[0].apiVersion: Invalid value: \"a/b/c\": must be <group>/<version> or <version>".to_owned(),
            "metadata.ownerReferences[1].apiVersion: Required value: must not be empty".to_owned(),
            "metadata.ownerReferences[1].kind: Required value: must not be empty".to_owned(),
            "metadata.ownerReferences[1].uid: Required value: must not be empty".to_owned(),
            "metadata.ownerReferences: Invalid value: [".to_owned(),
            "metadata.finalizers: Invalid value: \"a/b/c\": a valid label key must consist".to_owned(),
            "metadata.finalizers: Invalid value: [\"orphan\",\"foregroundDeletion\",\"a/b/c\"]: finalizer orphan and foregroundDeletion cannot be both set".to_owned(),
        ];
        assert_eq!(got.len(), expected_prefixes.len(), "{got:#?}");
        for (got, want) in got.iter().zip(&expected_prefixes) {
            assert!(
                got.starts_with(want.as_str()),
                "got {got}\nwant prefix {want}"
            );
        }
        assert!(got[10].ends_with(
            "Only one reference can have Controller set to true. Found \"true\" in references for K/n and /n2"
        ));
    }

    #[test]
    fn names_and_namespaces() {
        assert_eq!(
            messages(&validate_create(
                Some(&json!({"namespace": "default"})),
                true
            )),
            ["metadata.name: Required value: name or generateName is required"]
        );
        assert_eq!(
            messages(&validate_create(Some(&json!({"name": "a"})), true)),
            ["metadata.namespace: Required value"]
        );
        assert_eq!(
            messages(&validate_create(
                Some(&json!({"name": "a", "namespace": "x"})),
                false
            )),
            ["metadata.namespace: Forbidden: not allowed on this type"]
        );
        assert_eq!(
            messages(&validate_create(
                Some(&json!({"name": 5, "namespace": "x"})),
                true
            )),
            [
                "metadata.name: Invalid value: 5: must be a string",
                "metadata.name: Required value: name or generateName is required"
            ]
        );
    }

    #[test]
    fn annotation_size_limit() {
        let big = "x".repeat(TOTAL_ANNOTATION_SIZE_LIMIT);
        let meta = json!({"name": "a", "namespace": "n", "annotations": {"k": big}});
        assert_eq!(
            messages(&validate_create(Some(&meta), true)),
            ["metadata.annotations: Too long: may not be more than 262144 bytes"]
        );
    }

    #[test]
    fn update_rules() {
        let old = json!({"name": "a", "namespace": "n", "uid": "u1", "resourceVersion": "5",
                         "generation": 3, "creationTimestamp": "2026-01-01T00:00:00Z",
                         "deletionTimestamp": "2026-01-02T00:00:00Z", "finalizers": ["a.io/x"]});
        let new = json!({"name": "b", "namespace": "n", "uid": "u2", "generation": 2,
                         "creationTimestamp": "2026-01-01T00:00:00Z",
                         "deletionTimestamp": "2026-01-02T00:00:00Z", "finalizers": ["a.io/x", "b.io/y"]});
        assert_eq!(
            messages(&validate_update(Some(&new), Some(&old))),
            [
                "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{\"b.io/y\"}",
                "metadata.resourceVersion: Invalid value: \"\": must be specified for an update",
                "metadata.generation: Invalid value: 2: must not be decremented",
                "metadata.name: Invalid value: \"b\": field is immutable",
                "metadata.uid: Invalid value: \"u2\": field is immutable",
            ]
        );
        let same = json!({"name": "a", "namespace": "n", "uid": "u1", "resourceVersion": "5", "generation": 3,
                          "creationTimestamp": "2026-01-01T00:00:00Z", "deletionTimestamp": "2026-01-02T00:00:00Z"});
        assert!(validate_update(Some(&same), Some(&old)).is_empty());
    }

    #[test]
    fn managed_fields_and_field_manager() {
        let meta = json!({"name": "a", "namespace": "n", "managedFields": [
            {"manager": "m", "operation": "Patch", "fieldsType": "FieldsV2"},
            {"manager": "bad\u{7}", "operation": ""}
        ]});
        assert_eq!(
            messages(&validate_create(Some(&meta), true)),
            [
                "metadata.managedFields[0].operation: Unsupported value: \"Patch\": supported values: \"Apply\", \"Update\"",
                "metadata.managedFields[0].fieldsType: Invalid value: \"FieldsV2\": must be `FieldsV1`",
                "metadata.managedFields[1].operation: Required value: must not be empty",
                "metadata.managedFields[1].manager: Invalid value: \"bad\\a\": invalid character U+0007 (at position 3)",
            ]
        );
        assert_eq!(
            messages(&validate_field_manager(
                &"m".repeat(129),
                &FieldPath::new("fieldManager")
            )),
            ["fieldManager: Too long: may not be more than 128 bytes"]
        );
    }

    #[test]
    fn generated_names() {
        let name = generate_name("web-");
        assert_eq!(name.len(), 9);
        assert!(name.starts_with("web-"));
        assert!(
            name[4..].bytes().all(|b| NAME_SUFFIX_ALPHABET.contains(&b)),
            "{name}"
        );
        let long = generate_name(&"p".repeat(100));
        assert_eq!(long.len(), 63);
        let names: BTreeSet<String> = (0..50).map(|_| generate_name("x-")).collect();
        assert!(names.len() > 45, "suffixes should be random: {names:?}");
        assert!(name_is_dns_subdomain(&generate_name("web-"), false).is_empty());
    }
}
