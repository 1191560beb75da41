//! Structs whose fields are the same in both versions.

/// Defines the pair of conversions between a v1alpha1 (`v1`) and a v1alpha2
/// (`v2`) struct with the same fields of the same types. Both directions
/// destructure exhaustively, so a field added to either side breaks the build.
macro_rules! same_fields {
    ($up:ident, $down:ident: $name:ident { $($field:ident),+ $(,)? }) => {
        pub(crate) fn $up(spoke: v1::$name) -> v2::$name {
            let v1::$name { $($field),+ } = spoke;
            v2::$name { $($field),+ }
        }

        pub(crate) fn $down(hub: &v2::$name) -> v1::$name {
            let v2::$name { $($field),+ } = hub;
            v1::$name { $($field: $field.clone()),+ }
        }
    };
}

pub(crate) use same_fields;
