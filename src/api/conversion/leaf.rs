//! Conversions of single fields whose type differs between the versions, and
//! the one rule that makes them lossless through the server: [`keep`].

use std::marker::PhantomData;

use super::error::{ConversionError, FieldPath};
use super::prior::Prior;

pub(crate) type Result<T> = std::result::Result<T, ConversionError>;

/// A field's conversion in both directions. `down` may lose information
/// (several hub values down-convert to the same v1alpha1 value); [`keep`]
/// gets it back from the prior hub value.
pub(crate) trait Leaf {
    type Spoke: PartialEq;
    type Hub: Clone;
    fn up(spoke: Self::Spoke, path: &FieldPath) -> Result<Self::Hub>;
    fn down(hub: &Self::Hub, path: &FieldPath) -> Result<Self::Spoke>;
}

/// Converts a v1alpha1 field up. When it is what the prior hub value
/// down-converts to, the v1alpha1 side did not change it: the prior value is
/// kept as it was (`Some("")` stays `Some("")`, `Some(0)` stays `Some(0)`).
/// Otherwise the v1alpha1 value wins.
pub(crate) fn keep<L: Leaf>(
    spoke: L::Spoke,
    prior: Prior<'_, L::Hub>,
    path: &FieldPath,
) -> Result<L::Hub> {
    if let Some(hub) = prior.get()
        && L::down(hub, path).is_ok_and(|seen| seen == spoke)
    {
        return Ok(hub.clone());
    }
    L::up(spoke, path)
}

/// An integer type of either version, with its range for error messages.
pub(crate) trait Integer: Copy + Default + PartialEq + Into<i128> + TryFrom<i128> {
    const MIN: i128;
    const MAX: i128;
}

macro_rules! integer {
    ($($t:ty),*) => {$(
        impl Integer for $t {
            const MIN: i128 = <$t>::MIN as i128;
            const MAX: i128 = <$t>::MAX as i128;
        }
    )*};
}
integer!(u16, u32, u64, i32, i64);

/// Converts an integer to another width or signedness; a value that does not
/// fit is an error naming the field, never wrapped or clamped.
pub(crate) fn fit<S: Integer, H: Integer>(value: S, path: &FieldPath) -> Result<H> {
    let wide: i128 = value.into();
    H::try_from(wide).map_err(|_| ConversionError::OutOfRange {
        path: path.to_string(),
        value: wide,
        min: H::MIN,
        max: H::MAX,
    })
}

/// Converts an optional integer, see [`fit`].
pub(crate) fn fit_opt<S: Integer, H: Integer>(
    value: Option<S>,
    path: &FieldPath,
) -> Result<Option<H>> {
    value.map(|v| fit(v, path)).transpose()
}

/// v1alpha1 `""` is an absent hub string (`string` ⇄ `*string`).
pub(crate) struct EmptyIsNone;

impl Leaf for EmptyIsNone {
    type Spoke = String;
    type Hub = Option<String>;
    fn up(spoke: String, _: &FieldPath) -> Result<Option<String>> {
        Ok(Some(spoke).filter(|s| !s.is_empty()))
    }
    fn down(hub: &Option<String>, _: &FieldPath) -> Result<String> {
        Ok(hub.clone().unwrap_or_default())
    }
}

/// An absent v1alpha1 string is the empty hub string (`*string` ⇄ `string`).
pub(crate) struct NoneIsEmpty;

impl Leaf for NoneIsEmpty {
    type Spoke = Option<String>;
    type Hub = String;
    fn up(spoke: Option<String>, _: &FieldPath) -> Result<String> {
        Ok(spoke.unwrap_or_default())
    }
    fn down(hub: &String, _: &FieldPath) -> Result<Option<String>> {
        Ok(Some(hub.clone()).filter(|s| !s.is_empty()))
    }
}

/// v1alpha1 `false` is an absent hub flag (`bool` ⇄ `*bool`, upstream's
/// `Convert_bool_To_Pointer_bool`).
pub(crate) struct FalseIsNone;

impl Leaf for FalseIsNone {
    type Spoke = bool;
    type Hub = Option<bool>;
    fn up(spoke: bool, _: &FieldPath) -> Result<Option<bool>> {
        Ok(spoke.then_some(true))
    }
    fn down(hub: &Option<bool>, _: &FieldPath) -> Result<bool> {
        Ok(hub.unwrap_or(false))
    }
}

/// A flag the hub requires when its object is present: v1alpha1 `false` is
/// an explicit hub `false`.
pub(crate) struct BoolIsSet;

impl Leaf for BoolIsSet {
    type Spoke = bool;
    type Hub = Option<bool>;
    fn up(spoke: bool, _: &FieldPath) -> Result<Option<bool>> {
        Ok(Some(spoke))
    }
    fn down(hub: &Option<bool>, _: &FieldPath) -> Result<bool> {
        Ok(hub.unwrap_or(false))
    }
}

/// v1alpha1 `0` is an absent hub integer (`int` ⇄ `*int`), possibly of
/// another width.
pub(crate) struct ZeroIsNone<S, H>(PhantomData<(S, H)>);

impl<S: Integer, H: Integer> Leaf for ZeroIsNone<S, H> {
    type Spoke = S;
    type Hub = Option<H>;
    fn up(spoke: S, path: &FieldPath) -> Result<Option<H>> {
        if spoke == S::default() {
            return Ok(None);
        }
        fit(spoke, path).map(Some)
    }
    fn down(hub: &Option<H>, path: &FieldPath) -> Result<S> {
        hub.map_or(Ok(S::default()), |v| fit(v, path))
    }
}

/// An optional integer of another width on each side.
pub(crate) struct FitOpt<S, H>(PhantomData<(S, H)>);

impl<S: Integer, H: Integer> Leaf for FitOpt<S, H> {
    type Spoke = Option<S>;
    type Hub = Option<H>;
    fn up(spoke: Option<S>, path: &FieldPath) -> Result<Option<H>> {
        fit_opt(spoke, path)
    }
    fn down(hub: &Option<H>, path: &FieldPath) -> Result<Option<S>> {
        fit_opt(*hub, path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::conversion::prior::Origin;

    #[test]
    fn fit_names_the_field_and_the_range() {
        let root = FieldPath::ROOT;
        let path = root.field("mtu");
        let err = fit::<i32, u16>(-1, &path).unwrap_err();
        assert_eq!(
            err.to_string(),
            "mtu: -1 is out of range for this API version (0 to 65535)"
        );
        assert_eq!(fit::<i32, u16>(65535, &path), Ok(65535));
        assert!(fit::<u32, i32>(u32::MAX, &path).is_err());
        assert!(fit::<u64, i64>(u64::MAX, &path).is_err());
    }

    #[test]
    fn keep_restores_what_v1alpha1_cannot_tell_apart() {
        let path = FieldPath::ROOT;
        let stored = Some(String::new());
        let prior = Prior::new(Some(&stored), Origin::Stored);
        assert_eq!(
            keep::<EmptyIsNone>(String::new(), prior, &path),
            Ok(Some(String::new()))
        );
        // An edit wins over the stored value.
        assert_eq!(
            keep::<EmptyIsNone>("pve2".into(), prior, &path),
            Ok(Some("pve2".into()))
        );
        // Without a prior value the plain conversion applies.
        assert_eq!(
            keep::<EmptyIsNone>(String::new(), Prior::none(), &path),
            Ok(None)
        );

        let zero = Some(0);
        let prior = Prior::new(Some(&zero), Origin::Stored);
        assert_eq!(keep::<ZeroIsNone<i32, i32>>(0, prior, &path), Ok(Some(0)));
        assert_eq!(keep::<ZeroIsNone<i32, i32>>(4, prior, &path), Ok(Some(4)));
    }

    #[test]
    fn a_prior_value_that_cannot_be_converted_down_is_replaced() {
        let path = FieldPath::ROOT;
        let stored = Some(-5);
        let prior = Prior::new(Some(&stored), Origin::Stored);
        assert_eq!(
            keep::<FitOpt<u16, i32>>(Some(1500), prior, &path),
            Ok(Some(1500))
        );
    }
}
