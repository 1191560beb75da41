//! Kubernetes' CEL authorizer library: the `authorizer` variable of match conditions and
//! admission policies asks this server's authorizer (SubjectAccessReviews to the management
//! cluster in `serve`) whether the request's user may do something else:
//! `authorizer.group('apps').resource('deployments').namespace('ns').name('d').check('delete')`,
//! `authorizer.path('/healthz').check('get')`, `authorizer.serviceAccount('ns', 'sa')` for
//! another user, and `authorizer.requestResource` for the resource of the request. A decision
//! tells `allowed()`, `reason()`, `errored()` and `error()`.
//!
//! CEL functions are synchronous and a review is not: a check blocks its worker thread for the
//! review (the authorizer caches answers), as kube-apiserver's synchronous authorizer does.
//! Within one evaluation each distinct check is asked once.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use cel::extractors::This;
use cel::objects::Opaque;
use cel::{Context, ExecutionError, Value};

use crate::server::authn::UserInfo;
use crate::server::authz::{Authorizer, Decision};
use crate::server::request_info::RequestInfo;

/// Whom checks are made for, and the answers so far.
pub struct Checks {
    authorizer: Arc<dyn Authorizer>,
    user: UserInfo,
    answers: Mutex<HashMap<(String, Target), Decision>>,
}

impl Checks {
    pub fn new(authorizer: Arc<dyn Authorizer>, user: UserInfo) -> Arc<Self> {
        Arc::new(Self {
            authorizer,
            user,
            answers: Mutex::new(HashMap::new()),
        })
    }

    /// The decision on `target` with `verb` for `user`, asked once per evaluation.
    fn decide(&self, user: &UserInfo, target: &Target, verb: &str) -> Decision {
        let key = (format!("{}\u{0}{verb}", user.name), target.clone());
        if let Some(found) = self.answers.lock().ok().and_then(|a| a.get(&key).cloned()) {
            return found;
        }
        let info = target.request_info(verb);
        let decision = match tokio::runtime::Handle::try_current() {
            Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(|| {
                    handle.block_on(self.authorizer.authorize(user, &info))
                })
            }
            _ => Decision::Error("the authorizer cannot be asked from this thread".to_owned()),
        };
        if let Ok(mut answers) = self.answers.lock() {
            answers.insert(key, decision.clone());
        }
        decision
    }
}

/// What a check is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Target {
    /// The authorizer itself (`authorizer`, `authorizer.serviceAccount(…)`).
    Anything,
    Path(String),
    Group(String),
    Resource {
        group: String,
        resource: String,
        subresource: String,
        namespace: String,
        name: String,
    },
}

impl Target {
    fn request_info(&self, verb: &str) -> RequestInfo {
        let mut info = RequestInfo {
            verb: verb.to_owned(),
            ..RequestInfo::default()
        };
        match self {
            Target::Path(path) => info.path = path.clone(),
            Target::Anything | Target::Group(_) => {}
            Target::Resource {
                group,
                resource,
                subresource,
                namespace,
                name,
            } => {
                info.is_resource_request = true;
                info.api_group = group.clone();
                info.api_version = "*".to_owned();
                info.resource = resource.clone();
                info.subresource = subresource.clone();
                info.namespace = namespace.clone();
                info.name = name.clone();
            }
        }
        info
    }
}

/// An authorizer, path check, group check or resource check: kube's types of the library.
#[derive(Clone)]
struct Check {
    checks: Arc<Checks>,
    /// The user checked for: the request's, or a service account's.
    user: UserInfo,
    target: Target,
}

impl fmt::Debug for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} for {}", self.kind(), self.user.name)
    }
}

impl PartialEq for Check {
    fn eq(&self, other: &Self) -> bool {
        self.user == other.user && self.target == other.target
    }
}

impl Eq for Check {}

impl Check {
    fn kind(&self) -> &'static str {
        match self.target {
            Target::Anything => "kubernetes.authorization.Authorizer",
            Target::Path(_) => "kubernetes.authorization.PathCheck",
            Target::Group(_) => "kubernetes.authorization.GroupCheck",
            Target::Resource { .. } => "kubernetes.authorization.ResourceCheck",
        }
    }

    fn with(&self, target: Target) -> Value {
        Value::Opaque(Arc::new(Check {
            target,
            ..self.clone()
        }))
    }
}

impl Opaque for Check {
    fn runtime_type_name(&self) -> &str {
        self.kind()
    }
}

/// A check's answer.
#[derive(Debug, PartialEq, Eq)]
struct Answer(Decision);

impl Opaque for Answer {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.authorization.Decision"
    }
}

/// The `authorizer` variable for the request's user: its `requestResource` checks the
/// resource the request writes (`group`, `resource`, `subresource`, `namespace`, `name`).
pub fn authorizer_value(checks: &Arc<Checks>, request: [&str; 5]) -> Value {
    let [group, resource, subresource, namespace, name] = request.map(str::to_owned);
    let check = Check {
        checks: Arc::clone(checks),
        user: checks.user.clone(),
        target: Target::Anything,
    };
    let request_resource = check.with(Target::Resource {
        group,
        resource,
        subresource,
        namespace,
        name,
    });
    Value::from(HashMap::from([(
        "requestResource".to_owned(),
        request_resource,
    )]))
}

fn fail(function: &str, message: impl ToString) -> ExecutionError {
    ExecutionError::function_error(function, message)
}

/// The check `value` is.
fn check_of(function: &str, value: &Value) -> Result<Check, ExecutionError> {
    match value {
        Value::Opaque(opaque) => opaque.downcast_ref::<Check>().cloned(),
        _ => None,
    }
    .ok_or_else(|| fail(function, "not called on an authorizer check"))
}

/// The authorizer `value` is: the `authorizer` variable (a map whose `requestResource` is
/// checked for its user), or a service account's.
fn authorizer_of(function: &str, value: &Value) -> Result<Check, ExecutionError> {
    let check = match value {
        Value::Map(map) => map
            .map
            .get(&cel::objects::Key::String(Arc::new(
                "requestResource".to_owned(),
            )))
            .map(|resource| check_of(function, resource))
            .transpose()?
            .map(|check| Check {
                target: Target::Anything,
                ..check
            }),
        other => Some(check_of(function, other)?),
    };
    check
        .filter(|c| c.target == Target::Anything)
        .ok_or_else(|| fail(function, "not called on an authorizer"))
}

fn answer_of(function: &str, value: &Value) -> Result<Decision, ExecutionError> {
    match value {
        Value::Opaque(opaque) => opaque.downcast_ref::<Answer>().map(|a| a.0.clone()),
        _ => None,
    }
    .ok_or_else(|| fail(function, "not called on an authorization decision"))
}

/// A resource check's target with one of its parts (`subresource`, `namespace`, `name`) set.
fn narrowed(check: &Check, part: &str, value: String) -> Result<Target, ExecutionError> {
    let mut target = check.target.clone();
    let Target::Resource {
        subresource,
        namespace,
        name,
        ..
    } = &mut target
    else {
        return Err(fail(part, "not called on a resource check"));
    };
    *match part {
        "subresource" => subresource,
        "namespace" => namespace,
        _ => name,
    } = value;
    Ok(target)
}

pub fn register(context: &mut Context) {
    let add = |result: Result<(), cel::DeclarationError>| {
        debug_assert!(result.is_ok(), "{result:?}");
    };
    type Outcome = Result<Value, ExecutionError>;
    add(context.add_function(
        "path",
        |This(on): This<Value>, path: Arc<String>| -> Outcome {
            Ok(authorizer_of("path", &on)?.with(Target::Path(path.to_string())))
        },
    ));
    add(context.add_function(
        "group",
        |This(on): This<Value>, group: Arc<String>| -> Outcome {
            Ok(authorizer_of("group", &on)?.with(Target::Group(group.to_string())))
        },
    ));
    add(context.add_function(
        "serviceAccount",
        |This(on): This<Value>, namespace: Arc<String>, name: Arc<String>| -> Outcome {
            let check = authorizer_of("serviceAccount", &on)?;
            let user = UserInfo {
                name: format!("system:serviceaccount:{namespace}:{name}"),
                uid: String::new(),
                groups: vec![
                    "system:serviceaccounts".to_owned(),
                    format!("system:serviceaccounts:{namespace}"),
                ],
                extra: Default::default(),
            };
            Ok(Value::Opaque(Arc::new(Check {
                user,
                target: Target::Anything,
                ..check
            })))
        },
    ));
    add(context.add_function(
        "resource",
        |This(on): This<Value>, resource: Arc<String>| -> Outcome {
            let check = check_of("resource", &on)?;
            let Target::Group(group) = &check.target else {
                return Err(fail("resource", "not called on a group check"));
            };
            Ok(check.with(Target::Resource {
                group: group.clone(),
                resource: resource.to_string(),
                subresource: String::new(),
                namespace: String::new(),
                name: String::new(),
            }))
        },
    ));
    for part in ["subresource", "namespace", "name"] {
        add(context.add_function(
            part,
            move |This(on): This<Value>, value: Arc<String>| -> Outcome {
                let check = check_of(part, &on)?;
                Ok(check.with(narrowed(&check, part, value.to_string())?))
            },
        ));
    }
    add(context.add_function(
        "check",
        |This(on): This<Value>, verb: Arc<String>| -> Outcome {
            let check = check_of("check", &on)?;
            if !matches!(check.target, Target::Path(_) | Target::Resource { .. }) {
                return Err(fail(
                    "check",
                    "called on neither a path nor a resource check",
                ));
            }
            let decision = check.checks.decide(&check.user, &check.target, &verb);
            Ok(Value::Opaque(Arc::new(Answer(decision))))
        },
    ));
    add(
        context.add_function("allowed", |This(on): This<Value>| -> Outcome {
            Ok(Value::Bool(answer_of("allowed", &on)? == Decision::Allow))
        }),
    );
    add(
        context.add_function("reason", |This(on): This<Value>| -> Outcome {
            Ok(Value::from(match answer_of("reason", &on)? {
                Decision::Deny(reason) => reason,
                _ => String::new(),
            }))
        }),
    );
    add(
        context.add_function("errored", |This(on): This<Value>| -> Outcome {
            Ok(Value::Bool(matches!(
                answer_of("errored", &on)?,
                Decision::Error(_)
            )))
        }),
    );
    add(
        context.add_function("error", |This(on): This<Value>| -> Outcome {
            Ok(Value::from(match answer_of("error", &on)? {
                Decision::Error(error) => error,
                _ => String::new(),
            }))
        }),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::admission::expressions::{Activation, Expression};
    use futures::future::BoxFuture;
    use serde_json::json;

    /// Allows `alice` to delete deployments in `team-a` and get `/healthz`; errs for `broken`.
    struct Rules;

    impl Authorizer for Rules {
        fn authorize<'a>(
            &'a self,
            user: &'a UserInfo,
            info: &'a RequestInfo,
        ) -> BoxFuture<'a, Decision> {
            let decision = match (user.name.as_str(), info.verb.as_str()) {
                (_, "broken") => Decision::Error("the review failed".to_owned()),
                ("alice", "delete")
                    if info.api_group == "apps"
                        && info.resource == "deployments"
                        && info.namespace == "team-a" =>
                {
                    Decision::Allow
                }
                ("alice", "get") if !info.is_resource_request && info.path == "/healthz" => {
                    Decision::Allow
                }
                ("system:serviceaccount:ci:deployer", "create") => Decision::Allow,
                ("alice", "create") if info.resource == "proxmoxmachines" => Decision::Allow,
                _ => Decision::Deny(format!("{} may not {}", user.name, info.verb)),
            };
            Box::pin(std::future::ready(decision))
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn checks_ask_the_authorizer_for_the_requests_user() {
        let alice = UserInfo {
            name: "alice".to_owned(),
            ..UserInfo::default()
        };
        let checks = Checks::new(Arc::new(Rules), alice);
        let authorizer = authorizer_value(
            &checks,
            [
                "infrastructure.cluster.x-k8s.io",
                "proxmoxmachines",
                "",
                "team-a",
                "m",
            ],
        );
        let activation =
            Activation::new(Some(&json!({})), None, &json!({})).with_authorizer(&authorizer);
        let eval = |source: &str| Expression::compile(source)?.evaluate_bool(&activation);
        for (source, expected) in [
            (
                "authorizer.group('apps').resource('deployments').namespace('team-a').name('d').check('delete').allowed()",
                true,
            ),
            (
                "authorizer.group('apps').resource('deployments').namespace('team-b').check('delete').allowed()",
                false,
            ),
            (
                "authorizer.group('apps').resource('deployments').check('delete').reason() == 'alice may not delete'",
                true,
            ),
            ("authorizer.path('/healthz').check('get').allowed()", true),
            ("authorizer.requestResource.check('create').allowed()", true),
            (
                "authorizer.serviceAccount('ci', 'deployer').group('').resource('pods').check('create').allowed()",
                true,
            ),
            (
                "authorizer.group('').resource('pods').check('broken').errored()",
                true,
            ),
            (
                "authorizer.group('').resource('pods').check('broken').error() == 'the review failed'",
                true,
            ),
        ] {
            assert_eq!(eval(source), Ok(expected), "{source}");
        }
        assert!(
            eval("authorizer.group('apps').check('get').allowed()").is_err(),
            "a group check has no verb"
        );
    }
}
