//! kubectl-style JSONPath (client-go `util/jsonpath`), as used by CRD printer columns.
//!
//! The parser follows client-go's grammar and error texts: fields (`.a.b`, escaped dots
//! `.labels.cluster\.x-k8s\.io/name`), `[n]`, slices `[a:b:c]`, `[*]`, unions `[a,b]`, quoted
//! keys `['a']`, recursive descent `..`, filters `[?(@.kind=="Machine")]` with
//! `== != < > <= >=` and existence, and literals. Evaluation allows missing keys, as the CRD
//! table convertor does.
//!
//! Deliberate improvements over client-go: a quoted key is one key (`['a.b']` looks up `a.b`;
//! client-go splits it at the dot), integers and floats compare numerically in filters, and
//! `[a:a]` on one element of a list does not cut evaluation short for the remaining ones.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

/// A JSONPath that failed to parse or evaluate; messages follow client-go.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct JsonPathError(pub String);

fn err<T>(message: impl Into<String>) -> Result<T, JsonPathError> {
    Err(JsonPathError(message.into()))
}

/// Nested brackets/filters beyond this depth are rejected instead of risking the stack.
const MAX_NESTING: usize = 32;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct SliceParam {
    value: i64,
    known: bool,
    derived: bool,
}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    List(Vec<Node>),
    Text(String),
    Field(String),
    Array([SliceParam; 3]),
    Filter {
        left: Vec<Node>,
        right: Vec<Node>,
        operator: String,
    },
    Int(i64),
    Float(f64),
    Bool(bool),
    Wildcard,
    Recursive,
    Union(Vec<Vec<Node>>),
    Identifier(String),
}

/// A parsed JSONPath template.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonPath {
    nodes: Vec<Node>,
}

impl JsonPath {
    /// Parses a printer-column path such as `.status.ready` (wrapped in `{}` like the CRD
    /// convertor does).
    pub fn parse(path: &str) -> Result<Self, JsonPathError> {
        Self::parse_template(&format!("{{{path}}}"))
    }

    /// Parses a full template, text with `{…}` actions.
    pub fn parse_template(text: &str) -> Result<Self, JsonPathError> {
        let nodes = Parser::new(text, 0).parse_template()?;
        Ok(Self { nodes })
    }

    /// All results, one list per top-level node (client-go `FindResults`).
    pub fn find_results<'a>(
        &self,
        data: &'a Value,
    ) -> Result<Vec<Vec<Cow<'a, Value>>>, JsonPathError> {
        self.nodes
            .iter()
            .map(|node| walk(vec![Cow::Borrowed(data)], node))
            .collect()
    }

    /// The first result of the first node, the value a CRD table cell is built from; `None`
    /// when the path finds nothing or evaluation fails.
    pub fn first<'a>(&self, data: &'a Value) -> Option<Cow<'a, Value>> {
        let mut results = self.find_results(data).ok()?;
        if results.is_empty() {
            return None;
        }
        let first = results.swap_remove(0);
        first.into_iter().next()
    }
}

// ------------------------------------------------------------------------------------------
// Parser
// ------------------------------------------------------------------------------------------

const EOF: Option<char> = None;

struct Parser<'a> {
    input: &'a str,
    pos: usize,
    depth: usize,
}

static SLICE_OPERATOR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(-?[0-9]*)(:-?[0-9]*)?(:-?[0-9]*)?$")
        .unwrap_or_else(|e| panic!("slice regex: {e}"))
});
static FILTER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^([^!<>=]+)([!<>=]+)(.+?)$").unwrap_or_else(|e| panic!("filter regex: {e}"))
});

fn is_terminator(c: Option<char>) -> bool {
    match c {
        None => true,
        Some(c) => matches!(
            c,
            ' ' | '\t' | '\r' | '\n' | '.' | ',' | '[' | ']' | '$' | '@' | '{' | '}'
        ),
    }
}

fn is_alphanumeric(c: char) -> bool {
    c == '_' || c.is_alphabetic() || c.is_numeric()
}

impl<'a> Parser<'a> {
    fn new(input: &'a str, depth: usize) -> Self {
        Self {
            input,
            pos: 0,
            depth,
        }
    }

    fn rest(&self) -> &'a str {
        self.input.get(self.pos..).unwrap_or("")
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn next(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        Some(c)
    }

    /// The byte before position `back` bytes behind the cursor, for escape checks.
    fn byte_before(&self, back: usize) -> Option<u8> {
        self.pos
            .checked_sub(back)
            .and_then(|i| self.input.as_bytes().get(i).copied())
    }

    /// Parses `{…}`-delimited text into top-level nodes.
    fn parse_template(&mut self) -> Result<Vec<Node>, JsonPathError> {
        let mut root = Vec::new();
        loop {
            let Some(offset) = self.rest().find('{') else {
                if !self.rest().is_empty() {
                    root.push(Node::Text(self.rest().to_owned()));
                }
                return Ok(root);
            };
            if offset > 0 {
                root.push(Node::Text(self.rest()[..offset].to_owned()));
            }
            self.pos += offset + 1;
            let action = self.parse_action()?;
            root.push(Node::List(action));
        }
    }

    /// Parses the inside of one action up to and including its closing `}`.
    fn parse_action(&mut self) -> Result<Vec<Node>, JsonPathError> {
        let mut cur = Vec::new();
        loop {
            let rest = self.rest();
            if rest.starts_with('}') {
                self.pos += 1;
                return Ok(cur);
            }
            if rest.starts_with("[?(") {
                cur.push(self.parse_filter()?);
                continue;
            }
            if rest.starts_with("..") {
                self.parse_recursive(&mut cur)?;
                continue;
            }
            let start = self.pos;
            match self.next() {
                None | Some('\r' | '\n') => return err("unclosed action"),
                Some(' ' | '@' | '$') => {}
                Some('[') => self.parse_array(start, &mut cur)?,
                Some(q @ ('"' | '\'')) => cur.push(self.parse_quote(start, q)?),
                Some('.') => cur.push(self.parse_field()),
                Some(c) if c == '+' || c == '-' || c.is_ascii_digit() => {
                    self.pos = start;
                    cur.push(self.parse_number()?);
                }
                Some(c) if is_alphanumeric(c) => {
                    self.pos = start;
                    cur.push(self.parse_identifier());
                }
                Some(c) => {
                    return err(format!(
                        "unrecognized character in action: U+{:04X} '{c}'",
                        c as u32
                    ));
                }
            }
        }
    }

    /// Parses a nested expression the way client-go's `parseAction` does: as `{text}`.
    fn parse_nested(&self, text: &str) -> Result<Vec<Node>, JsonPathError> {
        if self.depth >= MAX_NESTING {
            return err("jsonpath nesting too deep");
        }
        let wrapped = format!("{{{text}}}");
        let mut nodes = Parser::new(&wrapped, self.depth + 1).parse_template()?;
        match nodes.first_mut() {
            Some(Node::List(list)) => Ok(std::mem::take(list)),
            _ => err(format!("invalid expression {text}")),
        }
    }

    fn parse_identifier(&mut self) -> Node {
        let start = self.pos;
        while !is_terminator(self.peek()) {
            self.next();
        }
        let value = &self.input[start..self.pos];
        match value {
            "true" => Node::Bool(true),
            "false" => Node::Bool(false),
            _ => Node::Identifier(value.to_owned()),
        }
    }

    fn parse_recursive(&mut self, cur: &mut Vec<Node>) -> Result<(), JsonPathError> {
        if cur.last() == Some(&Node::Recursive) {
            return err("invalid multiple recursive descent");
        }
        self.pos += 2;
        cur.push(Node::Recursive);
        if self.peek().is_some_and(is_alphanumeric) {
            cur.push(self.parse_field());
        }
        Ok(())
    }

    fn parse_number(&mut self) -> Result<Node, JsonPathError> {
        let start = self.pos;
        if matches!(self.peek(), Some('+' | '-')) {
            self.next();
        }
        while matches!(self.peek(), Some(c) if c == '.' || c.is_ascii_digit()) {
            self.next();
        }
        let value = &self.input[start..self.pos];
        if let Ok(i) = value.parse::<i64>() {
            return Ok(Node::Int(i));
        }
        if let Ok(f) = value.parse::<f64>() {
            return Ok(Node::Float(f));
        }
        err(format!("cannot parse number {value}"))
    }

    fn parse_array(&mut self, start: usize, cur: &mut Vec<Node>) -> Result<(), JsonPathError> {
        loop {
            match self.next() {
                EOF | Some('\n') => return err("unterminated array"),
                Some(']') => break,
                Some(_) => {}
            }
        }
        let mut text = &self.input[start + 1..self.pos - 1];
        if text == "*" {
            text = ":";
        }
        let parts: Vec<&str> = text.split(',').collect();
        if parts.len() > 1 {
            let members = parts
                .iter()
                .map(|p| self.parse_nested(&format!("[{}]", p.trim_matches(' '))))
                .collect::<Result<Vec<_>, _>>()?;
            cur.push(Node::Union(members));
            return Ok(());
        }
        if let Some(key) = quoted_key(text) {
            cur.push(Node::Field(key.replace('\\', "")));
            return Ok(());
        }
        let Some(caps) = SLICE_OPERATOR.captures(text) else {
            return err(format!("invalid array index {text}"));
        };
        let mut params = [SliceParam::default(); 3];
        for i in 0..3 {
            let raw = caps.get(i + 1).map_or("", |m| m.as_str());
            if raw.is_empty() {
                if i == 1 {
                    // `[n]` is the slice `[n:n+1]`.
                    params[1] = SliceParam {
                        value: params[0].value.saturating_add(1),
                        known: true,
                        derived: true,
                    };
                }
                continue;
            }
            // Parts after the first carry their leading ':'.
            let raw = if i > 0 { &raw[1..] } else { raw };
            if i > 0 && raw.is_empty() {
                continue;
            }
            params[i].known = true;
            params[i].value = raw
                .parse::<i64>()
                .map_err(|_| JsonPathError(format!("array index {raw} is not a number")))?;
        }
        cur.push(Node::Array(params));
        Ok(())
    }

    fn parse_filter(&mut self) -> Result<Node, JsonPathError> {
        self.pos += 3;
        let start = self.pos;
        let (mut begin, mut end) = (false, false);
        let mut pair = '"';
        loop {
            let c = self.next();
            match c {
                EOF | Some('\n') => return err("unterminated filter"),
                Some(q @ ('"' | '\'')) => {
                    if !begin {
                        begin = true;
                        pair = q;
                        continue;
                    }
                    if self.byte_before(2) != Some(b'\\') && q == pair {
                        end = true;
                    }
                }
                Some(')') if begin == end => break,
                Some(_) => {}
            }
        }
        if self.next() != Some(']') {
            return err("unclosed array expect ]");
        }
        let text = &self.input[start..self.pos - 2];
        match FILTER.captures(text) {
            None => Ok(Node::Filter {
                left: self.parse_nested(text)?,
                right: Vec::new(),
                operator: "exists".to_owned(),
            }),
            Some(caps) => {
                let part = |i: usize| caps.get(i).map_or("", |m| m.as_str());
                Ok(Node::Filter {
                    left: self.parse_nested(part(1))?,
                    right: self.parse_nested(part(3))?,
                    operator: part(2).to_owned(),
                })
            }
        }
    }

    fn parse_quote(&mut self, start: usize, quote: char) -> Result<Node, JsonPathError> {
        loop {
            match self.next() {
                EOF | Some('\n') => return err("unterminated quoted string"),
                Some(c) if c == quote && self.byte_before(2) != Some(b'\\') => break,
                Some(_) => {}
            }
        }
        let value = &self.input[start..self.pos];
        unquote(value)
            .map(Node::Text)
            .map_err(|e| JsonPathError(format!("unquote string {value} error {e}")))
    }

    fn parse_field(&mut self) -> Node {
        let start = self.pos;
        loop {
            let c = self.peek();
            if c == Some('\\') {
                self.next();
                self.next();
            } else if is_terminator(c) {
                break;
            } else {
                self.next();
            }
        }
        let value = &self.input[start..self.pos];
        if value == "*" {
            Node::Wildcard
        } else {
            Node::Field(value.replace('\\', ""))
        }
    }
}

/// `'key'` (client-go's dictKeyRex `^'([^']*)'$`).
fn quoted_key(text: &str) -> Option<&str> {
    let inner = text.strip_prefix('\'')?.strip_suffix('\'')?;
    (!inner.contains('\'')).then_some(inner)
}

/// Go's `UnquoteExtend`: a single- or double-quoted string with Go escapes.
fn unquote(s: &str) -> Result<String, &'static str> {
    let quote = s.chars().next().ok_or("invalid syntax")?;
    if s.len() < 2 || !s.ends_with(quote) || !matches!(quote, '"' | '\'') {
        return Err("invalid syntax");
    }
    let inner = &s[1..s.len() - 1];
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c == quote {
            return Err("invalid syntax");
        }
        if c != '\\' {
            out.push(c);
            continue;
        }
        let escaped = chars.next().ok_or("invalid syntax")?;
        let decoded = match escaped {
            'a' => '\u{7}',
            'b' => '\u{8}',
            'f' => '\u{c}',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'v' => '\u{b}',
            '\\' => '\\',
            '\'' | '"' => escaped,
            'x' | 'u' | 'U' => {
                let len = match escaped {
                    'x' => 2,
                    'u' => 4,
                    _ => 8,
                };
                let hex: String = chars.by_ref().take(len).collect();
                if hex.len() != len {
                    return Err("invalid syntax");
                }
                let code = u32::from_str_radix(&hex, 16).map_err(|_| "invalid syntax")?;
                char::from_u32(code).ok_or("invalid syntax")?
            }
            '0'..='7' => {
                let rest: String = chars.by_ref().take(2).collect();
                let code = u32::from_str_radix(&format!("{escaped}{rest}"), 8)
                    .map_err(|_| "invalid syntax")?;
                char::from_u32(code).ok_or("invalid syntax")?
            }
            _ => return Err("invalid syntax"),
        };
        out.push(decoded);
    }
    Ok(out)
}

// ------------------------------------------------------------------------------------------
// Evaluation
// ------------------------------------------------------------------------------------------

type Values<'a> = Vec<Cow<'a, Value>>;

fn children<'a>(value: &Cow<'a, Value>) -> Values<'a> {
    match value {
        Cow::Borrowed(Value::Object(map)) => map.values().map(Cow::Borrowed).collect(),
        Cow::Borrowed(Value::Array(items)) => items.iter().map(Cow::Borrowed).collect(),
        Cow::Owned(Value::Object(map)) => map.values().cloned().map(Cow::Owned).collect(),
        Cow::Owned(Value::Array(items)) => items.iter().cloned().map(Cow::Owned).collect(),
        _ => Vec::new(),
    }
}

fn walk<'a>(input: Values<'a>, node: &Node) -> Result<Values<'a>, JsonPathError> {
    match node {
        Node::List(nodes) => eval_list(input, nodes),
        Node::Text(text) => Ok(vec![Cow::Owned(Value::String(text.clone()))]),
        Node::Field(name) => Ok(eval_field(input, name)),
        Node::Array(params) => eval_array(input, params),
        Node::Filter {
            left,
            right,
            operator,
        } => eval_filter(input, left, right, operator),
        Node::Int(i) => Ok(replicate(&input, Value::from(*i))),
        Node::Float(f) => Ok(replicate(&input, Value::from(*f))),
        Node::Bool(b) => Ok(replicate(&input, Value::Bool(*b))),
        Node::Wildcard => Ok(input.iter().flat_map(children).collect()),
        Node::Recursive => Ok(eval_recursive(input)),
        Node::Union(members) => {
            let mut out = Vec::new();
            for member in members {
                out.extend(eval_list(input.clone(), member)?);
            }
            Ok(out)
        }
        Node::Identifier(name) => err(format!("unrecognized identifier {name}")),
    }
}

fn replicate<'a>(input: &Values<'a>, value: Value) -> Values<'a> {
    input.iter().map(|_| Cow::Owned(value.clone())).collect()
}

fn eval_list<'a>(input: Values<'a>, nodes: &[Node]) -> Result<Values<'a>, JsonPathError> {
    let mut cur = input;
    for node in nodes {
        cur = walk(cur, node)?;
    }
    Ok(cur)
}

fn eval_field<'a>(input: Values<'a>, name: &str) -> Values<'a> {
    input
        .into_iter()
        .filter_map(|value| match value {
            Cow::Borrowed(Value::Object(map)) => map.get(name).map(Cow::Borrowed),
            Cow::Owned(Value::Object(mut map)) => map.remove(name).map(Cow::Owned),
            _ => None,
        })
        .collect()
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "map[string]interface {}",
    }
}

fn eval_array<'a>(
    input: Values<'a>,
    node_params: &[SliceParam; 3],
) -> Result<Values<'a>, JsonPathError> {
    let mut result = Vec::new();
    for value in input {
        if value.is_null() {
            continue;
        }
        let Some(items) = value.as_array() else {
            return err(format!("{} is not array or slice", type_name(&value)));
        };
        let len = i64::try_from(items.len()).unwrap_or(i64::MAX);
        let mut params = *node_params;
        if !params[0].known {
            params[0].value = 0;
        }
        if params[0].value < 0 {
            params[0].value += len;
        }
        if !params[1].known {
            params[1].value = len;
        }
        if params[1].value < 0 || (params[1].value == 0 && params[1].derived) {
            params[1].value += len;
        }
        let (from, to) = (params[0].value, params[1].value);
        if from == to {
            continue;
        }
        if from >= len || from < 0 {
            return err(format!(
                "array index out of bounds: index {from}, length {len}"
            ));
        }
        if to > len || to < 0 {
            return err(format!(
                "array index out of bounds: index {}, length {len}",
                to - 1
            ));
        }
        if from > to {
            return err(format!(
                "starting index {from} is greater than ending index {to}"
            ));
        }
        let step = if params[2].known {
            if params[2].value <= 0 {
                return err("step must be > 0");
            }
            usize::try_from(params[2].value).unwrap_or(usize::MAX)
        } else {
            1
        };
        // Bounds were checked above, so these conversions cannot fail.
        let (from, to) = (from as usize, to as usize);
        let selected: Values<'a> = match &value {
            Cow::Borrowed(Value::Array(items)) => items[from..to]
                .iter()
                .step_by(step)
                .map(Cow::Borrowed)
                .collect(),
            _ => items[from..to]
                .iter()
                .step_by(step)
                .cloned()
                .map(Cow::Owned)
                .collect(),
        };
        result.extend(selected);
    }
    Ok(result)
}

fn eval_recursive(input: Values<'_>) -> Values<'_> {
    let mut result = Vec::new();
    for value in input {
        if value.is_null() {
            continue;
        }
        let kids = children(&value);
        if !kids.is_empty() {
            result.push(value);
            result.extend(eval_recursive(kids));
        }
    }
    result
}

fn eval_filter<'a>(
    input: Values<'a>,
    left: &[Node],
    right: &[Node],
    operator: &str,
) -> Result<Values<'a>, JsonPathError> {
    let mut results = Vec::new();
    for value in input {
        let items = children_of_array(&value).ok_or_else(|| {
            JsonPathError(format!(
                "{} is not array or slice and cannot be filtered",
                type_name(&value)
            ))
        })?;
        for item in items {
            let lefts = eval_list(vec![item.clone()], left);
            if operator == "exists" {
                if lefts.is_ok_and(|l| !l.is_empty()) {
                    results.push(item);
                }
                continue;
            }
            let lefts = lefts?;
            let left_value = match lefts.as_slice() {
                [] => continue,
                [one] => one.clone(),
                _ => return err("can only compare one element at a time"),
            };
            let rights = eval_list(vec![item.clone()], right)?;
            let right_value = match rights.as_slice() {
                [] => continue,
                [one] => one.clone(),
                _ => return err("can only compare one element at a time"),
            };
            if compare(&left_value, &right_value, operator)? {
                results.push(item);
            }
        }
    }
    Ok(results)
}

fn children_of_array<'a>(value: &Cow<'a, Value>) -> Option<Values<'a>> {
    value.is_array().then(|| children(value))
}

fn compare(left: &Value, right: &Value, operator: &str) -> Result<bool, JsonPathError> {
    use std::cmp::Ordering;
    let ordering: Option<Ordering> = match (left, right) {
        (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
        (Value::Number(a), Value::Number(b)) => match (a.as_i64(), b.as_i64()) {
            (Some(x), Some(y)) => Some(x.cmp(&y)),
            _ => a
                .as_f64()
                .zip(b.as_f64())
                .and_then(|(x, y)| x.partial_cmp(&y)),
        },
        (Value::Bool(a), Value::Bool(b)) => {
            return match operator {
                "==" => Ok(a == b),
                "!=" => Ok(a != b),
                "<" | ">" | "<=" | ">=" => err("invalid type for comparison"),
                other => err(format!("unrecognized filter operator {other}")),
            };
        }
        (Value::Null | Value::Array(_) | Value::Object(_), _)
        | (_, Value::Null | Value::Array(_) | Value::Object(_)) => {
            return err("invalid type for comparison");
        }
        _ => return err("incompatible types for comparison"),
    };
    let Some(ordering) = ordering else {
        return Ok(operator == "!=");
    };
    match operator {
        "==" => Ok(ordering == Ordering::Equal),
        "!=" => Ok(ordering != Ordering::Equal),
        "<" => Ok(ordering == Ordering::Less),
        ">" => Ok(ordering == Ordering::Greater),
        "<=" => Ok(ordering != Ordering::Greater),
        ">=" => Ok(ordering != Ordering::Less),
        other => err(format!("unrecognized filter operator {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn machine() -> Value {
        json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2",
            "kind": "ProxmoxMachine",
            "metadata": {
                "name": "m1",
                "labels": {"cluster.x-k8s.io/cluster-name": "c1", "app": "x"},
                "ownerReferences": [
                    {"kind": "MachineSet", "name": "ms1"},
                    {"kind": "Machine", "name": "machine-1"}
                ]
            },
            "spec": {"numSockets": 2, "memoryMiB": 4096.5, "tags": ["a", "b", "c"], "nested": {"a": {"b": 1}}},
            "status": {
                "ready": true,
                "addresses": [
                    {"type": "InternalIP", "address": "10.0.0.1"},
                    {"type": "Hostname", "address": "m1"}
                ],
                "vmStatus": null
            }
        })
    }

    fn first(path: &str) -> Option<Value> {
        JsonPath::parse(path)
            .unwrap_or_else(|e| panic!("{path}: {e}"))
            .first(&machine())
            .map(Cow::into_owned)
    }

    fn all(path: &str) -> Vec<Value> {
        let obj = machine();
        let results = JsonPath::parse(path)
            .unwrap_or_else(|e| panic!("{path}: {e}"))
            .find_results(&obj)
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        results.into_iter().flatten().map(Cow::into_owned).collect()
    }

    #[test]
    fn evaluates_printer_column_paths() {
        let cases: Vec<(&str, Option<Value>)> = vec![
            (".metadata.name", Some(json!("m1"))),
            (".status.ready", Some(json!(true))),
            (".spec.numSockets", Some(json!(2))),
            (".spec.missing", None),
            (".missing.deeper", None),
            (
                ".metadata.labels.cluster\\.x-k8s\\.io/cluster-name",
                Some(json!("c1")),
            ),
            (
                ".metadata.labels['cluster.x-k8s.io/cluster-name']",
                Some(json!("c1")),
            ),
            (
                ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",
                Some(json!("c1")),
            ),
            (
                ".metadata.ownerReferences[?(@.kind==\"Machine\")].name",
                Some(json!("machine-1")),
            ),
            (
                ".metadata.ownerReferences[?(@.kind=='Machine')].name",
                Some(json!("machine-1")),
            ),
            (
                ".metadata.ownerReferences[?(@.kind!=\"Machine\")].name",
                Some(json!("ms1")),
            ),
            (
                ".status.addresses[?(@.type==\"InternalIP\")].address",
                Some(json!("10.0.0.1")),
            ),
            (".status.addresses[0].type", Some(json!("InternalIP"))),
            (".status.addresses[-1].address", Some(json!("m1"))),
            (".status.addresses[*].address", Some(json!("10.0.0.1"))),
            (".spec.tags", Some(json!(["a", "b", "c"]))),
            (".spec.tags[1:]", Some(json!("b"))),
            (".spec.tags[5]", None),
            (".spec.numSockets[0]", None),
            (".status.vmStatus", Some(Value::Null)),
            ("$.metadata.name", Some(json!("m1"))),
        ];
        for (path, want) in cases {
            assert_eq!(first(path), want, "path {path}");
        }
    }

    #[test]
    fn multiple_results_and_slices() {
        assert_eq!(
            all(".spec.tags[*]"),
            vec![json!("a"), json!("b"), json!("c")]
        );
        assert_eq!(all(".spec.tags[0:2]"), vec![json!("a"), json!("b")]);
        assert_eq!(all(".spec.tags[::2]"), vec![json!("a"), json!("c")]);
        assert_eq!(all(".spec.tags[0,2]"), vec![json!("a"), json!("c")]);
        assert_eq!(all(".spec.tags[-2:]"), vec![json!("b"), json!("c")]);
        assert_eq!(all(".spec.tags[1:1]"), Vec::<Value>::new());
        assert_eq!(all("..b"), vec![json!(1)]);
        assert_eq!(all(".spec.nested.*"), vec![json!({"b": 1})]);
        assert_eq!(
            all(".status.addresses[*]['type','address']"),
            vec![
                json!("InternalIP"),
                json!("Hostname"),
                json!("10.0.0.1"),
                json!("m1")
            ]
        );
    }

    #[test]
    fn filters_compare_and_test_existence() {
        let data = json!({"items": [
            {"n": 1, "name": "one"},
            {"n": 2.5, "name": "two"},
            {"n": 3, "name": "three", "flag": true},
            {"name": "none"}
        ]});
        let names = |path: &str| -> Vec<Value> {
            JsonPath::parse(path)
                .expect("parse")
                .find_results(&data)
                .expect("eval")
                .into_iter()
                .flatten()
                .map(Cow::into_owned)
                .collect()
        };
        assert_eq!(
            names(".items[?(@.n>2)].name"),
            vec![json!("two"), json!("three")]
        );
        assert_eq!(
            names(".items[?(@.n<=2.5)].name"),
            vec![json!("one"), json!("two")]
        );
        assert_eq!(names(".items[?(@.n>=3)].name"), vec![json!("three")]);
        assert_eq!(names(".items[?(@.flag)].name"), vec![json!("three")]);
        assert_eq!(names(".items[?(@.flag==true)].name"), vec![json!("three")]);
        let bad = JsonPath::parse(".items[?(@.n==\"x\")].name").expect("parse");
        assert_eq!(
            bad.find_results(&data)
                .expect_err("mixed types")
                .to_string(),
            "incompatible types for comparison"
        );
    }

    #[test]
    fn parse_errors_follow_client_go() {
        let cases = [
            ("{.a", "unclosed action"),
            ("{.a[0}", "unterminated array"),
            ("{.a[x]}", "invalid array index x"),
            ("{.a[?(@.b==1}", "unterminated filter"),
            ("{.a[?(@.b==1)}", "unclosed array expect ]"),
            ("{'abc}", "unterminated quoted string"),
            ("{....a}", "invalid multiple recursive descent"),
            ("{#}", "unrecognized character in action: U+0023 '#'"),
            ("{.a[-]}", "array index - is not a number"),
            ("{.a[1-]}", "invalid array index 1-"),
        ];
        for (input, want) in cases {
            assert_eq!(
                JsonPath::parse_template(input)
                    .expect_err(input)
                    .to_string(),
                want,
                "{input}"
            );
        }
        let ident = JsonPath::parse(".a range").expect("parses");
        assert_eq!(
            ident
                .find_results(&json!({"a": 1}))
                .expect_err("identifier")
                .to_string(),
            "unrecognized identifier range"
        );
    }

    #[test]
    fn template_text_and_literals() {
        let path =
            JsonPath::parse_template("name={.metadata.name} n={.spec.numSockets}").expect("parse");
        let obj = machine();
        let results: Vec<Vec<Value>> = path
            .find_results(&obj)
            .expect("eval")
            .into_iter()
            .map(|r| r.into_iter().map(Cow::into_owned).collect())
            .collect();
        assert_eq!(
            results,
            vec![
                vec![json!("name=")],
                vec![json!("m1")],
                vec![json!(" n=")],
                vec![json!(2)]
            ]
        );
        assert_eq!(unquote(r#""a\tb\u00e9\x41\101""#), Ok("a\tbéAA".to_owned()));
    }

    #[test]
    fn pathological_nesting_errors_without_overflow() {
        let deep = format!("{}1{}", "[?(@".repeat(200), ")]".repeat(200));
        assert!(JsonPath::parse(&deep).is_err());
    }
}
