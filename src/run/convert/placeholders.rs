//! clusterctl templates hold envsubst expressions (`numCores: ${NUM_CORES:=4}`,
//! `allowedNodes: ${ALLOWED_NODES:=[]}`) where the schema wants a number or a list, which
//! no typed conversion can read. Guided by the schema of the version converted from, each
//! such expression is hidden behind a stand-in of the right type before the conversion and
//! put back after it; expressions inside string fields need nothing, they convert as text.
//!
//! Stand-ins are chosen so that they cannot be confused with a value of the document: the
//! numbers count down from 65535 (every integer field of both versions holds that) past any
//! number the document contains, and the list items are strings the document does not
//! contain. A stand-in that the conversion did not carry over as it was (it would have to
//! be split, merged or moved into a string) is an error, never a silently wrong manifest.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::api::schema::structural::{JsonType, Structural};

/// Why an expression cannot be carried through the conversion.
#[derive(Debug, thiserror::Error)]
pub enum PlaceholderError {
    /// The schema wants a boolean or an object, which have no distinct stand-ins.
    #[error(
        "{path}: {expression} stands for {kind}, which cannot be converted before it is \
         substituted (clusterctl generate yaml)"
    )]
    Untyped {
        /// Where, as a JSON path.
        path: String,
        /// The envsubst expression.
        expression: String,
        /// What the schema wants there.
        kind: &'static str,
    },
    /// The converted object does not hold the stand-in whole.
    #[error("{expression} does not keep its place through the conversion; substitute it first")]
    Lost {
        /// The envsubst expression.
        expression: String,
    },
}

/// The expressions hidden in one object, with their stand-ins.
#[derive(Debug, Default)]
pub struct Placeholders {
    hidden: Vec<(Value, String)>,
}

/// Whether `text` holds an envsubst expression (`${NAME}`, `${NAME:=default}`, …).
pub fn is_expression(text: &str) -> bool {
    expressions(text).next().is_some()
}

/// The envsubst expressions of `text`, in order.
fn expressions(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        let start = rest.find("${")?;
        let end = start + rest[start..].find('}')? + 1;
        let expression = &rest[start..end];
        rest = &rest[end..];
        Some(expression)
    })
}

/// A YAML document of a template, read.
#[derive(Debug)]
pub struct ParsedDocument {
    /// The document, its expressions as text in the strings that hold them.
    pub value: Value,
    /// Expressions spliced into a flow list (`matchTags: [${TAGS}]`, where `TAGS` is
    /// `a, b`), each with a plain word that stands for it in the written text: such a list
    /// must be written in flow style with the expression unquoted.
    pub spliced: Vec<(String, String)>,
    /// Whether the text is YAML only once some expression is substituted in a way other
    /// than a flow list item (a flow map spliced in): such a document can be recognized,
    /// but not written back with its expressions in the same places.
    pub needs_substitution: bool,
}

/// Reads a document whose text may hold envsubst expressions anywhere, even where they make
/// it invalid YAML until substituted: each expression is read as a word that cannot break
/// the syntax, then put back into the strings that hold it.
pub fn parse_document(body: &str) -> Result<ParsedDocument, serde_saphyr::Error> {
    if !is_expression(body) {
        let value = serde_saphyr::from_str(body)?;
        return Ok(ParsedDocument {
            value,
            spliced: Vec::new(),
            needs_substitution: false,
        });
    }
    let mut words = Vec::<(String, &str)>::new();
    let mut spliced = Vec::new();
    let mut tokenized = String::with_capacity(body.len());
    let mut flow_tokenized = String::with_capacity(body.len());
    let mut rest = body;
    while let Some(expression) = expressions(rest).next() {
        let start = rest.find(expression).expect("found in rest");
        let end = start + expression.len();
        tokenized.push_str(&rest[..start]);
        flow_tokenized.push_str(&rest[..start]);
        let word = match words.iter().find(|(_, e)| *e == expression) {
            Some((word, _)) => word.clone(),
            None => {
                let word = unused_word(body, words.len());
                words.push((word.clone(), expression));
                word
            }
        };
        tokenized.push_str(&word);
        if is_flow_list_item(&rest[..start], &rest[end..]) {
            flow_tokenized.push_str(&word);
            if !spliced.iter().any(|(_, e)| e == expression) {
                spliced.push((word.clone(), expression.to_owned()));
            }
        } else {
            flow_tokenized.push_str(expression);
        }
        rest = &rest[end..];
    }
    tokenized.push_str(rest);
    flow_tokenized.push_str(rest);
    let mut value: Value = serde_saphyr::from_str(&tokenized)?;
    put_back_words(&mut value, &words);
    let needs_substitution = serde_saphyr::from_str::<Value>(&flow_tokenized).is_err();
    Ok(ParsedDocument {
        value,
        spliced,
        needs_substitution,
    })
}

/// Whether an expression between `before` and `after` (on its line) is an item of a flow
/// list: `[` or `,` before it, `]` or `,` after it.
fn is_flow_list_item(before: &str, after: &str) -> bool {
    let line_before = before.rsplit('\n').next().unwrap_or_default().trim_end();
    let line_after = after.split('\n').next().unwrap_or_default().trim_start();
    (line_before.ends_with('[') || line_before.ends_with(','))
        && (line_after.starts_with(']') || line_after.starts_with(','))
}

/// A plain YAML word for the `index`th expression that `body` does not contain.
fn unused_word(body: &str, index: usize) -> String {
    (0..)
        .map(|attempt| format!("capmoxexpr{attempt}x{index}x"))
        .find(|word| !body.contains(word.as_str()))
        .expect("some word is unused")
}

fn put_back_words(value: &mut Value, words: &[(String, &str)]) {
    match value {
        Value::String(text) => {
            for (word, expression) in words {
                if text.contains(word.as_str()) {
                    *text = text.replace(word.as_str(), expression);
                }
            }
        }
        Value::Object(map) => {
            let keyed = std::mem::take(map);
            for (mut key, mut child) in keyed {
                for (word, expression) in words {
                    key = key.replace(word.as_str(), expression);
                }
                put_back_words(&mut child, words);
                map.insert(key, child);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| put_back_words(v, words)),
        _ => {}
    }
}

impl Placeholders {
    /// Replaces every expression that stands for a number or a list in `object` (checked
    /// against `schema`) by a stand-in.
    pub fn hide(object: &mut Value, schema: &Structural) -> Result<Self, PlaceholderError> {
        let mut taken = BTreeSet::new();
        collect_numbers(object, &mut taken);
        let mut placeholders = Placeholders::default();
        let mut stand_ins = StandIns {
            next_number: 65535,
            taken,
        };
        placeholders.walk(object, schema, &mut String::new(), &mut stand_ins)?;
        Ok(placeholders)
    }

    /// Puts the expressions back in place of their stand-ins.
    pub fn restore(&self, object: &mut Value) -> Result<(), PlaceholderError> {
        if self.hidden.is_empty() {
            return Ok(());
        }
        self.put_back(object);
        for (stand_in, expression) in &self.hidden {
            if contains_part_of(object, stand_in) {
                return Err(PlaceholderError::Lost {
                    expression: expression.clone(),
                });
            }
        }
        Ok(())
    }

    /// The expressions that stand for numbers or lists.
    pub fn expressions(&self) -> impl Iterator<Item = &str> {
        self.hidden
            .iter()
            .map(|(_, expression)| expression.as_str())
    }

    fn walk(
        &mut self,
        value: &mut Value,
        schema: &Structural,
        path: &mut String,
        stand_ins: &mut StandIns,
    ) -> Result<(), PlaceholderError> {
        match value {
            Value::String(text) if is_expression(text) => {
                let Some(stand_in) = stand_ins.for_schema(schema, path, text)? else {
                    return Ok(());
                };
                let expression = std::mem::take(text);
                *value = stand_in.clone();
                self.hidden.push((stand_in, expression));
            }
            Value::Object(map) => {
                for (key, child) in map.iter_mut() {
                    let child_schema = schema
                        .property(key)
                        .or(schema.additional_properties.as_deref());
                    if let Some(child_schema) = child_schema {
                        let len = path.len();
                        path.push('.');
                        path.push_str(key);
                        self.walk(child, child_schema, path, stand_ins)?;
                        path.truncate(len);
                    }
                }
            }
            Value::Array(items) => {
                if let Some(item_schema) = schema.items.as_deref() {
                    for (index, item) in items.iter_mut().enumerate() {
                        let len = path.len();
                        path.push_str(&format!("[{index}]"));
                        self.walk(item, item_schema, path, stand_ins)?;
                        path.truncate(len);
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn put_back(&self, value: &mut Value) {
        if let Some((_, expression)) = self.hidden.iter().find(|(s, _)| s == value) {
            *value = Value::String(expression.clone());
            return;
        }
        match value {
            Value::Object(map) => map.values_mut().for_each(|v| self.put_back(v)),
            Value::Array(items) => items.iter_mut().for_each(|v| self.put_back(v)),
            _ => {}
        }
    }
}

/// Hands out stand-ins no value of the document equals.
struct StandIns {
    next_number: u64,
    taken: BTreeSet<u64>,
}

impl StandIns {
    /// The stand-in for an expression where `schema` applies, or `None` where the schema
    /// takes a string (or anything).
    fn for_schema(
        &mut self,
        schema: &Structural,
        path: &str,
        expression: &str,
    ) -> Result<Option<Value>, PlaceholderError> {
        let untyped = |kind| PlaceholderError::Untyped {
            path: path.trim_start_matches('.').to_owned(),
            expression: expression.to_owned(),
            kind,
        };
        Ok(Some(match schema.type_ {
            None | Some(JsonType::String) => return Ok(None),
            Some(JsonType::Integer | JsonType::Number) => Value::from(self.number()),
            Some(JsonType::Array) => {
                let item = schema.items.as_deref().cloned().unwrap_or_default();
                let element = match item.type_ {
                    Some(JsonType::Integer | JsonType::Number) => Value::from(self.number()),
                    Some(JsonType::String) | None => {
                        Value::from(format!("capmox-convert-placeholder-{}", self.number()))
                    }
                    Some(JsonType::Boolean | JsonType::Object | JsonType::Array) => {
                        return Err(untyped("a list of structured values"));
                    }
                };
                Value::Array(vec![element])
            }
            Some(JsonType::Boolean) => return Err(untyped("a boolean")),
            Some(JsonType::Object) => return Err(untyped("an object")),
        }))
    }

    fn number(&mut self) -> u64 {
        while self.taken.contains(&self.next_number) {
            self.next_number -= 1;
        }
        let number = self.next_number;
        self.taken.insert(number);
        number
    }
}

/// Every non-negative integer in `value`, and every number that ends a string (so that a
/// list stand-in's text cannot be one of the document's).
fn collect_numbers(value: &Value, into: &mut BTreeSet<u64>) {
    match value {
        Value::Number(n) => into.extend(n.as_u64()),
        Value::String(text) => {
            let digits = text.trim_start_matches(|c: char| !c.is_ascii_digit());
            into.extend(digits.parse::<u64>().ok());
        }
        Value::Object(map) => map.values().for_each(|v| collect_numbers(v, into)),
        Value::Array(items) => items.iter().for_each(|v| collect_numbers(v, into)),
        _ => {}
    }
}

/// Whether any part of `stand_in` (the value, or a list stand-in's element) is still in
/// `value`.
fn contains_part_of(value: &Value, stand_in: &Value) -> bool {
    let is_part = |v: &Value| match stand_in {
        Value::Array(items) => items.contains(v),
        other => other == v,
    };
    fn find(value: &Value, is_part: &dyn Fn(&Value) -> bool) -> bool {
        is_part(value)
            || match value {
                Value::Object(map) => map.values().any(|v| find(v, is_part)),
                Value::Array(items) => items.iter().any(|v| find(v, is_part)),
                _ => false,
            }
    }
    find(value, &is_part)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::schema::structural;
    use crate::api::{Kind, Version};

    fn template(spec: Value) -> Value {
        json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1",
            "kind": "ProxmoxMachineTemplate",
            "metadata": {"name": "${CLUSTER_NAME}-cp", "namespace": "${NAMESPACE}"},
            "spec": {"template": {"spec": spec}},
        })
    }

    fn schema() -> &'static Structural {
        structural(Version::V1alpha1, Kind::ProxmoxMachineTemplate)
    }

    #[test]
    fn numbers_and_lists_get_stand_ins_and_come_back() {
        let original = template(json!({
            "numCores": "${NUM_CORES:=4}",
            "memoryMiB": 65535,
            "allowedNodes": "${ALLOWED_NODES:=[]}",
            "sourceNode": "${NODE}",
        }));
        let mut object = original.clone();
        let placeholders = Placeholders::hide(&mut object, schema()).expect("hide");
        let spec = &object["spec"]["template"]["spec"];
        // In key order, skipping 65535: the document's own.
        assert_eq!(
            spec["allowedNodes"],
            json!(["capmox-convert-placeholder-65534"])
        );
        assert_eq!(spec["numCores"], 65533);
        assert_eq!(spec["sourceNode"], "${NODE}", "strings convert as text");
        assert_eq!(object["metadata"]["name"], "${CLUSTER_NAME}-cp");
        placeholders.restore(&mut object).expect("restore");
        assert_eq!(object, original);
    }

    #[test]
    fn expressions_are_read_even_where_they_break_the_syntax() {
        let parsed = parse_document("a: ${A}\nkeys: [${KEYS}]\nname: \"${N}-cp\"\n").expect("read");
        assert_eq!(
            parsed.value,
            json!({"a": "${A}", "keys": ["${KEYS}"], "name": "${N}-cp"})
        );
        assert_eq!(
            parsed.spliced,
            [("capmoxexpr0x1x".to_owned(), "${KEYS}".to_owned())]
        );
        assert!(!parsed.needs_substitution);
        let parsed = parse_document("a: ${A:=[]}\nb: ${A:=[]}-x\n").expect("read");
        assert_eq!(parsed.value, json!({"a": "${A:=[]}", "b": "${A:=[]}-x"}));
        assert!(parsed.spliced.is_empty() && !parsed.needs_substitution);
        let parsed = parse_document("labels: {${LABELS}}\n").expect("read");
        assert!(parsed.needs_substitution);
    }

    #[test]
    fn a_boolean_expression_is_refused_with_its_path() {
        let mut object = json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1",
            "kind": "ProxmoxCluster",
            "spec": {"externalManagedControlPlane": "${EXTERNAL}"},
        });
        let error = Placeholders::hide(
            &mut object,
            structural(Version::V1alpha1, Kind::ProxmoxCluster),
        )
        .expect_err("a boolean has no stand-in");
        assert_eq!(
            error.to_string(),
            "spec.externalManagedControlPlane: ${EXTERNAL} stands for a boolean, which \
             cannot be converted before it is substituted (clusterctl generate yaml)"
        );
    }

    #[test]
    fn a_stand_in_the_conversion_merged_is_an_error() {
        let mut object = template(json!({"allowedNodes": "${NODES}"}));
        let placeholders = Placeholders::hide(&mut object, schema()).expect("hide");
        let mut merged = object.clone();
        merged["spec"]["template"]["spec"]["allowedNodes"]
            .as_array_mut()
            .expect("stand-in list")
            .push(json!("pve2"));
        let error = placeholders.restore(&mut merged).expect_err("lost");
        assert_eq!(
            error.to_string(),
            "${NODES} does not keep its place through the conversion; substitute it first"
        );
    }
}
