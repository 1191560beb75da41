//! A CRD kind's versions as the field manager sees them: the CRD's schemas, and kube's `None`
//! conversion (only `apiVersion` changes).

use std::sync::LazyLock;

use serde_json::Value;

use crate::api::Version;
use crate::api::resource::ConversionError;
use crate::api::schema::Structural;

use super::super::apply::KindVersions;
use super::Definition;

/// What an unserved version's managedFields are compared against (never: the field manager
/// drops entries of versions a kind is not served in before it asks for a schema).
static NO_SCHEMA: LazyLock<Structural> = LazyLock::new(Structural::default);

pub struct CustomVersions<'a> {
    definition: &'a Definition,
}

impl<'a> CustomVersions<'a> {
    pub fn new(definition: &'a Definition) -> Self {
        Self { definition }
    }
}

impl KindVersions for CustomVersions<'_> {
    fn kind_name(&self) -> &str {
        self.definition.descriptor.kind
    }

    fn schema(&self, version: Version) -> &'static Structural {
        self.definition.schema(version).unwrap_or(&NO_SCHEMA)
    }

    fn serves(&self, version: Version) -> bool {
        self.definition.schema(version).is_some()
    }

    fn has_status(&self, version: Version) -> bool {
        self.definition.descriptor.has_status(version.into())
    }

    fn convert(
        &self,
        object: &Value,
        _from: Version,
        to: Version,
    ) -> Result<Value, ConversionError> {
        let mut converted = object.clone();
        if let Value::Object(map) = &mut converted {
            map.insert("apiVersion".to_owned(), to.api_version().into());
        }
        Ok(converted)
    }
}
