//! The pods on each simulated node, by interned shape.
//!
//! A pass places every running pod of the cluster (tens of thousands on a large one), and
//! most of them share a few shapes: a Deployment's replicas have one spec, namespace and
//! label set. A placement stores the shape's index, not a clone of its Arcs, so placing,
//! reverting and dropping the simulation cost no reference counting per pod.

use std::collections::HashMap;
use std::sync::Arc;

use foldhash::fast::RandomState as Hasher;

use super::PodShape;
use fleetscaler_model::pod::Pod;

/// A shape's identity: the addresses of its interned parts (each held by `Placed::shapes`,
/// so no address is reused while the key exists). Volume and claim needs are per pod.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct Key {
    spec: usize,
    namespace: usize,
    labels: usize,
    volumes: usize,
    dra: usize,
}

impl Key {
    fn of(shape: &PodShape) -> Key {
        Key {
            spec: Arc::as_ptr(&shape.spec) as usize,
            namespace: Arc::as_ptr(&shape.namespace) as *const u8 as usize,
            labels: shape.labels.as_ptr(),
            volumes: shape
                .volumes
                .as_ref()
                .map_or(0, |v| Arc::as_ptr(v) as usize),
            dra: shape.dra.as_ref().map_or(0, |d| Arc::as_ptr(d) as usize),
        }
    }

    /// The key of a pod with no volume or claim needs, without building its shape.
    fn of_plain(pod: &Pod) -> Key {
        Key {
            spec: Arc::as_ptr(&pod.spec) as usize,
            namespace: Arc::as_ptr(&pod.id.namespace) as *const u8 as usize,
            labels: pod.labels.as_ptr(),
            volumes: 0,
            dra: 0,
        }
    }
}

#[derive(Default)]
pub(super) struct Placed {
    shapes: Vec<PodShape>,
    ids: HashMap<Key, usize, Hasher>,
    on: Vec<Vec<usize>>,
}

impl Placed {
    /// The shape's index, adding it when new.
    pub fn intern(&mut self, shape: &PodShape) -> usize {
        let key = Key::of(shape);
        if let Some(&id) = self.ids.get(&key) {
            return id;
        }
        self.push(key, shape.clone())
    }

    /// The index of a pod's shape when it has one already and needs no volumes or claims
    /// (the shape a `Simulator::shape` would build for it has none then).
    pub fn known_plain(&self, pod: &Pod) -> Option<usize> {
        if !pod.spec.claims.is_empty() || !pod.spec.resource_claims.is_empty() {
            return None;
        }
        self.ids.get(&Key::of_plain(pod)).copied()
    }

    fn push(&mut self, key: Key, shape: PodShape) -> usize {
        let id = self.shapes.len();
        self.shapes.push(shape);
        self.ids.insert(key, id);
        id
    }

    pub fn shape(&self, id: usize) -> &PodShape {
        &self.shapes[id]
    }

    pub fn add_node(&mut self) {
        self.on.push(Vec::new());
    }

    pub fn remove_last_node(&mut self) {
        self.on.pop();
    }

    pub fn add(&mut self, node: usize, id: usize) {
        self.on[node].push(id);
    }

    /// Takes one pod of the shape off the node: one with the same spec and labels if that
    /// exact shape is not there (a shape rebuilt for the pod may hold other Arcs).
    pub fn remove(&mut self, node: usize, id: usize) {
        let pod = &self.shapes[id];
        let shapes = &self.shapes;
        let on = &mut self.on[node];
        let same = |&i: &usize| {
            let p = &shapes[i];
            Arc::ptr_eq(&p.spec, &pod.spec) && p.labels.ptr_eq(&pod.labels)
        };
        if let Some(i) = on
            .iter()
            .rposition(|&i| i == id)
            .or_else(|| on.iter().rposition(same))
        {
            on.swap_remove(i);
        }
    }

    /// The pods on a node now.
    pub fn on(&self, node: usize) -> impl ExactSizeIterator<Item = &PodShape> {
        self.on[node].iter().map(|&i| &self.shapes[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fleetscaler_model::labels::Labels;
    use fleetscaler_model::pod::PodSpec;

    fn shape(spec: &Arc<PodSpec>, labels: &Labels) -> PodShape {
        PodShape {
            namespace: Arc::from("default"),
            labels: labels.clone(),
            spec: spec.clone(),
            volumes: None,
            dra: None,
        }
    }

    #[test]
    fn replicas_share_one_shape_and_others_do_not() {
        let (spec, labels) = (Arc::new(PodSpec::default()), Labels::default());
        let namespace: Arc<str> = Arc::from("default");
        let replica = PodShape {
            namespace: namespace.clone(),
            ..shape(&spec, &labels)
        };
        let mut placed = Placed::default();
        let a = placed.intern(&replica);
        assert_eq!(placed.intern(&replica.clone()), a);
        let other = Arc::new(PodSpec::default());
        let b = placed.intern(&PodShape {
            namespace,
            ..shape(&other, &labels)
        });
        assert_ne!(a, b, "an equal spec at another address is another shape");
        assert!(Arc::ptr_eq(&placed.shape(a).spec, &spec));
    }

    #[test]
    fn removing_a_rebuilt_shape_takes_the_pod_of_the_same_spec_and_labels() {
        let (spec, labels) = (Arc::new(PodSpec::default()), Labels::default());
        let mut placed = Placed::default();
        placed.add_node();
        let first = placed.intern(&shape(&spec, &labels));
        let other = placed.intern(&shape(&Arc::new(PodSpec::default()), &labels));
        placed.add(0, first);
        placed.add(0, other);
        // Another namespace Arc: a new id, the same spec and labels as `first`.
        let rebuilt = placed.intern(&shape(&spec, &labels));
        assert_ne!(rebuilt, first);
        placed.remove(0, rebuilt);
        let left: Vec<_> = placed.on(0).map(|p| p.spec.clone()).collect();
        assert_eq!(left.len(), 1);
        assert!(!Arc::ptr_eq(&left[0], &spec), "the other spec's pod stays");
    }
}
