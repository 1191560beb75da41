//! How the items of set and map lists are named in field paths.

use serde_json::Value;

use super::schema::{ListKind, Ty};
use crate::registry::apply::fieldpath::PathElement;

/// Why a list item cannot be named.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ItemError {
    /// A list-map item that is null.
    #[error("associative list with keys may not have a null element")]
    NullKeyed,
    /// A list-map item that is not an object.
    #[error("associative list with keys may not have non-map elements")]
    NotAMap,
    /// A list-map item with none of the key fields.
    #[error(
        "associative list with keys has an element that omits all key fields {0:?} (and doesn't have default values for any key fields)"
    )]
    NoKeys(Vec<String>),
    /// A set item that is an object.
    #[error("associative list without keys has an element that's a map type")]
    SetOfMaps,
    /// A set item that is a list.
    #[error("not supported: associative list with lists as elements")]
    SetOfLists,
    /// A set item that is null.
    #[error("associative list without keys has an element that's an explicit null")]
    NullInSet,
    /// An item of an atomic list has no name.
    #[error("invalid indexing of non-associative list")]
    NotAssociative,
}

/// The path element naming `item` in a list of `kind` whose items have
/// schema `item_ty`: its key fields (defaults filling in absent ones) or
/// its value.
pub fn item_element(kind: ListKind, item_ty: Ty, item: &Value) -> Result<PathElement, ItemError> {
    match kind {
        ListKind::Map(keys) => {
            let fields = match item {
                Value::Object(fields) => fields,
                Value::Null => return Err(ItemError::NullKeyed),
                _ => return Err(ItemError::NotAMap),
            };
            let key: Vec<(String, Value)> = keys
                .iter()
                .filter_map(|name| {
                    let value = fields.get(name).or_else(|| item_ty.field_default(name))?;
                    Some((name.clone(), value.clone()))
                })
                .collect();
            if key.is_empty() {
                return Err(ItemError::NoKeys(keys.to_vec()));
            }
            Ok(PathElement::key(key))
        }
        ListKind::Set => match item {
            Value::Object(_) => Err(ItemError::SetOfMaps),
            Value::Array(_) => Err(ItemError::SetOfLists),
            Value::Null => Err(ItemError::NullInSet),
            scalar => Ok(PathElement::Value(scalar.clone())),
        },
        ListKind::Atomic => Err(ItemError::NotAssociative),
    }
}

/// The elements of a list's items, in order. Items that cannot be named
/// (only in objects that did not pass validation) are named by position,
/// which never equals a key or value element, so they are kept apart.
pub fn item_elements(kind: ListKind, item_ty: Ty, items: &[Value]) -> Vec<PathElement> {
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            item_element(kind, item_ty, item)
                .unwrap_or_else(|_| PathElement::Index(i64::try_from(i).unwrap_or(i64::MAX)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn keyed_items_use_their_keys_and_sets_their_values() {
        let keys = ["name".to_owned()];
        let element = item_element(
            ListKind::Map(&keys),
            Ty::Deduced,
            &json!({"name": "net1", "x": 1}),
        );
        assert_eq!(
            element.map(|e| e.to_fields_key()),
            Ok(r#"k:{"name":"net1"}"#.to_owned())
        );
        assert_eq!(
            item_element(ListKind::Map(&keys), Ty::Deduced, &json!({"x": 1})),
            Err(ItemError::NoKeys(vec!["name".into()]))
        );
        assert_eq!(
            item_element(ListKind::Set, Ty::Deduced, &json!("a")).map(|e| e.to_fields_key()),
            Ok(r#"v:"a""#.to_owned())
        );
        assert_eq!(
            item_element(ListKind::Set, Ty::Deduced, &json!({})),
            Err(ItemError::SetOfMaps)
        );
    }

    #[test]
    fn unnamed_items_fall_back_to_positions() {
        let keys = ["name".to_owned()];
        let elements = item_elements(
            ListKind::Map(&keys),
            Ty::Deduced,
            &[json!({"name": "a"}), json!(3)],
        );
        let shown: Vec<String> = elements.iter().map(PathElement::to_fields_key).collect();
        assert_eq!(shown, [r#"k:{"name":"a"}"#, "i:1"]);
    }
}
