//! Fuzz targets for the request decoders and both patch formats, as property tests over
//! arbitrary and mutated input. `tests/run` runs every fuzz target of this binary (these,
//! `conversion::fuzz`, `apply::properties::no_input_panics`, `rest::bad_input`) briefly
//! under an address-space limit; `CAPMOX_FUZZ_CASES` sets the cases per target for the long
//! run (docs/hardening.md).

use capmox_apiserver::registry::patch::{Patch, json::MAX_DEPTH};
use capmox_apiserver::server::body::{self, MAX_BODY_VALUES, MAX_REQUEST_BODY_BYTES};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::rest::machine;

/// Cases per fuzz target: `CAPMOX_FUZZ_CASES`, else `default`.
pub fn fuzz_cases(default: u32) -> u32 {
    std::env::var("CAPMOX_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Containers nesting in `value`, walked without recursion.
fn height(value: &Value) -> usize {
    let mut highest = 0;
    let mut stack = vec![(value, 1usize)];
    while let Some((value, depth)) = stack.pop() {
        match value {
            Value::Array(items) => {
                highest = highest.max(depth);
                stack.extend(items.iter().map(|v| (v, depth + 1)));
            }
            Value::Object(map) => {
                highest = highest.max(depth);
                stack.extend(map.values().map(|v| (v, depth + 1)));
            }
            _ => {}
        }
    }
    highest
}

/// A valid machine as bytes with `edits` applied: byte flips, insertions of JSON and YAML
/// punctuation, and cuts, the mutations that reach past the first syntax check.
fn mutated(base: Vec<u8>) -> impl Strategy<Value = Vec<u8>> {
    let len = base.len();
    let edit = (
        0..len,
        prop_oneof![
            any::<u8>().prop_map(|b| vec![b]),
            proptest::sample::select(
                &[
                    "{",
                    "}",
                    "[",
                    "]",
                    "\"",
                    ",",
                    ":",
                    "\\u0000",
                    "\\ud800",
                    "&a ",
                    "*a",
                    "<<: ",
                    "\n- ",
                    "\t",
                    "\u{feff}",
                    "1e999",
                    "-0",
                    "null",
                    "!!binary ",
                    "---\n",
                    "\u{fffd}",
                ][..]
            )
            .prop_map(|s| s.as_bytes().to_vec()),
        ],
        any::<bool>(),
    );
    proptest::collection::vec(edit, 0..6).prop_map(move |edits| {
        let mut bytes = base.clone();
        for (at, insert, replace) in edits {
            let at = at.min(bytes.len());
            if replace && at < bytes.len() {
                bytes.splice(at..at + 1, insert);
            } else {
                bytes.splice(at..at, insert);
            }
        }
        bytes
    })
}

/// YAML built from anchors and aliases that refer to each other, the shape of alias bombs.
fn alias_graph() -> impl Strategy<Value = String> {
    proptest::collection::vec((0usize..8, 1usize..12), 1..10).prop_map(|levels| {
        let mut text = String::from("a0: &a0 [x, y]\n");
        for (i, (refer, width)) in levels.into_iter().enumerate() {
            let level = i + 1;
            let target = refer % level;
            let refs = vec![format!("*a{target}"); width].join(", ");
            text.push_str(&format!("a{level}: &a{level} [{refs}]\n"));
        }
        text
    })
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "[a-z~/0-9-]{0,6}".prop_map(Value::from),
    ];
    leaf.prop_recursive(6, 64, 5, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map("[a-z0-9~]{0,3}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// JSON pointers into the documents the generators build, some of them malformed.
fn arb_pointer() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => proptest::collection::vec(
            prop_oneof!["[a-z0-9~]{0,3}", Just("-".to_owned()), Just("0".to_owned()), Just("~1".to_owned())],
            0..6
        )
        .prop_map(|tokens| tokens.iter().map(|t| format!("/{t}")).collect()),
        1 => ".{0,8}",
    ]
}

fn arb_operation() -> impl Strategy<Value = Value> {
    (
        proptest::sample::select(&["add", "remove", "replace", "move", "copy", "test", "jump"][..]),
        arb_pointer(),
        arb_pointer(),
        arb_json(),
        any::<(bool, bool)>(),
    )
        .prop_map(|(op, path, from, value, (with_from, with_value))| {
            let mut operation = json!({"op": op, "path": path});
            if with_from || matches!(op, "move" | "copy") {
                operation["from"] = json!(from);
            }
            if with_value || matches!(op, "add" | "replace" | "test") {
                operation["value"] = value;
            }
            operation
        })
}

/// A decoder's answer: a value, or a 400 / 413 Status — never a panic or anything else.
fn decoded(
    result: Result<body::DecodedBody, capmox_apiserver::server::error::ApiError>,
) -> Result<(), TestCaseError> {
    match result {
        Ok(decoded) => {
            prop_assert!(height(&decoded.value) <= body::MAX_NESTING_DEPTH);
            Ok(())
        }
        Err(e) => {
            prop_assert!(matches!(e.code().as_u16(), 400 | 413), "{e}");
            Ok(())
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(fuzz_cases(256)))]

    #[test]
    fn fuzz_json_body_decoder(
        bytes in prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..256),
            mutated(machine("fuzz").to_string().into_bytes()),
        ]
    ) {
        decoded(body::decode_json(&bytes))?;
    }

    #[test]
    fn fuzz_yaml_body_decoder(
        bytes in prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..256),
            mutated(serde_saphyr::to_string(&machine("fuzz")).expect("yaml").into_bytes()),
            alias_graph().prop_map(String::into_bytes),
        ]
    ) {
        decoded(body::decode_yaml(&bytes))?;
    }

    /// A JSON patch never panics, and what it produces stays as deep as allowed and within
    /// the document, the patch and the copy budget.
    #[test]
    fn fuzz_json_patch(doc in arb_json(), ops in proptest::collection::vec(arb_operation(), 0..12)) {
        let body = Value::Array(ops).to_string();
        let Ok(patch) = Patch::json(body.as_bytes()) else { return Ok(()) };
        if let Ok(patched) = patch.apply(&doc) {
            prop_assert!(height(&patched) <= MAX_DEPTH.max(height(&doc)));
            let size = patched.to_string().len();
            prop_assert!(size <= doc.to_string().len() + body.len() + MAX_REQUEST_BODY_BYTES);
        }
    }

    /// Self-referential copies and moves, the shapes that grow a document fastest.
    #[test]
    fn fuzz_json_patch_growth(ops in proptest::collection::vec(
        (proptest::sample::select(&["copy", "move"][..]), 0usize..4, 0usize..4),
        1..200,
    )) {
        let paths = ["/a", "/a/x", "/b", "/a/x/-"];
        let ops: Vec<Value> = std::iter::once(json!({"op": "add", "path": "/a", "value": {"x": ["0123456789"]}}))
            .chain(std::iter::once(json!({"op": "add", "path": "/b", "value": {}})))
            .chain(ops.into_iter().map(|(op, from, to)| json!({"op": op, "from": paths[from % 3], "path": paths[to]})))
            .collect();
        let patch = Patch::json(Value::Array(ops).to_string().as_bytes()).expect("parses");
        if let Ok(patched) = patch.apply(&json!({})) {
            prop_assert!(height(&patched) <= MAX_DEPTH);
            prop_assert!(patched.to_string().len() <= 2 * MAX_REQUEST_BODY_BYTES);
        }
    }

    #[test]
    fn fuzz_merge_patch(doc in arb_json(), patch in arb_json()) {
        match Patch::merge(patch.clone()) {
            Ok(merge) => {
                let merged = merge.apply(&doc).expect("a merge patch always applies");
                prop_assert!(height(&merged) <= height(&doc).max(height(&patch)).max(1));
            }
            Err(e) => prop_assert!(!patch.is_object(), "{e}"),
        }
    }
}

/// The value bound holds whatever the input looks like: the largest body of empty arrays.
#[test]
fn the_value_bound_caps_every_decoder() {
    let items = MAX_REQUEST_BODY_BYTES / 3;
    let body = format!("[{}]", vec!["[]"; items].join(","));
    let err = body::decode_json(body.as_bytes()).expect_err("too many values");
    assert_eq!(err.code().as_u16(), 413);
    assert!(items > MAX_BODY_VALUES);
}
