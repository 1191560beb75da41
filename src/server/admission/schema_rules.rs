//! The `x-kubernetes-validations` rules of kinds defined by CRDs, run by this server's CEL
//! engine (`expressions`, with Kubernetes' libraries): the `api::validation::rules::RuleEngine`
//! that `registry::crd` strategies get. `self` is the value at the rule's schema node,
//! `oldSelf` the stored one; a rule that reads `oldSelf` is a transition rule.

use serde_json::Value;

use crate::api::schema::Rule;
use crate::api::validation::rules::{RuleEngine, RuleError};

use super::expressions::{Activation, Expression};

/// CEL for CRD validation rules.
pub struct CelRules;

impl RuleEngine for CelRules {
    fn is_transition(&self, rule: &Rule) -> bool {
        Expression::compile(&rule.rule).is_ok_and(|e| e.reads("oldSelf"))
    }

    fn check(&self, rule: &Rule) -> Result<(), String> {
        let sources = std::iter::once(&rule.rule).chain(rule.message_expression.as_ref());
        for source in sources {
            Expression::compile(source).map_err(|e| format!("{source:?}: {e}"))?;
        }
        Ok(())
    }

    fn evaluate(&self, rule: &Rule, value: &Value, old: Option<&Value>) -> Result<bool, RuleError> {
        let expression = Expression::compile(&rule.rule).map_err(RuleError::Unavailable)?;
        let activation = Activation::for_rule(value, old, rule.optional_old_self);
        match expression.evaluate(&activation) {
            Ok(cel::Value::Bool(holds)) => Ok(holds),
            Ok(other) => Err(RuleError::Unavailable(format!(
                "rule {:?} evaluates to {}, not a bool",
                rule.rule,
                other.type_of()
            ))),
            Err(e) => Err(RuleError::Evaluation(e)),
        }
    }

    /// kube uses the `messageExpression`'s value when it is a non-empty string without line
    /// breaks, and the static message otherwise (also when it fails).
    fn message(&self, rule: &Rule, value: &Value, old: Option<&Value>) -> Option<String> {
        let source = rule.message_expression.as_deref()?;
        let activation = Activation::for_rule(value, old, rule.optional_old_self);
        let message = Expression::compile(source)
            .ok()?
            .evaluate_string(&activation)
            .ok()?;
        (!message.trim().is_empty() && !message.contains(['\n', '\r'])).then_some(message)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rule(text: &str) -> Rule {
        Rule {
            rule: text.to_owned(),
            ..Rule::default()
        }
    }

    #[test]
    fn self_and_old_self() {
        let engine = CelRules;
        let spec = json!({"replicas": 3, "name": "a"});
        assert_eq!(
            engine.evaluate(&rule("self.replicas <= 5"), &spec, None),
            Ok(true)
        );
        assert_eq!(
            engine.evaluate(&rule("self.replicas > 5"), &spec, None),
            Ok(false)
        );
        let immutable = rule("self.name == oldSelf.name");
        assert!(engine.is_transition(&immutable));
        assert!(!engine.is_transition(&rule("self.name == 'a'")));
        let old = json!({"replicas": 3, "name": "b"});
        assert_eq!(engine.evaluate(&immutable, &spec, Some(&old)), Ok(false));
        assert!(matches!(
            engine.evaluate(&rule("self.missing == 1"), &spec, None),
            Err(RuleError::Evaluation(_))
        ));
        assert!(matches!(
            engine.evaluate(&rule("self.replicas +"), &spec, None),
            Err(RuleError::Unavailable(_))
        ));
        assert!(engine.check(&rule("self.replicas +")).is_err());
        assert!(engine.check(&rule("self.replicas > 1")).is_ok());
        let optional = Rule {
            optional_old_self: true,
            ..rule("!oldSelf.hasValue() || self.name == oldSelf.value().name")
        };
        assert_eq!(engine.evaluate(&optional, &spec, None), Ok(true));
        assert_eq!(engine.evaluate(&optional, &spec, Some(&old)), Ok(false));
    }

    #[test]
    fn message_expressions_fall_back_to_the_message() {
        let engine = CelRules;
        let spec = json!({"replicas": 7});
        let with = |expression: &str| Rule {
            message_expression: Some(expression.to_owned()),
            ..rule("self.replicas <= 5")
        };
        assert_eq!(
            engine.message(&with("'replicas is ' + string(self.replicas)"), &spec, None),
            Some("replicas is 7".to_owned())
        );
        assert_eq!(engine.message(&with("''"), &spec, None), None);
        assert_eq!(engine.message(&with("'a\\nb'"), &spec, None), None);
        assert_eq!(engine.message(&with("self.nope"), &spec, None), None);
    }
}
