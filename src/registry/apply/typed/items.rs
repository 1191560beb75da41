//! How the items of set and map lists are named in field paths.

use std::cmp::Ordering;

use serde_json::Value;

use super::schema::{ListKind, Ty};
use crate::registry::apply::fieldpath::{PathElement, value as json_value};

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

/// The name of a list item, borrowed from the item (or from the schema's
/// key defaults): ordered and compared exactly as its [`PathElement`], so
/// items can be matched without building owned paths.
#[derive(Clone, Debug)]
pub enum ItemName<'v> {
    /// Key fields, sorted by name.
    Key(Vec<(&'v str, &'v Value)>),
    /// A set item's value.
    Value(&'v Value),
    /// An item that cannot be named, by position.
    Index(usize),
}

impl ItemName<'_> {
    /// The owned path element.
    pub fn to_element(&self) -> PathElement {
        match self {
            ItemName::Key(fields) => PathElement::Key(
                fields
                    .iter()
                    .map(|(name, value)| ((*name).to_owned(), (*value).clone()))
                    .collect(),
            ),
            ItemName::Value(value) => PathElement::Value((*value).clone()),
            ItemName::Index(i) => PathElement::Index(i64::try_from(*i).unwrap_or(i64::MAX)),
        }
    }

    fn rank(&self) -> u8 {
        match self {
            ItemName::Key(_) => 1,
            ItemName::Value(_) => 2,
            ItemName::Index(_) => 3,
        }
    }
}

impl Ord for ItemName<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (ItemName::Key(a), ItemName::Key(b)) => {
                for ((an, av), (bn, bv)) in a.iter().zip(b) {
                    let c = an.cmp(bn).then_with(|| json_value::compare(av, bv));
                    if c != Ordering::Equal {
                        return c;
                    }
                }
                a.len().cmp(&b.len())
            }
            (ItemName::Value(a), ItemName::Value(b)) => json_value::compare(a, b),
            (ItemName::Index(a), ItemName::Index(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

impl PartialOrd for ItemName<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for ItemName<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for ItemName<'_> {}

/// The name of `item` in a list of `kind` whose items have schema
/// `item_ty`: its key fields (defaults filling in absent ones) or its value.
pub fn item_name<'v>(
    kind: ListKind<'v>,
    item_ty: Ty<'v>,
    item: &'v Value,
) -> Result<ItemName<'v>, ItemError> {
    match kind {
        ListKind::Map(keys) => {
            let fields = match item {
                Value::Object(fields) => fields,
                Value::Null => return Err(ItemError::NullKeyed),
                _ => return Err(ItemError::NotAMap),
            };
            let mut key: Vec<(&str, &Value)> = keys
                .iter()
                .filter_map(|name| {
                    let value = fields.get(name).or_else(|| item_ty.field_default(name))?;
                    Some((name.as_str(), value))
                })
                .collect();
            if key.is_empty() {
                return Err(ItemError::NoKeys(keys.to_vec()));
            }
            key.sort_by(|a, b| a.0.cmp(b.0));
            Ok(ItemName::Key(key))
        }
        ListKind::Set => match item {
            Value::Object(_) => Err(ItemError::SetOfMaps),
            Value::Array(_) => Err(ItemError::SetOfLists),
            Value::Null => Err(ItemError::NullInSet),
            scalar => Ok(ItemName::Value(scalar)),
        },
        ListKind::Atomic => Err(ItemError::NotAssociative),
    }
}

/// The names of a list's items, in order. Items that cannot be named
/// (only in objects that did not pass validation) are named by position,
/// which never equals a key or value, so they are kept apart.
pub fn item_names<'v>(
    kind: ListKind<'v>,
    item_ty: Ty<'v>,
    items: &'v [Value],
) -> Vec<ItemName<'v>> {
    items
        .iter()
        .enumerate()
        .map(|(i, item)| item_name(kind, item_ty, item).unwrap_or(ItemName::Index(i)))
        .collect()
}

/// The path elements of a list's items (see [`item_names`]).
pub fn item_elements(kind: ListKind, item_ty: Ty, items: &[Value]) -> Vec<PathElement> {
    item_names(kind, item_ty, items)
        .iter()
        .map(ItemName::to_element)
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn keyed_items_use_their_keys_and_sets_their_values() {
        let keys = ["name".to_owned()];
        let item = json!({"name": "net1", "x": 1});
        assert_eq!(
            item_name(ListKind::Map(&keys), Ty::Deduced, &item)
                .map(|n| n.to_element().to_fields_key()),
            Ok(r#"k:{"name":"net1"}"#.to_owned())
        );
        let keyless = json!({"x": 1});
        assert_eq!(
            item_name(ListKind::Map(&keys), Ty::Deduced, &keyless).err(),
            Some(ItemError::NoKeys(vec!["name".into()]))
        );
        let scalar = json!("a");
        assert_eq!(
            item_name(ListKind::Set, Ty::Deduced, &scalar).map(|n| n.to_element().to_fields_key()),
            Ok(r#"v:"a""#.to_owned())
        );
        let map = json!({});
        assert_eq!(
            item_name(ListKind::Set, Ty::Deduced, &map).err(),
            Some(ItemError::SetOfMaps)
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
