//! Apply conflicts: fields another manager owns that an apply would change,
//! with kube-apiserver's message and `FieldManagerConflict` causes.

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::StatusCause;

use super::fieldpath::Path;
use super::managed::ManagerId;

/// One field an apply would take from another manager.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// The manager that owns the field.
    pub manager: ManagerId,
    /// The field, in the owner's API version.
    pub path: Path,
}

/// The conflicts of one apply, ordered by manager then path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflicts(pub Vec<Conflict>);

/// The `type` of the causes of an apply conflict.
pub const CAUSE_TYPE: &str = "FieldManagerConflict";

impl Conflicts {
    /// Orders conflicts as the message lists them: by manager identifier,
    /// each manager's paths in the order given (a set's order).
    pub fn new(mut conflicts: Vec<Conflict>) -> Conflicts {
        conflicts.sort_by_cached_key(|c| c.manager.identifier());
        Conflicts(conflicts)
    }

    /// The `Status` message: `Apply failed with 1 conflict: conflict with
    /// "m" using g/v: .spec.a`, or for several, one line per field grouped
    /// by manager.
    pub fn message(&self) -> String {
        if let [one] = self.0.as_slice() {
            return format!(
                "Apply failed with 1 conflict: conflict with {}: {}",
                one.manager.describe(),
                one.path
            );
        }
        let mut lines: Vec<String> = Vec::new();
        let mut previous: Option<&ManagerId> = None;
        for conflict in &self.0 {
            if previous != Some(&conflict.manager) {
                lines.push(format!("conflicts with {}:", conflict.manager.describe()));
                previous = Some(&conflict.manager);
            }
            lines.push(format!("- {}", conflict.path));
        }
        format!(
            "Apply failed with {} conflicts: {}",
            self.0.len(),
            lines.join("\n")
        )
    }

    /// One `Status` cause per conflicting field and manager.
    pub fn causes(&self) -> Vec<StatusCause> {
        self.0
            .iter()
            .map(|conflict| StatusCause {
                reason: Some(CAUSE_TYPE.to_owned()),
                message: Some(format!("conflict with {}", conflict.manager.describe())),
                field: Some(conflict.path.to_string()),
            })
            .collect()
    }
}

impl fmt::Display for Conflicts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::apply::managed::Operation;

    const V2: &str = "infrastructure.cluster.x-k8s.io/v1alpha2";

    fn conflict(manager: &ManagerId, path: &[&str]) -> Conflict {
        Conflict {
            manager: manager.clone(),
            path: Path::fields(path),
        }
    }

    #[test]
    fn one_conflict() {
        let mgr = ManagerId::new("mgr", Operation::Update, V2, "");
        let conflicts = Conflicts::new(vec![conflict(&mgr, &["spec", "replicas"])]);
        assert_eq!(
            conflicts.message(),
            format!(
                r#"Apply failed with 1 conflict: conflict with "mgr" using {V2}: .spec.replicas"#
            )
        );
        let cause = &conflicts.causes()[0];
        assert_eq!(cause.reason.as_deref(), Some("FieldManagerConflict"));
        assert_eq!(
            cause.message.as_deref(),
            Some(format!(r#"conflict with "mgr" using {V2}"#).as_str())
        );
        assert_eq!(cause.field.as_deref(), Some(".spec.replicas"));
    }

    #[test]
    fn several_conflicts_are_grouped_by_manager() {
        let b = ManagerId::new("b", Operation::Apply, V2, "");
        let a = ManagerId::new("a", Operation::Update, V2, "");
        let conflicts = Conflicts::new(vec![
            conflict(&b, &["spec", "x"]),
            conflict(&a, &["spec", "a"]),
            conflict(&a, &["spec", "b"]),
        ]);
        assert_eq!(
            conflicts.message(),
            format!(
                "Apply failed with 3 conflicts: conflicts with \"a\" using {V2}:\n- .spec.a\n- .spec.b\nconflicts with \"b\":\n- .spec.x"
            )
        );
    }
}
