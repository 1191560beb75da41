//! Interim, until the v1alpha1 ⇄ v1alpha2 conversion (`api::conversion`) is merged: a kind
//! that is served in its hub version only. Its strategy is built with
//! `KindStrategy::hub_only`, so no request ever asks it to convert; the conversion functions
//! answer an explicit error rather than pretending to convert.

use std::marker::PhantomData;

use crate::api::Kind;
use crate::api::resource::{ConversionError, HubConversion, Resource};
use crate::api::validation::Verdict;

/// `R` without conversion.
pub struct HubOnly<R>(PhantomData<fn() -> R>);

const NOT_AVAILABLE: &str = "conversion between v1alpha1 and v1alpha2 is not available yet";

impl<R: Resource> Resource for HubOnly<R> {
    const KIND: Kind = R::KIND;
    type V1alpha1 = R::V1alpha1;
    type Hub = R::Hub;

    fn default_hub(hub: &mut Self::Hub) {
        R::default_hub(hub);
    }

    fn validate_create(hub: &Self::Hub) -> Verdict {
        R::validate_create(hub)
    }

    fn validate_update(new: &Self::Hub, old: &Self::Hub) -> Verdict {
        R::validate_update(new, old)
    }
}

impl<R: Resource> HubConversion for HubOnly<R> {
    fn to_hub(_: Self::V1alpha1, _: Option<&Self::Hub>) -> Result<Self::Hub, ConversionError> {
        Err(ConversionError(NOT_AVAILABLE.to_owned()))
    }

    fn from_hub(_: &Self::Hub) -> Result<Self::V1alpha1, ConversionError> {
        Err(ConversionError(NOT_AVAILABLE.to_owned()))
    }
}
