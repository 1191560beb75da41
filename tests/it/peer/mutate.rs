//! Seeded random edits of valid objects: fields removed, boundary and out-of-range values,
//! wrong types, duplicated and reordered list items, unknown fields. An edit is chosen on one
//! object and applied as the same JSON edit to both sides' copies.

use capmox_apiserver::proxmox::sim::rng::Rng as SimRng;
use serde_json::{Value, json};

/// The simulator's seeded generator (the same sequence on every machine), with the two draws
/// the edits need.
pub struct Rng(SimRng);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(SimRng::new(seed))
    }

    /// Uniform in `[0, n)`; `n` is at least 1.
    pub fn below(&mut self, n: usize) -> usize {
        self.0.range(0, n as u64 - 1) as usize
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

impl Edit {
    pub fn set(path: Vec<Step>, value: Value) -> Self {
        Self {
            path,
            action: Action::Set(value),
        }
    }

    pub fn remove(path: Vec<Step>) -> Self {
        Self {
            path,
            action: Action::Remove,
        }
    }

    /// Appends a copy of the item at `index` to the list at `path`.
    pub fn duplicate(path: Vec<Step>, index: usize) -> Self {
        Self {
            path,
            action: Action::Duplicate(index),
        }
    }
}

/// One step of a JSON path.
#[derive(Debug, Clone)]
pub enum Step {
    Key(String),
    Index(usize),
}

/// An edit at a path below the object's root.
#[derive(Debug, Clone)]
pub struct Edit {
    path: Vec<Step>,
    action: Action,
}

#[derive(Debug, Clone)]
enum Action {
    Remove,
    Set(Value),
    /// Appends a copy of the list's item at this index.
    Duplicate(usize),
    Reverse,
}

impl std::fmt::Display for Edit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for step in &self.path {
            match step {
                Step::Key(key) => write!(f, ".{key}")?,
                Step::Index(i) => write!(f, "[{i}]")?,
            }
        }
        match &self.action {
            Action::Remove => write!(f, " removed"),
            Action::Set(value) => write!(f, " = {value}"),
            Action::Duplicate(i) => write!(f, " + copy of [{i}]"),
            Action::Reverse => write!(f, " reversed"),
        }
    }
}

const INTEGERS: [i64; 12] = [
    0,
    -1,
    1,
    2,
    63,
    4_095,
    4_096,
    65_536,
    2_147_483_647,
    2_147_483_648,
    -2_147_483_649,
    9_007_199_254_740_993,
];

fn strings() -> Vec<Value> {
    [
        String::new(),
        " ".into(),
        "UPPER".into(),
        "a_b".into(),
        "-leading-dash".into(),
        "10.0.0.256".into(),
        "10.0.0.5".into(),
        "fd00::5".into(),
        "10.0.0.0/33".into(),
        "x".repeat(63),
        "x".repeat(64),
        "x".repeat(254),
        "x".repeat(256),
        "vmbr0".into(),
        "net0".into(),
        "virtio".into(),
    ]
    .into_iter()
    .map(Value::String)
    .collect()
}

/// A value of another JSON type than `value`'s.
pub fn wrong_type(rng: &mut Rng, value: &Value) -> Value {
    let candidates = [
        json!("text"),
        json!(7),
        json!(1.5),
        json!(true),
        json!({}),
        json!([]),
        json!(["text"]),
        Value::Null,
    ];
    loop {
        let candidate = rng.pick(&candidates);
        if std::mem::discriminant(candidate) != std::mem::discriminant(value) {
            return candidate.clone();
        }
    }
}

/// Every path below `root` in `value` (`root` itself included), with the value there.
pub fn paths<'a>(value: &'a Value, prefix: Vec<Step>, out: &mut Vec<(Vec<Step>, &'a Value)>) {
    out.push((prefix.clone(), value));
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                let mut path = prefix.clone();
                path.push(Step::Key(key.clone()));
                paths(child, path, out);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                let mut path = prefix.clone();
                path.push(Step::Index(i));
                paths(child, path, out);
            }
        }
        _ => {}
    }
}

/// A random edit of the object below its `root` key (`spec`, `status`), or `None` where it has
/// nothing there.
pub fn random_edit(rng: &mut Rng, object: &Value, root: &str) -> Option<Edit> {
    let below = object.get(root)?;
    let mut all = Vec::new();
    paths(below, vec![Step::Key(root.to_owned())], &mut all);
    let (path, value) = all[rng.below(all.len())].clone();
    let action = match (value, rng.below(8)) {
        (_, 0) if path.len() > 1 => Action::Remove,
        (Value::Array(items), 1 | 2) if !items.is_empty() => {
            Action::Duplicate(rng.below(items.len()))
        }
        (Value::Array(items), 3) if items.len() > 1 => Action::Reverse,
        (Value::Object(_), 1 | 2) => {
            let mut path = path.clone();
            path.push(Step::Key(
                rng.pick(&["unknownField", "name", "enabled"]).to_string(),
            ));
            return Some(Edit {
                path,
                action: Action::Set(json!(rng.pick(&["x", "1"]))),
            });
        }
        (Value::Number(_), 1..=5) => Action::Set(json!(*rng.pick(&INTEGERS))),
        (Value::String(_), 1..=5) => Action::Set(rng.pick(&strings()).clone()),
        (Value::Bool(b), 1..=4) => Action::Set(json!(!b)),
        (_, 6) => Action::Set(Value::Null),
        _ => Action::Set(wrong_type(rng, value)),
    };
    Some(Edit { path, action })
}

impl Edit {
    /// Applies the edit; false where the path is not in `object` (it then stays as it was).
    pub fn apply(&self, object: &mut Value) -> bool {
        let Some((last, parents)) = self.path.split_last() else {
            return false;
        };
        let Some(parent) = walk(object, parents) else {
            return false;
        };
        match (&self.action, last, parent) {
            (Action::Remove, Step::Key(key), Value::Object(map)) => map.remove(key).is_some(),
            (Action::Remove, Step::Index(i), Value::Array(items)) if *i < items.len() => {
                items.remove(*i);
                true
            }
            (Action::Set(value), Step::Key(key), Value::Object(map)) => {
                map.insert(key.clone(), value.clone());
                true
            }
            (Action::Set(value), Step::Index(i), Value::Array(items)) if *i < items.len() => {
                items[*i] = value.clone();
                true
            }
            (action, last, parent) => match (action, walk(parent, std::slice::from_ref(last))) {
                (Action::Duplicate(i), Some(Value::Array(items))) if *i < items.len() => {
                    items.push(items[*i].clone());
                    true
                }
                (Action::Reverse, Some(Value::Array(items))) => {
                    items.reverse();
                    true
                }
                _ => false,
            },
        }
    }
}

/// The value at `path` below `value`.
fn walk<'a>(value: &'a mut Value, path: &[Step]) -> Option<&'a mut Value> {
    path.iter().try_fold(value, |at, step| match step {
        Step::Key(key) => at.get_mut(key),
        Step::Index(i) => at.get_mut(*i),
    })
}
