//! Resource amounts: milli-CPU, bytes of memory and ephemeral storage, and any extended
//! resource (GPUs, hugepages, devices) by name.

use std::fmt;
use std::sync::Arc;

use serde::Serialize;

pub const CPU: &str = "cpu";
pub const MEMORY: &str = "memory";
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
pub const PODS: &str = "pods";

/// True for resource names that count as GPUs for limits and utilization: every name of
/// upstream's `GPUVendorResourceNames` (`nvidia.com/gpu`, `amd.com/gpu`, `habana.ai/gaudi`,
/// `gpu.intel.com/xe`, `microsoft.com/directx`), other `<vendor>/gpu` names, and Intel's
/// `gpu.intel.com/*`.
pub fn is_gpu_resource(name: &str) -> bool {
    name.ends_with("/gpu")
        || name.starts_with("gpu.intel.com/")
        || matches!(name, "habana.ai/gaudi" | "microsoft.com/directx")
}

/// An amount of every resource a pod can request or a node can offer.
/// Pod count is not here: a node's pod capacity is kept apart, as each pod takes exactly one.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Resources {
    pub cpu_milli: i64,
    pub memory: i64,
    pub ephemeral_storage: i64,
    /// Extended resources, sorted by name, no zero entries.
    pub extended: Vec<(Arc<str>, i64)>,
}

/// The first resource that does not fit, with what was asked and what was left.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shortfall {
    pub resource: Arc<str>,
    pub requested: i64,
    pub available: i64,
}

impl Shortfall {
    pub fn describe(&self) -> String {
        format!(
            "{} requested {}, only {} free",
            self.resource,
            format_amount(&self.resource, self.requested),
            format_amount(&self.resource, self.available)
        )
    }
}

impl Resources {
    pub fn new(cpu_milli: i64, memory: i64) -> Self {
        Resources {
            cpu_milli,
            memory,
            ..Default::default()
        }
    }

    /// Sets one resource by name (`cpu` in milli-units, the rest in whole units).
    pub fn set(&mut self, name: &str, amount: i64) {
        match name {
            CPU => self.cpu_milli = amount,
            MEMORY => self.memory = amount,
            EPHEMERAL_STORAGE => self.ephemeral_storage = amount,
            _ => {
                match self
                    .extended
                    .binary_search_by(|(k, _)| k.as_ref().cmp(name))
                {
                    Ok(i) if amount == 0 => {
                        self.extended.remove(i);
                    }
                    Ok(i) => self.extended[i].1 = amount,
                    Err(_) if amount == 0 => {}
                    Err(i) => self.extended.insert(i, (Arc::from(name), amount)),
                }
            }
        }
    }

    pub fn get(&self, name: &str) -> i64 {
        match name {
            CPU => self.cpu_milli,
            MEMORY => self.memory,
            EPHEMERAL_STORAGE => self.ephemeral_storage,
            _ => self
                .extended
                .binary_search_by(|(k, _)| k.as_ref().cmp(name))
                .map_or(0, |i| self.extended[i].1),
        }
    }

    pub fn is_zero(&self) -> bool {
        self.cpu_milli == 0
            && self.memory == 0
            && self.ephemeral_storage == 0
            && self.extended.is_empty()
    }

    pub fn add(&mut self, other: &Resources) {
        self.combine(other, i64::saturating_add);
    }

    pub fn sub(&mut self, other: &Resources) {
        self.combine(other, i64::saturating_sub);
    }

    /// Per resource, the larger of the two (how init containers combine).
    pub fn max_with(&mut self, other: &Resources) {
        self.combine(other, i64::max);
    }

    fn combine(&mut self, other: &Resources, f: fn(i64, i64) -> i64) {
        self.cpu_milli = f(self.cpu_milli, other.cpu_milli);
        self.memory = f(self.memory, other.memory);
        self.ephemeral_storage = f(self.ephemeral_storage, other.ephemeral_storage);
        for (name, amount) in &other.extended {
            let current = self.get(name);
            self.set(name, f(current, *amount));
        }
    }

    /// Checks that `self` (a request) fits into `free`; names the first resource that does not.
    /// Zero requests always fit, as in the scheduler.
    pub fn fits_in(&self, free: &Resources) -> Result<(), Shortfall> {
        let check = |name: &str, req: i64, avail: i64| {
            if req > 0 && req > avail {
                Err(Shortfall {
                    resource: Arc::from(name),
                    requested: req,
                    available: avail.max(0),
                })
            } else {
                Ok(())
            }
        };
        check(CPU, self.cpu_milli, free.cpu_milli)?;
        check(MEMORY, self.memory, free.memory)?;
        check(
            EPHEMERAL_STORAGE,
            self.ephemeral_storage,
            free.ephemeral_storage,
        )?;
        for (name, req) in &self.extended {
            check(name, *req, free.get(name))?;
        }
        Ok(())
    }

    /// The first resource this request does not fit into, on a node with `allocatable` of which
    /// `used` is taken: `(name, requested, free)`. Allocates nothing: this is the hot path.
    pub fn first_short<'a>(
        &'a self,
        allocatable: &Resources,
        used: &Resources,
    ) -> Option<(&'a str, i64, i64)> {
        let short = |req: i64, alloc: i64, used: i64| req > 0 && req > alloc.saturating_sub(used);
        if short(self.cpu_milli, allocatable.cpu_milli, used.cpu_milli) {
            return Some((CPU, self.cpu_milli, allocatable.cpu_milli - used.cpu_milli));
        }
        if short(self.memory, allocatable.memory, used.memory) {
            return Some((MEMORY, self.memory, allocatable.memory - used.memory));
        }
        if short(
            self.ephemeral_storage,
            allocatable.ephemeral_storage,
            used.ephemeral_storage,
        ) {
            return Some((
                EPHEMERAL_STORAGE,
                self.ephemeral_storage,
                allocatable.ephemeral_storage - used.ephemeral_storage,
            ));
        }
        self.extended.iter().find_map(|(name, req)| {
            let (alloc, used) = (allocatable.get(name), used.get(name));
            short(*req, alloc, used).then(|| (name.as_ref(), *req, alloc - used))
        })
    }

    /// The GPU resources, by name.
    pub fn gpus(&self) -> impl Iterator<Item = (&Arc<str>, i64)> {
        self.extended
            .iter()
            .filter(|(k, _)| is_gpu_resource(k))
            .map(|(k, v)| (k, *v))
    }

    pub fn gpu_count(&self) -> i64 {
        self.gpus().fold(0, |sum, (_, n)| sum.saturating_add(n))
    }
}

impl fmt::Display for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cpu={} memory={}",
            format_amount(CPU, self.cpu_milli),
            format_amount(MEMORY, self.memory)
        )?;
        if self.ephemeral_storage > 0 {
            write!(
                f,
                " ephemeral-storage={}",
                format_amount(EPHEMERAL_STORAGE, self.ephemeral_storage)
            )?;
        }
        for (name, amount) in &self.extended {
            write!(f, " {name}={}", format_amount(name, *amount))?;
        }
        Ok(())
    }
}

impl Serialize for Resources {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut entries = vec![
            (CPU.to_string(), format_amount(CPU, self.cpu_milli)),
            (MEMORY.to_string(), format_amount(MEMORY, self.memory)),
        ];
        if self.ephemeral_storage > 0 {
            entries.push((
                EPHEMERAL_STORAGE.to_string(),
                format_amount(EPHEMERAL_STORAGE, self.ephemeral_storage),
            ));
        }
        for (name, amount) in &self.extended {
            entries.push((name.to_string(), format_amount(name, *amount)));
        }
        s.collect_map(entries)
    }
}

/// A human-readable amount in Kubernetes quantity notation: `1500m`, `2`, `4Gi`, `1536Mi`.
pub fn format_amount(resource: &str, amount: i64) -> String {
    if resource == CPU {
        return if amount % 1000 == 0 {
            (amount / 1000).to_string()
        } else {
            format!("{amount}m")
        };
    }
    let is_bytes =
        resource == MEMORY || resource == EPHEMERAL_STORAGE || resource.starts_with("hugepages-");
    if !is_bytes || amount == 0 {
        return amount.to_string();
    }
    for (suffix, shift) in [("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)] {
        if amount % (1_i64 << shift) == 0 {
            return format!("{}{suffix}", amount >> shift);
        }
    }
    amount.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_and_extended_resources() {
        let mut a = Resources::new(1000, 1 << 30);
        a.set("nvidia.com/gpu", 2);
        let mut b = Resources::new(500, 1 << 29);
        b.set("nvidia.com/gpu", 1);
        b.set("example.com/foo", 3);
        a.add(&b);
        assert_eq!(a.cpu_milli, 1500);
        assert_eq!(a.get("nvidia.com/gpu"), 3);
        assert_eq!(a.get("example.com/foo"), 3);
        a.sub(&b);
        assert_eq!(a.get("example.com/foo"), 0);
        assert!(a.extended.iter().all(|(_, v)| *v != 0));
        assert_eq!(a.gpu_count(), 2);
    }

    #[test]
    fn fits_names_the_short_resource() {
        let mut req = Resources::new(500, 100);
        let free = Resources::new(1000, 50);
        assert_eq!(req.fits_in(&free).unwrap_err().resource.as_ref(), "memory");
        req.memory = 50;
        assert!(req.fits_in(&free).is_ok());
        req.set("nvidia.com/gpu", 1);
        let err = req.fits_in(&free).unwrap_err();
        assert_eq!(err.describe(), "nvidia.com/gpu requested 1, only 0 free");
    }

    #[test]
    fn formats_like_quantities() {
        assert_eq!(format_amount(CPU, 1500), "1500m");
        assert_eq!(format_amount(CPU, 4000), "4");
        assert_eq!(format_amount(MEMORY, 4 << 30), "4Gi");
        assert_eq!(format_amount(MEMORY, 1536 << 20), "1536Mi");
        assert_eq!(format_amount(MEMORY, 1000), "1000");
        assert_eq!(format_amount("nvidia.com/gpu", 2), "2");
        assert!(is_gpu_resource("amd.com/gpu") && !is_gpu_resource("example.com/gpus"));
    }
}
