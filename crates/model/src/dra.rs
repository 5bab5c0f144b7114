//! Dynamic resource allocation (`resource.k8s.io/v1`): what the scheduler's
//! DynamicResources plugin reads to allocate a pod's ResourceClaims, projected to the
//! fields the engine's allocator uses: claims and their templates (requests, selectors,
//! allocation), ResourceSlices (the devices each driver publishes, and where they can be
//! used from) and DeviceClasses (their selectors).
//!
//! Everything is bounded as the API bounds it (`MAX_*`); an object beyond a bound, or with a
//! field that cannot be read, is an error naming the field, which the dump and the hub turn
//! into a warning naming the object. A claim feature the allocator does not simulate is kept
//! by name (`ClaimSpec::unsimulated`): a pod using it is explained and never scales up.

use std::sync::Arc;

use k8s_openapi::api::core::v1 as corev1;
use k8s_openapi::api::resource::v1 as resourcev1;

use super::meta::{FieldError, ObjectKey, Projector, key_of};
use super::pod_spec::node_selector;
use super::quantity::Quantity;
use super::scheduling::NodeSelector;

/// The API group; a cluster that does not serve its v1 has the feature off.
pub const GROUP: &str = "resource.k8s.io";
/// Requests, and selectors, per claim or class: the API's limit.
pub const MAX_REQUESTS: usize = 32;
pub const MAX_SELECTORS: usize = 32;
/// `firstAvailable` alternatives per request: the API's limit.
pub const MAX_SUBREQUESTS: usize = 8;
/// Devices per ResourceSlice, and attributes plus capacities per device (API limits).
pub const MAX_DEVICES_PER_SLICE: usize = 128;
pub const MAX_ATTRIBUTES: usize = 32;
/// A CEL selector's length, as the API validates it.
pub const MAX_EXPRESSION_BYTES: usize = 10 * 1024;
/// Results of one allocation (the API's limit).
pub const MAX_RESULTS: usize = 32;
/// How many devices an `ExactCount` request may ask for (the API's limit on results).
pub const MAX_COUNT: i64 = 32;

/// How many devices a request wants.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AllocationMode {
    /// `ExactCount` (the default) with its `count` (default 1).
    ExactCount(i64),
    /// `All`: every matching device available to the node, and at least one.
    All,
}

/// One way to satisfy a request: a class, selectors and a count. An `exactly` request has
/// one; a `firstAvailable` request its subrequests, tried in order.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DeviceChoice {
    /// The subrequest's name (empty for `exactly`).
    pub name: Arc<str>,
    pub class: Arc<str>,
    /// CEL expressions; a device must satisfy all of them.
    pub selectors: Vec<Arc<str>>,
    pub mode: AllocationMode,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DeviceRequest {
    pub name: Arc<str>,
    pub choices: Vec<DeviceChoice>,
}

/// A `matchAttribute` constraint: the devices of its requests (all, when it names none)
/// must all have the attribute, with one value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MatchAttribute {
    /// Request names (`request` or `request/subrequest`); empty: every request.
    pub requests: Vec<Arc<str>>,
    /// The attribute's fully qualified name (`domain/name`).
    pub attribute: Arc<str>,
}

impl MatchAttribute {
    /// Whether the constraint binds `request` (a `request/subrequest` name binds its request).
    pub fn binds(&self, request: &str) -> bool {
        self.requests.is_empty()
            || self
                .requests
                .iter()
                .any(|r| r.split('/').next() == Some(request))
    }
}

impl Device {
    /// The value of an attribute by its qualified name; a bare name on the device is in
    /// the driver's domain.
    pub fn attribute(&self, driver: &str, qualified: &str) -> Option<&AttributeValue> {
        self.attributes.iter().find_map(|(k, v)| {
            let hit = if k.contains('/') {
                **k == *qualified
            } else {
                qualified
                    .split_once('/')
                    .is_some_and(|(domain, name)| domain == driver && name == &**k)
            };
            hit.then_some(v)
        })
    }
}

/// What a claim (or a template's claim) asks for.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ClaimSpec {
    pub requests: Vec<DeviceRequest>,
    /// `matchAttribute` constraints.
    pub constraints: Vec<MatchAttribute>,
    /// The first feature of the claim the allocator does not simulate (`distinctAttribute`
    /// constraints, admin access, ...): its pods are never scaled up for.
    pub unsimulated: Option<Arc<str>>,
}

/// One allocated device.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DeviceId {
    pub driver: Arc<str>,
    pub pool: Arc<str>,
    pub device: Arc<str>,
}

/// `status.allocation`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Allocation {
    pub devices: Vec<DeviceId>,
    /// Where the devices can be used from; `None`: anywhere.
    pub node_selector: Option<NodeSelector>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ResourceClaim {
    pub key: ObjectKey,
    pub spec: ClaimSpec,
    pub allocation: Option<Allocation>,
    /// `status.reservedFor`: the names of the pods (or other consumers) using it.
    pub reserved_for: Vec<Arc<str>>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ResourceClaimTemplate {
    pub key: ObjectKey,
    /// `spec.spec`: the claim made for each pod.
    pub spec: ClaimSpec,
}

/// A device attribute's value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum AttributeValue {
    String(Arc<str>),
    Int(i64),
    Bool(bool),
    /// A semantic version, as written.
    Version(Arc<str>),
}

/// Which nodes a slice's (or one device's) devices can be used from.
#[derive(Clone, Debug, PartialEq)]
pub enum DeviceNodes {
    /// `nodeName`: local to one node.
    Node(Arc<str>),
    Selector(NodeSelector),
    All,
}

impl DeviceNodes {
    pub fn reach(&self, labels: &super::labels::Labels, node: &str) -> bool {
        match self {
            DeviceNodes::Node(n) => &**n == node,
            DeviceNodes::Selector(s) => s.matches(labels, node),
            DeviceNodes::All => true,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Device {
    pub name: Arc<str>,
    /// Qualified names (`domain/name`, or `name` in the driver's domain) and values.
    pub attributes: Vec<(Arc<str>, AttributeValue)>,
    pub capacity: Vec<(Arc<str>, Quantity)>,
    /// Per-device node selection (`perDeviceNodeSelection` slices); `None`: the slice's.
    pub nodes: Option<DeviceNodes>,
    /// `allowMultipleAllocations` (consumable capacity).
    pub allow_multiple: bool,
    /// `consumesCounters`: what it takes of its pool's shared counters (partitions).
    pub consumes: Vec<CounterSet>,
    /// A `NoSchedule` or `NoExecute` taint: not allocated (tolerations are not simulated).
    pub tainted: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ResourceSlice {
    pub name: Arc<str>,
    pub driver: Arc<str>,
    pub pool: Arc<str>,
    pub generation: i64,
    pub slice_count: i64,
    /// `None` with `perDeviceNodeSelection`: each device says.
    pub nodes: Option<DeviceNodes>,
    pub devices: Vec<Device>,
    /// `sharedCounters`: what the pool's partitions take from.
    pub counter_sets: Vec<CounterSet>,
}

impl ResourceSlice {
    /// Local to one node: what a template copies from its source node.
    pub fn node_local_to(&self) -> Option<&str> {
        match &self.nodes {
            Some(DeviceNodes::Node(n)) => Some(n),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct DeviceClass {
    pub name: Arc<str>,
    pub selectors: Vec<Arc<str>>,
}

/// The DRA objects of a cluster, as the snapshot carries them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Dra {
    /// Whether `resource.k8s.io/v1` was read: without it a pod with `resourceClaims` is
    /// not simulated and never scales up.
    pub listed: bool,
    pub claims: Vec<ResourceClaim>,
    pub templates: Vec<ResourceClaimTemplate>,
    pub slices: Vec<ResourceSlice>,
    pub classes: Vec<DeviceClass>,
}

impl Dra {
    pub fn is_empty(&self) -> bool {
        self.claims.is_empty()
            && self.templates.is_empty()
            && self.slices.is_empty()
            && self.classes.is_empty()
    }
}

fn too_many(path: &str, n: usize, max: usize) -> Result<(), FieldError> {
    if n > max {
        return Err(FieldError::new(path, format!("{n} entries, at most {max}")));
    }
    Ok(())
}

fn selectors(
    list: Option<&Vec<resourcev1::DeviceSelector>>,
    path: &str,
    p: &mut Projector,
) -> Result<Vec<Arc<str>>, FieldError> {
    let list = list.map(Vec::as_slice).unwrap_or_default();
    too_many(path, list.len(), MAX_SELECTORS)?;
    let mut out = Vec::new();
    for (i, s) in list.iter().enumerate() {
        let Some(cel) = &s.cel else {
            return Err(FieldError::new(
                format!("{path}[{i}]"),
                "a selector without cel",
            ));
        };
        if cel.expression.len() > MAX_EXPRESSION_BYTES {
            return Err(FieldError::new(
                format!("{path}[{i}].cel.expression"),
                format!("longer than {MAX_EXPRESSION_BYTES} bytes"),
            ));
        }
        out.push(p.str(&cel.expression));
    }
    Ok(out)
}

fn mode(mode: Option<&str>, count: Option<i64>, path: &str) -> Result<AllocationMode, FieldError> {
    match mode {
        None | Some("ExactCount") => match count.unwrap_or(1) {
            n @ 1..=MAX_COUNT => Ok(AllocationMode::ExactCount(n)),
            n => Err(FieldError::new(
                format!("{path}.count"),
                format!("{n} is not between 1 and {MAX_COUNT}"),
            )),
        },
        Some("All") => Ok(AllocationMode::All),
        Some(other) => Err(FieldError::new(
            format!("{path}.allocationMode"),
            format!(
                "unknown mode {:?} (ExactCount, All)",
                crate::quote::quote(other)
            ),
        )),
    }
}

impl ClaimSpec {
    /// `path` is where the spec is in its object (`spec`, or `spec.spec` for a template).
    pub fn from_k8s(
        spec: &resourcev1::ResourceClaimSpec,
        path: &str,
        p: &mut Projector,
    ) -> Result<Self, FieldError> {
        let mut out = ClaimSpec::default();
        let Some(devices) = &spec.devices else {
            return Ok(out);
        };
        let mut unsimulated = |what: &str| {
            out.unsimulated.get_or_insert_with(|| what.into());
        };
        let constraints = devices.constraints.as_deref().unwrap_or_default();
        too_many(
            &format!("{path}.devices.constraints"),
            constraints.len(),
            MAX_REQUESTS,
        )?;
        for c in constraints {
            match &c.match_attribute {
                Some(attribute) if c.distinct_attribute.is_none() => {
                    out.constraints.push(MatchAttribute {
                        requests: c.requests.iter().flatten().map(|r| p.str(r)).collect(),
                        attribute: p.str(attribute),
                    });
                }
                _ => unsimulated("distinctAttribute device constraints"),
            }
        }
        let requests = devices.requests.as_deref().unwrap_or_default();
        let at = format!("{path}.devices.requests");
        too_many(&at, requests.len(), MAX_REQUESTS)?;
        for (i, r) in requests.iter().enumerate() {
            let at = format!("{at}[{i}]");
            let mut choices = Vec::new();
            if let Some(e) = &r.exactly {
                if e.admin_access == Some(true) {
                    unsimulated("admin access to devices");
                }
                if e.capacity.is_some() {
                    unsimulated("requests for device capacity (consumable capacity)");
                }
                if e.tolerations.as_ref().is_some_and(|t| !t.is_empty()) {
                    unsimulated("device taint tolerations");
                }
                choices.push(DeviceChoice {
                    name: p.str(""),
                    class: p.str(&e.device_class_name),
                    selectors: selectors(
                        e.selectors.as_ref(),
                        &format!("{at}.exactly.selectors"),
                        p,
                    )?,
                    mode: mode(
                        e.allocation_mode.as_deref(),
                        e.count,
                        &format!("{at}.exactly"),
                    )?,
                });
            }
            let subs = r.first_available.as_deref().unwrap_or_default();
            too_many(&format!("{at}.firstAvailable"), subs.len(), MAX_SUBREQUESTS)?;
            for (j, s) in subs.iter().enumerate() {
                let sat = format!("{at}.firstAvailable[{j}]");
                if s.capacity.is_some() {
                    unsimulated("requests for device capacity (consumable capacity)");
                }
                if s.tolerations.as_ref().is_some_and(|t| !t.is_empty()) {
                    unsimulated("device taint tolerations");
                }
                choices.push(DeviceChoice {
                    name: p.str(&s.name),
                    class: p.str(&s.device_class_name),
                    selectors: selectors(s.selectors.as_ref(), &format!("{sat}.selectors"), p)?,
                    mode: mode(s.allocation_mode.as_deref(), s.count, &sat)?,
                });
            }
            if choices.is_empty() {
                return Err(FieldError::new(at, "neither exactly nor firstAvailable"));
            }
            out.requests.push(DeviceRequest {
                name: p.str(&r.name),
                choices,
            });
        }
        Ok(out)
    }
}

impl ResourceClaim {
    pub fn from_k8s(c: &resourcev1::ResourceClaim, p: &mut Projector) -> Result<Self, FieldError> {
        let status = c.status.as_ref();
        let allocation = match status.and_then(|s| s.allocation.as_ref()) {
            Some(a) => Some(allocation(a, p)?),
            None => None,
        };
        Ok(ResourceClaim {
            key: key_of(&c.metadata, p),
            spec: ClaimSpec::from_k8s(&c.spec, "spec", p)?,
            allocation,
            reserved_for: status
                .and_then(|s| s.reserved_for.as_ref())
                .into_iter()
                .flatten()
                .take(MAX_RESULTS * 8)
                .map(|r| p.str(&r.name))
                .collect(),
        })
    }
}

fn allocation(
    a: &resourcev1::AllocationResult,
    p: &mut Projector,
) -> Result<Allocation, FieldError> {
    let results = a
        .devices
        .as_ref()
        .and_then(|d| d.results.as_deref())
        .unwrap_or_default();
    too_many(
        "status.allocation.devices.results",
        results.len(),
        MAX_RESULTS,
    )?;
    let node_selector = match &a.node_selector {
        Some(s) => Some(node_selector(s, "status.allocation.nodeSelector", p)?),
        None => None,
    };
    Ok(Allocation {
        devices: results
            .iter()
            .map(|r| DeviceId {
                driver: p.str(&r.driver),
                pool: p.str(&r.pool),
                device: p.str(&r.device),
            })
            .collect(),
        node_selector,
    })
}

impl ResourceClaimTemplate {
    pub fn from_k8s(
        t: &resourcev1::ResourceClaimTemplate,
        p: &mut Projector,
    ) -> Result<Self, FieldError> {
        Ok(ResourceClaimTemplate {
            key: key_of(&t.metadata, p),
            spec: ClaimSpec::from_k8s(&t.spec.spec, "spec.spec", p)?,
        })
    }
}

impl DeviceClass {
    pub fn from_k8s(c: &resourcev1::DeviceClass, p: &mut Projector) -> Result<Self, FieldError> {
        Ok(DeviceClass {
            name: p.opt_str(c.metadata.name.as_ref()),
            selectors: selectors(c.spec.selectors.as_ref(), "spec.selectors", p)?,
        })
    }
}

fn nodes(
    name: Option<&String>,
    selector: Option<&corev1::NodeSelector>,
    all: Option<bool>,
    path: &str,
    p: &mut Projector,
) -> Result<Option<DeviceNodes>, FieldError> {
    if let Some(n) = name.filter(|n| !n.is_empty()) {
        return Ok(Some(DeviceNodes::Node(p.str(n))));
    }
    if let Some(s) = selector {
        let at = format!("{path}.nodeSelector");
        return Ok(Some(DeviceNodes::Selector(node_selector(s, &at, p)?)));
    }
    Ok((all == Some(true)).then_some(DeviceNodes::All))
}

fn attribute(a: &resourcev1::DeviceAttribute, p: &mut Projector) -> Option<AttributeValue> {
    if let Some(s) = &a.string {
        return Some(AttributeValue::String(p.str(s)));
    }
    if let Some(v) = &a.version {
        return Some(AttributeValue::Version(p.str(v)));
    }
    a.int
        .map(AttributeValue::Int)
        .or(a.bool.map(AttributeValue::Bool))
}

impl Device {
    fn from_k8s(d: &resourcev1::Device, path: &str, p: &mut Projector) -> Result<Self, FieldError> {
        let attrs = d.attributes.iter().flatten();
        let caps = d.capacity.iter().flatten();
        too_many(
            path,
            attrs.clone().count() + caps.clone().count(),
            MAX_ATTRIBUTES,
        )?;
        let mut attributes = Vec::new();
        for (k, v) in attrs {
            let Some(value) = attribute(v, p) else {
                return Err(FieldError::new(
                    format!("{path}.attributes[{k}]"),
                    "no value (string, int, bool or version)",
                ));
            };
            attributes.push((p.str(k), value));
        }
        let mut capacity = Vec::new();
        for (k, v) in caps {
            let q = Quantity::parse(&v.value.0)
                .map_err(|e| FieldError::new(format!("{path}.capacity[{k}].value"), e))?;
            capacity.push((p.str(k), q));
        }
        Ok(Device {
            name: p.str(&d.name),
            attributes,
            capacity,
            nodes: nodes(
                d.node_name.as_ref(),
                d.node_selector.as_ref(),
                d.all_nodes,
                path,
                p,
            )?,
            allow_multiple: d.allow_multiple_allocations == Some(true),
            consumes: counters::consumed(d.consumes_counters.as_ref(), path, p)?,
            tainted: counters::tainted(d.taints.as_ref()),
        })
    }
}

impl ResourceSlice {
    pub fn from_k8s(s: &resourcev1::ResourceSlice, p: &mut Projector) -> Result<Self, FieldError> {
        let spec = &s.spec;
        let devices = spec.devices.as_deref().unwrap_or_default();
        too_many("spec.devices", devices.len(), MAX_DEVICES_PER_SLICE)?;
        let nodes = nodes(
            spec.node_name.as_ref(),
            spec.node_selector.as_ref(),
            spec.all_nodes,
            "spec",
            p,
        )?;
        if nodes.is_none() && spec.per_device_node_selection != Some(true) {
            return Err(FieldError::new(
                "spec",
                "none of nodeName, nodeSelector, allNodes and perDeviceNodeSelection",
            ));
        }
        Ok(ResourceSlice {
            name: p.opt_str(s.metadata.name.as_ref()),
            driver: p.str(&spec.driver),
            pool: p.str(&spec.pool.name),
            generation: spec.pool.generation,
            slice_count: spec.pool.resource_slice_count,
            nodes,
            devices: devices
                .iter()
                .enumerate()
                .map(|(i, d)| Device::from_k8s(d, &format!("spec.devices[{i}]"), p))
                .collect::<Result<_, _>>()?,
            counter_sets: counters::shared(spec.shared_counters.as_ref(), p)?,
        })
    }
}

#[path = "dra_counters.rs"]
mod counters;
pub use counters::CounterSet;

#[path = "dra_version.rs"]
mod version;
pub use version::{VERSIONS, as_v1};

#[path = "dra_pod.rs"]
mod pod;
pub use pod::{PodClaim, PodClaimSource, claim_statuses, pod_claims};

#[cfg(test)]
#[path = "dra_tests.rs"]
mod tests;
