//! DRA device selectors: CEL expressions evaluated against one device, as the scheduler's
//! structured allocator evaluates them (k8s.io/dynamic-resource-allocation/cel), on the
//! `cel` crate's parser and interpreter.
//!
//! The environment: `device.driver`, `device.attributes[domain].name` and
//! `device.capacity[domain].name` (a qualified name `domain/name` is filed under its domain,
//! a bare name under the driver's; a domain the device has nothing in is an empty map, so
//! `has(...)` on it is false), `device.allowMultipleAllocations`; version attributes are
//! semver values and capacities quantities. On top of the crate, the Kubernetes CEL library
//! functions selectors use: `quantity`, `isQuantity`, `semver`, `isSemver`, and on those
//! values `compareTo`, `isGreaterThan`, `isLessThan`, `sign`, `add`, `sub`, `asInteger`,
//! `isInteger`, `asApproximateFloat`, `major`, `minor`, `patch`.
//!
//! Each expression is compiled once per pass (`Selectors` caches by its text). An expression
//! that does not compile, fails at run time or gives something other than a bool makes the
//! device not match, with one warning per expression: the scheduler aborts that allocation,
//! so the pod does not go there either. The expression's length is bounded when it is read
//! (`model::dra::MAX_EXPRESSION_BYTES`); the crate has no cost limit, which selectors over a
//! device's at most 32 attributes do not need.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

use cel::common::ast::{ComprehensionExpr, Expr, IdedExpr, ListExpr, LiteralValue};
use cel::objects::{Key, Opaque};
use cel::parser::{Macro, MacroExprHelper, ParseError};
use cel::{Context, Env, ExecutionError, Program, Value};
use fleetscaler_model::Quantity;
use fleetscaler_model::dra::{AttributeValue, Device};

/// How many distinct expressions a pass compiles; past it, selectors do not match (warned).
const MAX_PROGRAMS: usize = 4096;

/// A Kubernetes quantity as a CEL value.
#[derive(Debug, PartialEq, Eq)]
struct CelQuantity(Quantity);

impl Opaque for CelQuantity {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Quantity"
    }
}

/// A semantic version as a CEL value; equal when of equal precedence (build metadata aside).
#[derive(Debug)]
struct CelSemver(semver::Version);

impl PartialEq for CelSemver {
    fn eq(&self, other: &Self) -> bool {
        self.0.cmp_precedence(&other.0) == Ordering::Equal
    }
}
impl Eq for CelSemver {}

impl Opaque for CelSemver {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Semver"
    }
}

type CelResult<T> = Result<T, ExecutionError>;

fn err(what: impl std::fmt::Display) -> ExecutionError {
    ExecutionError::function_error("dra", what)
}

fn quantity(s: Arc<String>) -> CelResult<Value> {
    let q = Quantity::parse(&s).map_err(err)?;
    Ok(Value::Opaque(Arc::new(CelQuantity(q))))
}

fn is_quantity(s: Arc<String>) -> bool {
    Quantity::parse(&s).is_ok()
}

fn parse_semver(s: &str) -> CelResult<semver::Version> {
    semver::Version::parse(s).map_err(|e| err(format!("semver {s:?}: {e}")))
}

fn semver_of(s: Arc<String>) -> CelResult<Value> {
    Ok(Value::Opaque(Arc::new(CelSemver(parse_semver(&s)?))))
}

fn is_semver(s: Arc<String>) -> bool {
    semver::Version::parse(&s).is_ok()
}

fn as_quantity(v: &dyn Opaque) -> Option<Quantity> {
    v.downcast_ref::<CelQuantity>().map(|q| q.0)
}

fn as_semver(v: &dyn Opaque) -> Option<&semver::Version> {
    v.downcast_ref::<CelSemver>().map(|s| &s.0)
}

/// `a.compareTo(b)` for two quantities or two versions.
fn compare(a: &Arc<dyn Opaque>, b: &Arc<dyn Opaque>) -> CelResult<Ordering> {
    if let (Some(x), Some(y)) = (as_quantity(&**a), as_quantity(&**b)) {
        return Ok(x.cmp(&y));
    }
    if let (Some(x), Some(y)) = (as_semver(&**a), as_semver(&**b)) {
        return Ok(x.cmp_precedence(y));
    }
    Err(err(format!(
        "cannot compare {} with {}",
        a.runtime_type_name(),
        b.runtime_type_name()
    )))
}

fn compare_to(
    cel::extractors::This(a): cel::extractors::This<Arc<dyn Opaque>>,
    b: Arc<dyn Opaque>,
) -> CelResult<i64> {
    Ok(compare(&a, &b)? as i64)
}

fn is_greater_than(
    cel::extractors::This(a): cel::extractors::This<Arc<dyn Opaque>>,
    b: Arc<dyn Opaque>,
) -> CelResult<bool> {
    Ok(compare(&a, &b)? == Ordering::Greater)
}

fn is_less_than(
    cel::extractors::This(a): cel::extractors::This<Arc<dyn Opaque>>,
    b: Arc<dyn Opaque>,
) -> CelResult<bool> {
    Ok(compare(&a, &b)? == Ordering::Less)
}

fn this_quantity(a: &Arc<dyn Opaque>) -> CelResult<Quantity> {
    as_quantity(&**a).ok_or_else(|| err(format!("{} is not a quantity", a.runtime_type_name())))
}

fn this_semver(a: &Arc<dyn Opaque>) -> CelResult<&semver::Version> {
    as_semver(&**a).ok_or_else(|| err(format!("{} is not a semver", a.runtime_type_name())))
}

const NANOS: i128 = 1_000_000_000;

fn sign(cel::extractors::This(a): cel::extractors::This<Arc<dyn Opaque>>) -> CelResult<i64> {
    Ok(this_quantity(&a)?.nanos().signum() as i64)
}

fn is_integer(cel::extractors::This(a): cel::extractors::This<Arc<dyn Opaque>>) -> CelResult<bool> {
    let n = this_quantity(&a)?.nanos();
    Ok(n % NANOS == 0 && i64::try_from(n / NANOS).is_ok())
}

fn as_integer(cel::extractors::This(a): cel::extractors::This<Arc<dyn Opaque>>) -> CelResult<i64> {
    let n = this_quantity(&a)?.nanos();
    if n % NANOS != 0 {
        return Err(err("quantity is not an integer"));
    }
    i64::try_from(n / NANOS).map_err(|_| err("quantity out of the range of an int"))
}

fn as_approximate_float(
    cel::extractors::This(a): cel::extractors::This<Arc<dyn Opaque>>,
) -> CelResult<f64> {
    Ok(this_quantity(&a)?.nanos() as f64 / NANOS as f64)
}

/// The nanos of a quantity or an int argument of `add`/`sub`.
fn operand(v: &Value) -> CelResult<i128> {
    match v {
        Value::Int(i) => Ok(i128::from(*i) * NANOS),
        Value::Opaque(o) => this_quantity(o).map(Quantity::nanos),
        other => Err(err(format!("cannot add {other:?} to a quantity"))),
    }
}

fn with_nanos(n: Option<i128>) -> CelResult<Value> {
    let n = n.ok_or_else(|| err("quantity overflow"))?;
    // Back through the exact text form, so the model's range checks apply.
    let whole = n / NANOS;
    let frac = (n % NANOS).abs();
    let text = if frac == 0 {
        format!("{whole}")
    } else {
        let sign = if n < 0 && whole == 0 { "-" } else { "" };
        format!("{sign}{whole}.{frac:09}")
    };
    quantity(Arc::new(text))
}

fn add(
    cel::extractors::This(a): cel::extractors::This<Arc<dyn Opaque>>,
    b: Value,
) -> CelResult<Value> {
    with_nanos(this_quantity(&a)?.nanos().checked_add(operand(&b)?))
}

fn sub(
    cel::extractors::This(a): cel::extractors::This<Arc<dyn Opaque>>,
    b: Value,
) -> CelResult<Value> {
    with_nanos(this_quantity(&a)?.nanos().checked_sub(operand(&b)?))
}

fn major(cel::extractors::This(a): cel::extractors::This<Arc<dyn Opaque>>) -> CelResult<i64> {
    i64::try_from(this_semver(&a)?.major).map_err(err)
}

fn minor(cel::extractors::This(a): cel::extractors::This<Arc<dyn Opaque>>) -> CelResult<i64> {
    i64::try_from(this_semver(&a)?.minor).map_err(err)
}

fn patch(cel::extractors::This(a): cel::extractors::This<Arc<dyn Opaque>>) -> CelResult<i64> {
    i64::try_from(this_semver(&a)?.patch).map_err(err)
}

/// `cel.bind(name, init, result)`, which upstream's DRA environment enables: `result`
/// with `name` bound to `init`, as cel-go expands it (a comprehension over no elements whose
/// accumulator is the name). Any other `x.bind(..)` is left alone.
fn bind_macro(
    helper: &mut MacroExprHelper<'_>,
    target: &mut Option<IdedExpr>,
    args: &mut Vec<IdedExpr>,
) -> Result<Option<IdedExpr>, ParseError> {
    if !matches!(target.as_ref().map(|t| &t.expr), Some(Expr::Ident(n)) if n == "cel") {
        return Ok(None);
    }
    let [name, init, result]: [IdedExpr; 3] = std::mem::take(args)
        .try_into()
        .map_err(|_| helper.new_error(0, "cel.bind takes three arguments"))?;
    let Expr::Ident(var) = name.expr else {
        return Err(helper.new_error(name.id, "cel.bind's first argument must be a name"));
    };
    let bind = ComprehensionExpr {
        iter_range: helper.next_expr(Expr::List(ListExpr::new(Vec::new()))),
        iter_var: "#unused".to_owned(),
        iter_var2: None,
        accu_var: var.clone(),
        accu_init: init,
        loop_cond: helper.next_expr(Expr::Literal(LiteralValue::Boolean(false.into()))),
        loop_step: helper.next_expr(Expr::Ident(var)),
        result,
    };
    Ok(Some(helper.next_expr(Expr::Comprehension(Box::new(bind)))))
}

/// The environment selectors compile in: the standard library and `cel.bind`.
fn environment() -> Result<Arc<Env>, cel::DeclarationError> {
    let mut env = Env::stdlib();
    env.add_macro(Macro::receiver("bind", 3, bind_macro))?;
    Ok(Arc::new(env))
}

/// The root context: the environment and the Kubernetes functions above.
fn root_context(env: Arc<Env>) -> Result<Context<'static, 'static>, cel::DeclarationError> {
    let mut ctx = Context::with_env(env);
    ctx.add_function("quantity", quantity)?;
    ctx.add_function("isQuantity", is_quantity)?;
    ctx.add_function("semver", semver_of)?;
    ctx.add_function("isSemver", is_semver)?;
    ctx.add_function("compareTo", compare_to)?;
    ctx.add_function("isGreaterThan", is_greater_than)?;
    ctx.add_function("isLessThan", is_less_than)?;
    ctx.add_function("sign", sign)?;
    ctx.add_function("isInteger", is_integer)?;
    ctx.add_function("asInteger", as_integer)?;
    ctx.add_function("asApproximateFloat", as_approximate_float)?;
    ctx.add_function("add", add)?;
    ctx.add_function("sub", sub)?;
    ctx.add_function("major", major)?;
    ctx.add_function("minor", minor)?;
    ctx.add_function("patch", patch)?;
    Ok(ctx)
}

/// The string literals of an expression: the domains it may look up, so that each of them
/// is present (empty when the device has nothing there), as upstream's lookups of an
/// unknown domain give an empty map.
fn string_literals(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = expr.chars();
    while let Some(c) = chars.next() {
        if c != '"' && c != '\'' {
            continue;
        }
        let mut lit = String::new();
        let mut escaped = false;
        for d in chars.by_ref() {
            match (escaped, d) {
                (false, '\\') => escaped = true,
                (false, d) if d == c => break,
                (_, d) => {
                    lit.push(d);
                    escaped = false;
                }
            }
        }
        if !lit.is_empty() && lit.len() <= 253 && !lit.contains(' ') {
            out.push(lit);
        }
    }
    out
}

fn attribute_value(v: &AttributeValue) -> Value {
    match v {
        AttributeValue::String(s) => Value::String(Arc::new(s.to_string())),
        AttributeValue::Int(i) => Value::Int(*i),
        AttributeValue::Bool(b) => Value::Bool(*b),
        AttributeValue::Version(s) => match semver::Version::parse(s) {
            Ok(v) => Value::Opaque(Arc::new(CelSemver(v))),
            // Not a version after all: the string, so that a lookup of it still errors
            // where a version is expected rather than matching.
            Err(_) => Value::String(Arc::new(s.to_string())),
        },
    }
}

/// `attributes` or `capacity`: qualified names filed by domain, the driver's by default.
fn by_domain<'a>(
    driver: &str,
    entries: impl Iterator<Item = (&'a str, Value)>,
    domains: &[String],
) -> Value {
    let mut out: HashMap<String, HashMap<String, Value>> = HashMap::new();
    for (name, value) in entries {
        let (domain, id) = name.rsplit_once('/').unwrap_or((driver, name));
        out.entry(domain.to_string())
            .or_default()
            .insert(id.to_string(), value);
    }
    for d in domains {
        out.entry(d.clone()).or_default();
    }
    out.entry(driver.to_string()).or_default();
    let maps: HashMap<String, Value> = out.into_iter().map(|(k, v)| (k, v.into())).collect();
    maps.into()
}

/// The `device` variable for one device of `driver`.
fn device_value(driver: &str, d: &Device, domains: &[String]) -> Value {
    let attributes = by_domain(
        driver,
        d.attributes.iter().map(|(k, v)| (&**k, attribute_value(v))),
        domains,
    );
    let capacity = by_domain(
        driver,
        d.capacity
            .iter()
            .map(|(k, q)| (&**k, Value::Opaque(Arc::new(CelQuantity(*q))))),
        domains,
    );
    let mut m: HashMap<Key, Value> = HashMap::new();
    m.insert("driver".into(), Value::String(Arc::new(driver.to_string())));
    m.insert("attributes".into(), attributes);
    m.insert("capacity".into(), capacity);
    m.insert(
        "allowMultipleAllocations".into(),
        Value::Bool(d.allow_multiple),
    );
    m.into()
}

struct Compiled {
    program: Program,
    domains: Vec<String>,
}

/// The selectors of one pass: each expression compiled once, each failure warned once.
pub struct Selectors {
    env: Option<Arc<Env>>,
    root: Option<Context<'static, 'static>>,
    programs: HashMap<Arc<str>, Result<Arc<Compiled>, ()>>,
    warned: std::collections::HashSet<Arc<str>>,
    /// What could not be compiled or evaluated, for the pass's warnings.
    pub problems: Vec<String>,
}

impl Default for Selectors {
    fn default() -> Self {
        let mut problems = Vec::new();
        let env = environment();
        let root = env.clone().and_then(root_context);
        if let Err(e) = &root {
            problems.push(format!(
                "the DRA selector functions could not be declared: {e}"
            ));
        }
        Selectors {
            env: env.ok(),
            root: root.ok(),
            programs: HashMap::new(),
            warned: Default::default(),
            problems,
        }
    }
}

impl Selectors {
    fn warn(&mut self, expr: &Arc<str>, why: String) {
        if self.warned.insert(expr.clone()) && self.problems.len() < 64 {
            self.problems.push(format!(
                "device selector {}: {why}; it matches no device",
                fleetscaler_model::quote(expr)
            ));
        }
    }

    fn compiled(&mut self, expr: &Arc<str>) -> Option<Arc<Compiled>> {
        if let Some(c) = self.programs.get(expr) {
            return c.as_ref().ok().cloned();
        }
        let compiled = if self.programs.len() >= MAX_PROGRAMS {
            self.warn(
                expr,
                format!("more than {MAX_PROGRAMS} distinct selectors in one pass"),
            );
            Err(())
        } else {
            let compiled = match &self.env {
                Some(env) => env.compile(expr),
                None => Program::compile(expr),
            };
            match compiled {
                Ok(program) => Ok(Arc::new(Compiled {
                    program,
                    domains: string_literals(expr),
                })),
                Err(e) => {
                    self.warn(expr, format!("does not compile ({e})"));
                    Err(())
                }
            }
        };
        self.programs.insert(expr.clone(), compiled.clone());
        compiled.ok()
    }

    /// Whether a device of `driver` satisfies the expression; anything but `true` is no.
    pub fn matches(&mut self, expr: &Arc<str>, driver: &str, device: &Device) -> bool {
        let Some(c) = self.compiled(expr) else {
            return false;
        };
        let Some(root) = &self.root else {
            return false;
        };
        let mut ctx = root.new_inner_scope();
        ctx.add_variable_from_value("device", device_value(driver, device, &c.domains));
        match c.program.execute(&ctx) {
            Ok(Value::Bool(b)) => b,
            Ok(other) => {
                let why = format!("gives {other:?}, not a bool");
                self.warn(expr, why);
                false
            }
            Err(e) => {
                // As upstream: a lookup of an attribute the device lacks is an error, which
                // fails that device. Common and expected: not warned.
                if !matches!(e, ExecutionError::NoSuchKey(_)) {
                    self.warn(expr, format!("fails ({e})"));
                }
                false
            }
        }
    }
}

#[cfg(test)]
#[path = "dra_cel_tests.rs"]
mod tests;
