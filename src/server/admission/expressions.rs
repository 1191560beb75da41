//! CEL for admission, with the variables kube-apiserver gives webhook match conditions and
//! ValidatingAdmissionPolicies: `object`, `oldObject`, `request` (the AdmissionRequest without
//! its objects), `params`, `namespaceObject` and `variables`. The engine is the `cel` crate:
//! its standard library with the strings, lists, math and encoders extensions, which cover
//! what Kubernetes' CEL libraries add for strings and lists.
//!
//! Expressions come from the cluster's admins (webhook and policy objects), the data from the
//! request. The engine counts no cost, so kube's budget is enforced as a bound before an
//! expression runs: its comprehensions nested `d` deep over inputs whose widest list or map
//! has `n` entries take at most `n^d` steps, which must stay within kube's 10,000,000 (a
//! request's own lists bring an admin's quadratic policy no further than that).
//! `authorizer` is there when the chain has an authorizer (`authz`).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::Value;

/// The standard library with the `cel` crate's extensions.
fn base_env() -> cel::Env {
    let mut env = cel::Env::stdlib();
    for extension in [
        cel::extensions::strings,
        cel::extensions::lists,
        cel::extensions::math,
        cel::extensions::encoders,
    ] {
        env.add_extension(extension)
            .expect("the cel crate's extensions declare distinct functions");
    }
    env
}

/// The environment every expression compiles in.
fn env() -> Arc<cel::Env> {
    static ENV: OnceLock<Arc<cel::Env>> = OnceLock::new();
    Arc::clone(ENV.get_or_init(|| Arc::new(base_env())))
}

/// The context every evaluation's variables are added to: the environment and Kubernetes'
/// libraries, registered once.
fn root() -> &'static cel::Context<'static, 'static> {
    static ROOT: OnceLock<cel::Context<'static, 'static>> = OnceLock::new();
    ROOT.get_or_init(|| {
        let mut context = cel::Context::with_env(env());
        super::library::register(&mut context);
        context
    })
}

/// The context of one patch expression: the common one's, with the struct types the
/// expression spells and `jsonpatch.escapeKey`.
fn patch_root(program: &cel::Program) -> Result<cel::Context<'static, 'static>, String> {
    let mut names = BTreeSet::new();
    struct_names(program.expression(), &mut names);
    let mut env = base_env();
    super::patches::register_types(&mut env, names.iter().map(String::as_str))
        .map_err(|e| format!("compilation failed: {e}"))?;
    let mut context = cel::Context::with_env(Arc::new(env));
    super::library::register(&mut context);
    super::patches::register_functions(&mut context);
    Ok(context)
}

/// A compiled expression.
pub struct Expression {
    source: String,
    program: cel::Program,
    /// How deeply its comprehensions (`all`, `exists`, `map`, `filter`…) nest.
    nesting: u32,
    /// A patch expression's own context (its struct types); others run in the common one.
    root: Option<cel::Context<'static, 'static>>,
}

/// What an expression is compiled for: patch expressions construct types of their own.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Purpose {
    /// A condition, validation, message or variable.
    Plain,
    /// A MutatingAdmissionPolicy's ApplyConfiguration or JSONPatch.
    Patch,
}

/// kube's runtime cost budget of one evaluation, as an upper bound on comprehension steps.
const COST_LIMIT: u64 = 10_000_000;

/// The expressions of a map entry or struct field.
fn entry_children(entry: &cel::common::ast::EntryExpr) -> Vec<&cel::IdedExpr> {
    use cel::common::ast::EntryExpr;
    match entry {
        EntryExpr::MapEntry(entry) => vec![&entry.key, &entry.value],
        EntryExpr::StructField(field) => vec![&field.value],
    }
}

/// The expressions directly below `expr`.
fn children(expr: &cel::IdedExpr) -> Vec<&cel::IdedExpr> {
    use cel::common::ast::Expr;
    match &expr.expr {
        Expr::Comprehension(c) => vec![
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ],
        Expr::Call(call) => call
            .target
            .as_deref()
            .into_iter()
            .chain(&call.args)
            .collect(),
        Expr::List(list) => list.elements.iter().collect(),
        Expr::Map(map) => map
            .entries
            .iter()
            .flat_map(|e| entry_children(&e.expr))
            .collect(),
        Expr::Struct(object) => object
            .entries
            .iter()
            .flat_map(|e| entry_children(&e.expr))
            .collect(),
        Expr::Select(select) => vec![&select.operand],
        Expr::Unspecified | Expr::Ident(_) | Expr::Literal(_) => Vec::new(),
    }
}

/// The deepest nesting of comprehensions in `expr`: each multiplies the steps by the length
/// of what it iterates over (its range does not count: it is evaluated once).
fn nesting(expr: &cel::IdedExpr) -> u32 {
    let deepest = |exprs: &[&cel::IdedExpr]| exprs.iter().map(|e| nesting(e)).max().unwrap_or(0);
    match &expr.expr {
        cel::common::ast::Expr::Comprehension(c) => nesting(&c.iter_range)
            .max(1 + deepest(&[&c.accu_init, &c.loop_cond, &c.loop_step, &c.result])),
        _ => deepest(&children(expr)),
    }
}

/// Whether `expr` reads the variable `name` anywhere.
fn reads_variable(expr: &cel::IdedExpr, name: &str) -> bool {
    matches!(&expr.expr, cel::common::ast::Expr::Ident(ident) if ident == name)
        || children(expr).into_iter().any(|c| reads_variable(c, name))
}

/// The struct type names that `expr`'s literals spell (`Object.spec{…}`).
fn struct_names(expr: &cel::IdedExpr, names: &mut BTreeSet<String>) {
    if let cel::common::ast::Expr::Struct(object) = &expr.expr {
        names.insert(object.type_name.clone());
    }
    for child in children(expr) {
        struct_names(child, names);
    }
}

/// The longest list or map in `value` (at least 1).
fn widest(value: &Value) -> u64 {
    match value {
        Value::Array(items) => {
            (items.len() as u64).max(items.iter().map(widest).max().unwrap_or(1))
        }
        Value::Object(map) => (map.len() as u64).max(map.values().map(widest).max().unwrap_or(1)),
        _ => 1,
    }
}

/// Compiled expressions by source: configurations are re-read on every write.
type Compiled = HashMap<(Purpose, String), Arc<Expression>>;

fn cache() -> &'static Mutex<Compiled> {
    static CACHE: OnceLock<Mutex<Compiled>> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// At most this many compiled expressions are kept (the cluster's policies are far fewer).
const CACHE_LIMIT: usize = 1024;

impl Expression {
    /// Compiles `source` (cached).
    pub fn compile(source: &str) -> Result<Arc<Self>, String> {
        Self::compile_for(Purpose::Plain, source)
    }

    /// Compiles a patch expression (cached): `Object…` and `JSONPatch` literals, and
    /// `jsonpatch.escapeKey`, are available to it.
    pub fn compile_patch(source: &str) -> Result<Arc<Self>, String> {
        Self::compile_for(Purpose::Patch, source)
    }

    fn compile_for(purpose: Purpose, source: &str) -> Result<Arc<Self>, String> {
        let key = (purpose, source.to_owned());
        if let Some(found) = cache().lock().ok().and_then(|c| c.get(&key).cloned()) {
            return Ok(found);
        }
        let program = env()
            .compile(source)
            .map_err(|e| format!("compilation failed: {e}"))?;
        let root = match purpose {
            Purpose::Plain => None,
            Purpose::Patch => Some(patch_root(&program)?),
        };
        let nesting = nesting(program.expression());
        let expression = Arc::new(Self {
            source: source.to_owned(),
            program,
            nesting,
            root,
        });
        if let Ok(mut cache) = cache().lock() {
            if cache.len() >= CACHE_LIMIT {
                cache.clear();
            }
            cache.insert(key, Arc::clone(&expression));
        }
        Ok(expression)
    }

    /// Whether the expression reads the variable `name` (a CRD rule that reads `oldSelf` is a
    /// transition rule).
    pub fn reads(&self, name: &str) -> bool {
        reads_variable(self.program.expression(), name)
    }

    /// The value of the expression; refused before it runs when its comprehensions over the
    /// widest collection of the input could take more steps than kube's cost budget allows.
    pub fn evaluate(&self, activation: &Activation) -> Result<cel::Value, String> {
        if activation.widest.saturating_pow(self.nesting) > COST_LIMIT {
            return Err("operation cancelled: actual cost limit exceeded".to_owned());
        }
        let parent: &cel::Context<'static, 'static> = match &self.root {
            Some(own) => own,
            None => root(),
        };
        let mut context = parent.new_inner_scope();
        for (name, value) in &activation.values {
            context.add_variable_from_value(*name, value.clone());
        }
        context.add_variable_from_value("variables", activation.variables.clone());
        self.program
            .execute(&context)
            .map_err(|e| cel_go_message(&e))
    }

    /// A boolean expression's value (kube: "expression '…' resulted in error: …").
    pub fn evaluate_bool(&self, activation: &Activation) -> Result<bool, String> {
        match self.evaluate(activation) {
            Ok(cel::Value::Bool(b)) => Ok(b),
            Ok(other) => Err(format!(
                "expression '{}' resulted in error: expected bool, got {}",
                self.source,
                other.type_of()
            )),
            Err(e) => Err(format!(
                "expression '{}' resulted in error: {e}",
                self.source
            )),
        }
    }

    /// A string expression's value (messageExpression, audit annotations).
    pub fn evaluate_string(&self, activation: &Activation) -> Result<String, String> {
        match self.evaluate(activation) {
            Ok(cel::Value::String(s)) => Ok(s.to_string()),
            Ok(other) => Err(format!(
                "expression '{}' resulted in error: expected string, got {}",
                self.source,
                other.type_of()
            )),
            Err(e) => Err(format!(
                "expression '{}' resulted in error: {e}",
                self.source
            )),
        }
    }
}

/// The variables of one evaluation.
#[derive(Clone)]
pub struct Activation {
    values: Vec<(&'static str, cel::Value)>,
    variables: cel::Value,
    /// The longest list or map of the inputs (the cost bound's base).
    widest: u64,
}

/// JSON as CEL sees Kubernetes objects: integers are `int` (`uint` only beyond int64),
/// other numbers `double`. Depth is bounded by the request body limits.
fn to_cel(value: &Value) -> cel::Value {
    match value {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => cel::Value::Int(i),
            (None, Some(u)) => cel::Value::UInt(u),
            _ => cel::Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => cel::Value::from(s.as_str()),
        Value::Array(items) => cel::Value::List(Arc::new(items.iter().map(to_cel).collect())),
        Value::Object(map) => cel::Value::from(
            map.iter()
                .map(|(k, v)| (k.clone(), to_cel(v)))
                .collect::<HashMap<String, cel::Value>>(),
        ),
    }
}

impl Activation {
    /// `object`, `oldObject` (null when absent) and `request`.
    pub fn new(object: Option<&Value>, old: Option<&Value>, request: &Value) -> Self {
        let or_null = |v: Option<&Value>| v.map_or(cel::Value::Null, to_cel);
        let values = vec![
            ("object", or_null(object)),
            ("oldObject", or_null(old)),
            ("request", to_cel(request)),
        ];
        Self::of(values, [object, old, Some(request)])
    }

    /// The variables `values`, their cost bound taken from the JSON `inputs` they came from.
    fn of<'a>(
        values: Vec<(&'static str, cel::Value)>,
        inputs: impl IntoIterator<Item = Option<&'a Value>>,
    ) -> Self {
        let widest = inputs.into_iter().flatten().map(widest).max().unwrap_or(1);
        Self {
            values,
            variables: cel::Value::from(HashMap::<String, cel::Value>::new()),
            widest,
        }
    }

    /// `self` and `oldSelf` of an `x-kubernetes-validations` rule: `oldSelf` is an optional
    /// value (`optional.none()` without an old value) when the rule sets `optionalOldSelf`.
    pub fn for_rule(value: &Value, old: Option<&Value>, optional_old_self: bool) -> Self {
        let old_self = if optional_old_self {
            let inner = old.map(to_cel);
            cel::Value::Opaque(Arc::new(match inner {
                Some(value) => cel::objects::OptionalValue::of(value),
                None => cel::objects::OptionalValue::none(),
            }))
        } else {
            old.map_or(cel::Value::Null, to_cel)
        };
        Self::of(
            vec![("self", to_cel(value)), ("oldSelf", old_self)],
            [Some(value), old],
        )
    }

    /// Adds `params` and `namespaceObject` (null when absent).
    pub fn with_policy_inputs(mut self, params: Option<&Value>, namespace: Option<&Value>) -> Self {
        let or_null = |v: Option<&Value>| v.map_or(cel::Value::Null, to_cel);
        let wider = [params, namespace].into_iter().flatten().map(widest);
        self.widest = wider.fold(self.widest, u64::max);
        self.values.push(("params", or_null(params)));
        self.values.push(("namespaceObject", or_null(namespace)));
        self
    }

    /// Adds `authorizer`: kube's authorizer library for the request's user.
    pub fn with_authorizer(mut self, authorizer: &cel::Value) -> Self {
        self.values.push(("authorizer", authorizer.clone()));
        self
    }

    /// Evaluates a policy's `variables` in order, each seeing those before it as
    /// `variables.<name>`; one that fails is left out, so only an expression that uses it
    /// fails (kube evaluates them lazily).
    pub fn with_variables(mut self, variables: &[(String, Arc<Expression>)]) -> Self {
        let mut evaluated: HashMap<String, cel::Value> = HashMap::new();
        for (name, expression) in variables {
            self.variables = cel::Value::from(evaluated.clone());
            if let Ok(value) = expression.evaluate(&self) {
                evaluated.insert(name.clone(), value);
            }
        }
        self.variables = cel::Value::from(evaluated);
        self
    }
}

/// An evaluation error as cel-go words the ones kube users meet (`no such key: region`), so that
/// a rule's failure reads as kube-apiserver's; others in Go's style, lower-case.
fn cel_go_message(error: &cel::ExecutionError) -> String {
    use cel::ExecutionError as E;
    match error {
        E::NoSuchKey(key) => format!("no such key: {key}"),
        E::DivisionByZero(_) => "division by zero".to_owned(),
        E::RemainderByZero(_) => "modulus by zero".to_owned(),
        E::Overflow(..) => "integer overflow".to_owned(),
        other => {
            let text = other.to_string();
            let mut chars = text.chars();
            chars.next().map_or(text.clone(), |first| {
                first.to_lowercase().chain(chars).collect()
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn activation() -> Activation {
        let object = json!({"metadata": {"name": "m", "labels": {"team": "a"}},
            "spec": {"numCores": 16, "tags": ["ab", "ac"]}});
        Activation::new(Some(&object), None, &json!({"operation": "CREATE"}))
    }

    fn eval(source: &str, activation: &Activation) -> Result<bool, String> {
        Expression::compile(source)?.evaluate_bool(activation)
    }

    #[test]
    fn kube_variables_and_libraries() {
        let a = activation();
        for (source, expected) in [
            ("object.spec.numCores <= 8", false),
            (
                "has(object.metadata.labels) && 'team' in object.metadata.labels",
                true,
            ),
            ("object.spec.tags.all(t, t.startsWith('a'))", true),
            ("object.metadata.name.matches('^m$')", true),
            ("oldObject == null && request.operation == 'CREATE'", true),
            ("object.metadata.name.upperAscii() == 'M'", true),
            ("object.spec.tags.reverse()[0] == 'ac'", true),
            ("has(object.spec.missing)", false),
        ] {
            assert_eq!(eval(source, &a), Ok(expected), "{source}");
        }
        assert!(
            eval("object.spec.missing == 1", &a)
                .unwrap_err()
                .starts_with("expression 'object.spec.missing == 1' resulted in error: ")
        );
        assert!(eval("'a'", &a).unwrap_err().contains("expected bool"));
        assert!(
            eval("authorizer.path('/healthz').check('get').allowed()", &a).is_err(),
            "no authorizer without one"
        );
    }

    #[test]
    fn kubernetes_libraries() {
        let object = json!({"spec": {"numCores": 4, "sizes": [1, 2, 3], "gateway": "10.0.0.1",
            "endpoint": "https://pve.example.com:8006/api2/json", "version": "1.32.3",
            "memory": "16Gi", "names": ["net0", "net1"]}});
        let a = Activation::new(Some(&object), None, &json!({}));
        for source in [
            "object.spec.sizes.isSorted() && object.spec.names.isSorted()",
            "object.spec.sizes.sum() == 6 && object.spec.sizes.min() == 1 && object.spec.sizes.max() == 3",
            "'net12'.find('[0-9]+') == '12' && 'a1b22'.findAll('[0-9]+') == ['1', '22']",
            "sets.contains(object.spec.names, ['net1']) && !sets.contains(object.spec.names, ['net2']) && sets.contains([1, 2], [])",
            "sets.equivalent(['net1', 'net0', 'net1'], object.spec.names) && !sets.equivalent([1], [1, 2])",
            "sets.intersects(object.spec.sizes, [3, 4]) && !sets.intersects(object.spec.sizes, [4]) && !sets.intersects([], [])",
            "cidr('10.0.0.0/8').containsIP(ip(object.spec.gateway)) && !cidr('192.168.0.0/16').containsIP('10.0.0.1')",
            "isIP(object.spec.gateway) && !isIP('10.0.0.256') && ip('::1').family() == 6 && ip('127.0.0.1').isLoopback()",
            "ip('0.0.0.0').isUnspecified() && ip('::').isUnspecified() && ip('224.0.0.251').isLinkLocalMulticast() && ip('ff02::1').isLinkLocalMulticast() && !ip('ff05::1').isLinkLocalMulticast()",
            "ip('169.254.1.1').isLinkLocalUnicast() && ip('fe80::1').isLinkLocalUnicast() && !ip('fec0::1').isLinkLocalUnicast()",
            "ip('10.0.0.1').isGlobalUnicast() && ip('2001:db8::1').isGlobalUnicast() && !ip('255.255.255.255').isGlobalUnicast() && !ip('127.0.0.1').isGlobalUnicast() && !ip('fe80::1').isGlobalUnicast() && !ip('239.1.1.1').isGlobalUnicast()",
            "isCIDR('fd00::/64') && cidr('10.0.0.0/8').containsCIDR('10.1.0.0/16') && cidr('10.0.0.0/8').prefixLength() == 8",
            "quantity(object.spec.memory).isGreaterThan(quantity('8Gi')) && quantity('2k').asInteger() == 2000 && isQuantity('1Mi') && !isQuantity('1MB')",
            "quantity('1Gi').compareTo(quantity('1024Mi')) == 0",
            "semver(object.spec.version).major() == 1 && semver(object.spec.version).minor() == 32 && semver('1.32.3').isLessThan(semver('1.33.0')) && !isSemver('v1.2.3')",
            "!format.dns1123Label().validate('net-0').hasValue() && format.dns1123Label().validate('Net_0').value()[0].startsWith('a lowercase RFC 1123 label') && format.named('dns1035Label').value().validate('0a').hasValue() && !format.named('nope').hasValue() && !format.labelValue().validate(object.spec.version).hasValue()",
            "url(object.spec.endpoint).getHost() == 'pve.example.com:8006' && url(object.spec.endpoint).getHostname() == 'pve.example.com' && url(object.spec.endpoint).getPort() == '8006' && url(object.spec.endpoint).getScheme() == 'https' && url(object.spec.endpoint).getEscapedPath() == '/api2/json' && isURL('https://x') && !isURL('not a url')",
        ] {
            assert_eq!(eval(source, &a), Ok(true), "{source}");
        }
        assert!(eval("ip('nope') == ''", &a).is_err());
        assert!(eval("[].min() == 0", &a).is_err());
    }

    #[test]
    fn comprehensions_are_bounded_by_the_cost_budget() {
        let wide: Vec<u64> = (0..10_000).collect();
        let object = json!({"spec": {"items": wide}});
        let a = Activation::new(Some(&object), None, &json!({}));
        assert_eq!(eval("object.spec.items.all(x, x >= 0)", &a), Ok(true));
        assert_eq!(
            eval(
                "object.spec.items.all(x, object.spec.items.exists(y, y == x))",
                &a
            ),
            Err("expression 'object.spec.items.all(x, object.spec.items.exists(y, y == x))' resulted in error: operation cancelled: actual cost limit exceeded".to_owned())
        );
        let narrow = json!({"spec": {"items": [1, 2, 3]}});
        let a = Activation::new(Some(&narrow), None, &json!({}));
        assert_eq!(
            eval(
                "object.spec.items.all(x, object.spec.items.exists(y, y == x))",
                &a
            ),
            Ok(true)
        );
    }

    #[test]
    fn variables_see_earlier_ones() {
        let variables = vec![
            (
                "cores".to_owned(),
                Expression::compile("object.spec.numCores").unwrap(),
            ),
            (
                "double".to_owned(),
                Expression::compile("variables.cores * 2").unwrap(),
            ),
            (
                "broken".to_owned(),
                Expression::compile("object.nope").unwrap(),
            ),
        ];
        let a = activation().with_variables(&variables);
        assert_eq!(eval("variables.double == 32", &a), Ok(true));
        assert!(eval("variables.broken == 1", &a).is_err());
    }

    #[test]
    fn evaluation_errors_read_as_cel_go_words_them() {
        let activation = Activation::for_rule(&json!({"a": 1}), None, false);
        let missing = Expression::compile("self.region == 'x'").expect("compiles");
        assert_eq!(
            missing.evaluate(&activation).expect_err("no such key"),
            "no such key: region"
        );
        let division = Expression::compile("self.a / 0 == 1").expect("compiles");
        assert_eq!(
            division
                .evaluate(&activation)
                .expect_err("division by zero"),
            "division by zero"
        );
    }
}
