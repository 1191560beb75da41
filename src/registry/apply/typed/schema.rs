//! The structural schema as structured merge reads it: for each node,
//! whether values there are scalars, lists (atomic, sets, or maps keyed by
//! some fields) or maps (granular or atomic), and the schema of what is
//! below. Lists without `x-kubernetes-list-type` are atomic, as for CRDs;
//! nodes without a schema are "deduced" from their value.

use std::sync::LazyLock;

use serde_json::Value;

use crate::api::schema::{JsonType, ListType, MapType, Structural, object_meta_structural};

/// `metadata` as Kubernetes publishes ObjectMeta for server-side apply:
/// `finalizers` is a set, `ownerReferences` a list map keyed by `uid` whose
/// items are atomic, `managedFields` atomic.
static OBJECT_META: LazyLock<Structural> = LazyLock::new(|| {
    let mut meta = object_meta_structural().clone();
    if let Some(finalizers) = meta.properties.get_mut("finalizers") {
        finalizers.list_type = Some(ListType::Set);
    }
    if let Some(owners) = meta.properties.get_mut("ownerReferences") {
        owners.list_type = Some(ListType::Map);
        owners.list_map_keys = vec!["uid".to_owned()];
        if let Some(item) = owners.items.as_deref_mut() {
            item.map_type = Some(MapType::Atomic);
        }
    }
    if let Some(managed) = meta.properties.get_mut("managedFields") {
        managed.list_type = Some(ListType::Atomic);
    }
    meta
});

/// `apiVersion` and `kind`, which kube adds to every CRD schema it types objects with
/// (its OpenAPI builder's type meta), whether the CRD declares them or not.
static TYPE_META_FIELD: LazyLock<Structural> = LazyLock::new(|| Structural {
    type_: Some(JsonType::String),
    ..Structural::default()
});

/// The schema kube gives a root field whatever the kind's schema says: ObjectMeta for
/// `metadata`, a string for `apiVersion` and `kind`.
fn root_field(name: &str) -> Option<(&'static str, &'static Structural)> {
    match name {
        "metadata" => Some(("metadata", &OBJECT_META)),
        "apiVersion" => Some(("apiVersion", &TYPE_META_FIELD)),
        "kind" => Some(("kind", &TYPE_META_FIELD)),
        _ => None,
    }
}

/// The schema at one node of an object.
#[derive(Clone, Copy, Debug)]
pub enum Ty<'a> {
    /// The root of an object of a kind, whose `metadata` is ObjectMeta.
    Object(&'a Structural),
    /// A node with a schema.
    Node(&'a Structural),
    /// No schema: lists are atomic, maps granular, all below deduced too.
    Deduced,
}

/// How a list's items are identified.
#[derive(Clone, Copy, Debug)]
pub enum ListKind<'a> {
    /// Not at all: the list is one value.
    Atomic,
    /// By their (scalar) value.
    Set,
    /// By these key fields.
    Map(&'a [String]),
}

/// What a value at a node is, for merging and ownership.
#[derive(Clone, Copy, Debug)]
pub enum Atom<'a> {
    /// A scalar (or null): one owned leaf.
    Scalar,
    /// A list, with the schema of its items.
    List {
        /// The item schema.
        item: Ty<'a>,
        /// How items are identified.
        kind: ListKind<'a>,
    },
    /// A map or struct.
    Map {
        /// Whether the map is owned and replaced as a whole.
        atomic: bool,
    },
}

impl<'a> Ty<'a> {
    fn structural(self) -> Option<&'a Structural> {
        match self {
            Ty::Object(s) | Ty::Node(s) => Some(s),
            Ty::Deduced => None,
        }
    }

    /// What `value` is at this node. Typed nodes say so whatever the value;
    /// untyped nodes are deduced from the value (absent or null: a map).
    pub fn atom(self, value: Option<&Value>) -> Atom<'a> {
        let typed = self.structural().and_then(|s| {
            let structured = !s.properties.is_empty() || s.additional_properties.is_some();
            match s.type_ {
                Some(JsonType::Object) => Some(Atom::Map {
                    atomic: s.map_type == Some(MapType::Atomic),
                }),
                None if structured => Some(Atom::Map {
                    atomic: s.map_type == Some(MapType::Atomic),
                }),
                Some(JsonType::Array) => Some(Atom::List {
                    item: s.items.as_deref().map_or(Ty::Deduced, Ty::Node),
                    kind: match s.list_type {
                        Some(ListType::Set) => ListKind::Set,
                        Some(ListType::Map) if s.list_map_keys.is_empty() => ListKind::Set,
                        Some(ListType::Map) => ListKind::Map(&s.list_map_keys),
                        Some(ListType::Atomic) | None => ListKind::Atomic,
                    },
                }),
                Some(
                    JsonType::String | JsonType::Integer | JsonType::Number | JsonType::Boolean,
                ) => Some(Atom::Scalar),
                None => None,
            }
        });
        typed.unwrap_or(match value {
            Some(Value::Array(_)) => Atom::List {
                item: Ty::Deduced,
                kind: ListKind::Atomic,
            },
            Some(Value::Object(_) | Value::Null) | None => Atom::Map { atomic: false },
            Some(_) => Atom::Scalar,
        })
    }

    /// The schema of field or map key `name` below this node; `None` when
    /// the schema does not allow it.
    pub fn field(self, name: &str) -> Option<Ty<'a>> {
        let s = match self {
            Ty::Object(s) => match root_field(name) {
                Some((_, field)) => return Some(Ty::Node(field)),
                None => s,
            },
            Ty::Node(s) => s,
            Ty::Deduced => return Some(Ty::Deduced),
        };
        if let Some(property) = s.properties.get(name) {
            return Some(Ty::Node(property));
        }
        if let Some(values) = s.additional_properties.as_deref() {
            return Some(Ty::Node(values));
        }
        let free_form = s.properties.is_empty() && s.type_ != Some(JsonType::Array);
        (s.preserve_unknown_fields || free_form).then_some(Ty::Deduced)
    }

    /// The schema of field or map key `name` and, when it is a declared
    /// struct field, the schema's own name for it (one lookup for both).
    pub fn lookup(self, name: &str) -> Option<(Ty<'a>, Option<&'a str>)> {
        let s = match self {
            Ty::Object(s) => match root_field(name) {
                Some((declared, field)) => return Some((Ty::Node(field), Some(declared))),
                None => s,
            },
            Ty::Node(s) => s,
            Ty::Deduced => return Some((Ty::Deduced, None)),
        };
        if let Some((declared, property)) = s.properties.get_key_value(name) {
            return Some((Ty::Node(property), Some(declared.as_str())));
        }
        self.field(name).map(|ty| (ty, None))
    }

    /// Whether `name` is a declared field of this struct (not a map key).
    pub fn declares(self, name: &str) -> bool {
        match self {
            Ty::Object(s) => root_field(name).is_some() || s.properties.contains_key(name),
            Ty::Node(s) => s.properties.contains_key(name),
            Ty::Deduced => false,
        }
    }

    /// The schema of the field below this node, or deduced when the schema
    /// does not allow it (only for values the schema was checked against).
    pub fn field_or_deduced(self, name: &str) -> Ty<'a> {
        self.field(name).unwrap_or(Ty::Deduced)
    }

    /// The default of field `name`, used for list-map keys left out.
    pub fn field_default(self, name: &str) -> Option<&'a Value> {
        self.structural()?.properties.get(name)?.default.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::{Kind, Version, schema::structural};

    #[test]
    fn machine_schema_atoms() {
        let root = Ty::Object(structural(Version::V1alpha2, Kind::ProxmoxMachine));
        let network = root
            .field("spec")
            .and_then(|s| s.field("network"))
            .expect("spec.network");
        let Some(devices) = network.field("networkDevices") else {
            panic!("networkDevices");
        };
        let Atom::List {
            item,
            kind: ListKind::Map(keys),
        } = devices.atom(None)
        else {
            panic!("networkDevices is a list map");
        };
        assert_eq!(keys, ["name"]);
        let pool_ref = item.field("ipPoolRef").expect("ipPoolRef");
        assert!(matches!(
            pool_ref.atom(None),
            Atom::List {
                kind: ListKind::Atomic,
                ..
            }
        ));
        let Atom::List {
            item: reference, ..
        } = pool_ref.atom(None)
        else {
            panic!("list");
        };
        assert!(matches!(reference.atom(None), Atom::Map { atomic: true }));
        assert!(matches!(
            root.field("spec")
                .and_then(|s| s.field("tags"))
                .map(|t| t.atom(None)),
            Some(Atom::List {
                kind: ListKind::Set,
                ..
            })
        ));
        assert!(root.field("spec").and_then(|s| s.field("bogus")).is_none());
    }

    #[test]
    fn metadata_lists_have_kubernetes_list_types() {
        let root = Ty::Object(structural(Version::V1alpha2, Kind::ProxmoxMachine));
        let meta = root.field("metadata").expect("metadata");
        assert!(matches!(
            meta.field("finalizers").map(|t| t.atom(None)),
            Some(Atom::List {
                kind: ListKind::Set,
                ..
            })
        ));
        assert!(matches!(
            meta.field("ownerReferences").map(|t| t.atom(None)),
            Some(Atom::List {
                kind: ListKind::Map([uid]),
                ..
            }) if uid == "uid"
        ));
        let labels = meta.field("labels").expect("labels");
        assert!(matches!(labels.atom(None), Atom::Map { atomic: false }));
        assert!(!labels.declares("app"));
        assert!(labels.field("app").is_some());
    }

    #[test]
    fn deduced_nodes_follow_the_value() {
        assert!(matches!(
            Ty::Deduced.atom(Some(&json!([1]))),
            Atom::List {
                kind: ListKind::Atomic,
                ..
            }
        ));
        assert!(matches!(Ty::Deduced.atom(Some(&json!("a"))), Atom::Scalar));
        assert!(matches!(
            Ty::Deduced.atom(Some(&json!({}))),
            Atom::Map { atomic: false }
        ));
    }
}
