//! Structural schema defaulting (apiextensions `structuraldefaulting`):
//! nulls of non-nullable fields are dropped or replaced by the default (those
//! of `nullable` ones are values and stay),
//! absent fields with a default get it, and whole numbers given as floats in
//! integer fields become integers (as Go's JSON decoding into
//! `interface{}`-typed CRD objects treats them).

use serde_json::Value;

use crate::api::schema::{JsonType, Structural};

/// Defaults `value` in place according to `schema`.
pub fn apply(value: &mut Value, schema: &Structural) {
    match value {
        Value::Object(map) => {
            let sub_schema = |key: &str| {
                schema
                    .property(key)
                    .or(schema.additional_properties.as_deref())
            };
            map.retain(|key, child| {
                !child.is_null()
                    || sub_schema(key).is_none_or(|s| s.nullable || s.default.is_some())
            });
            if schema.additional_properties.is_none() {
                for (key, property) in &schema.properties {
                    if let Some(default) = &property.default {
                        match map.get_mut(key) {
                            None => {
                                map.insert(key.clone(), default.clone());
                            }
                            Some(entry) if entry.is_null() && !property.nullable => {
                                *entry = default.clone();
                            }
                            Some(_) => {}
                        }
                    }
                }
            }
            for (key, child) in map.iter_mut() {
                if let Some(sub) = sub_schema(key) {
                    apply(child, sub);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = &schema.items {
                for item in items {
                    apply(item, item_schema);
                }
            }
        }
        Value::Number(n) if schema.type_ == Some(JsonType::Integer) && n.is_f64() => {
            if let Some(whole) = n.as_f64().and_then(whole_number) {
                *value = Value::from(whole);
            }
        }
        _ => {}
    }
}

/// The integer a float stands for, if it is a whole number in i64 range.
fn whole_number(f: f64) -> Option<i64> {
    // i64::MAX is not exactly representable; 2^63 is the first float above it.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    (f.fract() == 0.0 && (-LIMIT..LIMIT).contains(&f)).then_some(f as i64)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn nulls_stay_where_the_schema_makes_them_values() {
        let schema = Structural::from_json(&json!({
            "type": "object",
            "properties": {
                "nullable": {"type": "object", "nullable": true},
                "plain": {"type": "object"},
                "defaulted": {"type": "string", "default": "d"},
                "nullableDefaulted": {"type": "string", "nullable": true, "default": "d"}
            }
        }))
        .expect("schema");
        let mut value =
            json!({"nullable": null, "plain": null, "defaulted": null, "nullableDefaulted": null});
        apply(&mut value, &schema);
        assert_eq!(
            value,
            json!({"nullable": null, "defaulted": "d", "nullableDefaulted": null})
        );
    }
}
