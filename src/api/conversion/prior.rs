//! What the hub already knows while a v1alpha1 value is converted up: the
//! matching part of the stored v1alpha2 object, or of the v1alpha2 object an
//! upstream install left in the `cluster.x-k8s.io/conversion-data`
//! annotation.

/// Where a prior hub value comes from. It decides which down-conversion the
/// v1alpha1 value is compared against: the one this server applies, or the
/// one upstream applied when it wrote the annotation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    /// The object this server has stored (or nothing is known).
    Stored,
    /// Upstream's conversion-data annotation.
    Upstream,
}

/// The prior hub value of one field, if any.
#[derive(Debug)]
pub(crate) struct Prior<'a, T> {
    value: Option<&'a T>,
    origin: Origin,
}

// Manual impls: a derive would require `T: Clone`/`T: Copy`.
impl<T> Clone for Prior<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Prior<'_, T> {}

impl<'a, T> Prior<'a, T> {
    /// Nothing is known: the v1alpha1 value is converted as if new.
    pub(crate) fn none() -> Self {
        Prior {
            value: None,
            origin: Origin::Stored,
        }
    }

    /// The stored object wins over the upstream annotation's.
    pub(crate) fn resolve(stored: Option<&'a T>, upstream: Option<&'a T>) -> Self {
        match (stored, upstream) {
            (Some(value), _) => Prior::new(Some(value), Origin::Stored),
            (None, Some(value)) => Prior::new(Some(value), Origin::Upstream),
            (None, None) => Prior::none(),
        }
    }

    pub(crate) fn new(value: Option<&'a T>, origin: Origin) -> Self {
        Prior { value, origin }
    }

    pub(crate) fn get(self) -> Option<&'a T> {
        self.value
    }

    pub(crate) fn origin(self) -> Origin {
        self.origin
    }

    /// The prior value of a field of this value.
    pub(crate) fn field<U>(self, field: impl FnOnce(&'a T) -> &'a U) -> Prior<'a, U> {
        Prior::new(self.value.map(field), self.origin)
    }

    /// The prior value of an optional part of this value.
    pub(crate) fn and_then<U>(self, part: impl FnOnce(&'a T) -> Option<&'a U>) -> Prior<'a, U> {
        Prior::new(self.value.and_then(part), self.origin)
    }

    /// A hub-only field: v1alpha1 cannot express it, so it keeps its prior
    /// value (or is left unset on a new object).
    pub(crate) fn hidden<U: Clone + Default + 'a>(self, field: impl FnOnce(&'a T) -> &'a U) -> U {
        self.value.map(field).cloned().unwrap_or_default()
    }
}

impl<'a, T> Prior<'a, Option<T>> {
    /// The prior value inside an optional field.
    pub(crate) fn flatten(self) -> Prior<'a, T> {
        self.and_then(Option::as_ref)
    }
}
