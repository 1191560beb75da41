//! Writing a converted object as YAML. A string that holds an envsubst expression is
//! single-quoted, as template authors quote `name: "${CLUSTER_NAME}"`, so that it stays a
//! string whatever is substituted (a cluster named `123` must not become a number); an
//! expression that stands for a number or a list is written plain, so that it becomes one;
//! a list an expression was spliced into (`matchTags: [${TAGS}]`) is written as that flow
//! list again.

use std::collections::BTreeSet;

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::Value;
use serde_saphyr::{FlowSeq, SingleQuoted};

use super::placeholders::is_expression;

/// How a document's expressions are written.
pub struct Expressions<'a> {
    /// Expressions that stand for numbers or lists: written unquoted.
    pub plain: &'a BTreeSet<String>,
    /// Expressions spliced into flow lists, each with the plain word written in its place
    /// and then replaced by it.
    pub spliced: &'a [(String, String)],
}

/// `value` as a YAML document.
pub fn to_string(
    value: &Value,
    expressions: &Expressions<'_>,
) -> Result<String, serde_saphyr::SerializeError> {
    let mut text = serde_saphyr::to_string(&Styled { value, expressions })?;
    for (word, expression) in expressions.spliced {
        text = text.replace(word.as_str(), expression);
    }
    Ok(text)
}

struct Styled<'a> {
    value: &'a Value,
    expressions: &'a Expressions<'a>,
}

/// An item of a flow list: a spliced expression's word, or any value.
enum FlowItem<'a> {
    Word(&'a str),
    Value(Styled<'a>),
}

impl Serialize for FlowItem<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            FlowItem::Word(word) => serializer.serialize_str(word),
            FlowItem::Value(value) => value.serialize(serializer),
        }
    }
}

impl<'a> Styled<'a> {
    fn child(&self, value: &'a Value) -> Styled<'a> {
        Styled {
            value,
            expressions: self.expressions,
        }
    }

    fn spliced_word(&self, item: &Value) -> Option<&'a str> {
        let text = item.as_str()?;
        self.expressions
            .spliced
            .iter()
            .find(|(_, expression)| expression == text)
            .map(|(word, _)| word.as_str())
    }
}

impl Serialize for Styled<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.value {
            Value::String(text)
                if is_expression(text)
                    && !text.contains('\n')
                    && !self.expressions.plain.contains(text) =>
            {
                SingleQuoted(text.as_str()).serialize(serializer)
            }
            Value::Array(items) if items.iter().any(|i| self.spliced_word(i).is_some()) => {
                let flow: Vec<FlowItem<'_>> = items
                    .iter()
                    .map(|item| match self.spliced_word(item) {
                        Some(word) => FlowItem::Word(word),
                        None => FlowItem::Value(self.child(item)),
                    })
                    .collect();
                FlowSeq(flow).serialize(serializer)
            }
            Value::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&self.child(item))?;
                }
                seq.end()
            }
            Value::Object(map) => {
                let mut out = serializer.serialize_map(Some(map.len()))?;
                for (key, item) in map {
                    out.serialize_entry(key, &self.child(item))?;
                }
                out.end()
            }
            other => other.serialize(serializer),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn expressions_are_written_as_what_they_stand_for() {
        let plain = BTreeSet::from(["${N:=2}".to_owned()]);
        let spliced = [("capmoxexpr0x0x".to_owned(), "${TAGS}".to_owned())];
        let yaml = to_string(
            &json!({
                "name": "${CLUSTER}-cp",
                "numCores": "${N:=2}",
                "vip": "${VIP=\"\"}",
                "b": "x",
                "tags": ["${TAGS}"],
            }),
            &Expressions {
                plain: &plain,
                spliced: &spliced,
            },
        )
        .expect("yaml");
        assert_eq!(
            yaml,
            "b: x\nname: '${CLUSTER}-cp'\nnumCores: ${N:=2}\ntags: [${TAGS}]\nvip: '${VIP=\"\"}'\n"
        );
    }
}
