//! Watch-derived triggers: a kube-rs watcher per kind (default back-off, so a broken watch
//! is re-established and relisted), each changed object mapped to the wakes it causes.

use futures::stream::{self, BoxStream};
use futures::{StreamExt, future};
use kube::api::DynamicObject;
use kube::runtime::{WatchStreamExt, watcher};

use super::driver::Wake;
use crate::management::kube::kinds::Kind;

/// The namespace of a watched object ("" for cluster-scoped ones).
pub fn namespace(object: &DynamicObject) -> String {
    object.metadata.namespace.clone().unwrap_or_default()
}

/// Wakes for every change (or deletion) of an object of `kind`, in every namespace.
pub fn watch(
    client: &kube::Client,
    kind: Kind,
    map: impl Fn(&DynamicObject) -> Vec<Wake> + Send + 'static,
) -> BoxStream<'static, Wake> {
    watcher(kind.api_all(client), watcher::Config::default())
        .default_backoff()
        .touched_objects()
        .filter_map(move |event| {
            future::ready(match event {
                Ok(object) => Some(stream::iter(map(&object))),
                Err(error) => {
                    tracing::debug!(kind = kind.name(), %error, "emulation watch failed; retrying");
                    None
                }
            })
        })
        .flatten()
        .boxed()
}

/// The object itself.
pub fn itself(object: &DynamicObject) -> Vec<Wake> {
    vec![Wake::Key((
        namespace(object),
        object.metadata.name.clone().unwrap_or_default(),
    ))]
}

/// The objects named `names` in the watched object's namespace; everything when it names
/// none (its owner is not known yet).
pub fn named_or_all(object: &DynamicObject, names: Vec<String>) -> Vec<Wake> {
    if names.is_empty() {
        return vec![Wake::All];
    }
    names
        .into_iter()
        .map(|name| Wake::Key((namespace(object), name)))
        .collect()
}

/// Everything (the change concerns objects that cannot be named from it).
pub fn everything(_: &DynamicObject) -> Vec<Wake> {
    vec![Wake::All]
}

/// Several trigger streams as one.
pub fn merge(streams: Vec<BoxStream<'static, Wake>>) -> BoxStream<'static, Wake> {
    stream::select_all(streams).boxed()
}
