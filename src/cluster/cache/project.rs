//! Projecting one watched object into its store: the per-kind half of the cache's upsert,
//! and what each change says about waking the runner.

use kube::api::DynamicObject;
use tokio::time::Instant;

use super::{Cache, Kind, Object, describe};
use crate::model::autoscaler::{ClusterAutoscaler, MachineAutoscaler};
use crate::model::meta::key_of;
use crate::model::snapshot::{PRIORITY_EXPANDER_CONFIGMAP, PriorityExpanderConfig};
use crate::model::workload::{DaemonSet, Namespace, PodDisruptionBudget};
use crate::model::{FieldError, Machine, Node, ObjectKey, Pod, ScalableResource};

impl Cache {
    pub(super) fn project_and_store(
        &mut self,
        kind: Kind,
        object: Object,
        now: Instant,
    ) -> Result<bool, FieldError> {
        let p = &mut self.projector;
        let s = &mut self.snapshot;
        match (kind, object) {
            (Kind::Node, Object::Node(n)) => {
                let (node, problem) = match Node::from_k8s(&n, p) {
                    Ok(node) => (node, None),
                    Err(e) => (Node::unreadable(&n, &e.to_string(), p), Some(e)),
                };
                let key = ObjectKey::new("", &node.name);
                let old = self.nodes.upsert(&mut s.nodes, key, node.clone());
                self.unchanged = old.as_ref() == Some(&node);
                let wake = old.is_none_or(|o| o.is_ready() != node.is_ready());
                problem.map_or(Ok(wake), Err)
            }
            (Kind::Pod, Object::Pod(pod)) => {
                let (pod, problem) = match Pod::from_k8s(&pod, p) {
                    Ok(projected) => (projected, None),
                    Err(e) => (Pod::unreadable(&pod, p), Some(e)),
                };
                let key = ObjectKey::new(&pod.id.namespace, &pod.id.name);
                let now_unschedulable = pod.unschedulable;
                let old = self.pods.upsert(&mut s.pods, key.clone(), pod);
                self.unchanged = old.as_ref() == self.pods.get(&s.pods, &key);
                let wake = now_unschedulable && old.is_none_or(|o| !o.unschedulable);
                if !now_unschedulable {
                    self.pending_since.remove(&key);
                } else if wake {
                    self.pending_since.entry(key).or_insert(now);
                    self.turned_pending += 1;
                }
                problem.map_or(Ok(wake), Err)
            }
            (Kind::Namespace, Object::Namespace(ns)) => {
                let ns = Namespace::from_k8s(&ns, p);
                let key = ObjectKey::new("", &ns.name);
                self.namespaces.upsert(&mut s.namespaces, key, ns);
                Ok(false)
            }
            (Kind::PodDisruptionBudget, Object::PodDisruptionBudget(pdb)) => {
                let (budget, problem) = match PodDisruptionBudget::from_k8s(&pdb, p) {
                    Ok(budget) => (budget, None),
                    Err(e) => (
                        PodDisruptionBudget::unreadable(&pdb, &e.to_string(), p),
                        Some(e),
                    ),
                };
                self.pdbs.upsert(&mut s.pdbs, budget.key.clone(), budget);
                problem.map_or(Ok(false), Err)
            }
            (Kind::DaemonSet, Object::DaemonSet(ds)) => {
                let ds = DaemonSet::from_k8s(&ds, p)?;
                self.daemonsets
                    .upsert(&mut s.daemonsets, ds.key.clone(), ds);
                Ok(false)
            }
            // Kept even when a field is odd; the problem is reported all the same.
            (Kind::Controller(c), Object::Controller(o)) => {
                self.store_controller(c, &o).map_or(Ok(false), Err)
            }
            (Kind::PriorityConfigMap, Object::ConfigMap(cm)) => {
                let cm = *cm;
                if cm.metadata.name.as_deref() != Some(PRIORITY_EXPANDER_CONFIGMAP) {
                    return Ok(false);
                }
                let config = PriorityExpanderConfig {
                    key: key_of(&cm.metadata, p),
                    priorities: cm.data.and_then(|mut d| d.remove("priorities")),
                };
                self.dirty = true;
                let st = &mut self.priority;
                st.table.upsert(&mut st.items, config.key.clone(), config);
                Ok(true)
            }
            (kind, object) if kind.is_storage() => self.store_storage(kind, object),
            (kind, object) if kind.is_provisioning() => self.store_provisioning(kind, object),
            (kind, object) if kind.is_dra() => self.store_dra(kind, object),
            (kind, Object::Dynamic(o)) => self.store_dynamic(kind, *o),
            (kind, other) => Err(FieldError::new(
                "kind",
                format!(
                    "watch of {} delivered {}",
                    kind.describe(),
                    describe(kind, &other)
                ),
            )),
        }
    }

    fn store_dynamic(&mut self, kind: Kind, o: DynamicObject) -> Result<bool, FieldError> {
        let p = &mut self.projector;
        let key = key_of(&o.metadata, p);
        let value = serde_json::to_value(&o).map_err(|e| FieldError::new("", format!("{e}")))?;
        self.dirty = true;
        // Per kind: the projection (what scales, or Machines; see `Kind::machine_api`).
        match kind {
            Kind::Scalable(api, sk) => {
                let r = ScalableResource::from_json(api, sk, value, p)?;
                let st = self.scalables.entry(kind).or_default();
                let old = st.table.upsert(&mut st.items, key, r.clone());
                Ok(old.is_none_or(|o| o.replicas != r.replicas || o.annotations != r.annotations))
            }
            Kind::Machine(api) => {
                let m = Machine::from_json(api, value, p)?;
                let st = self.machines.entry(kind).or_default();
                let old = st.table.upsert(&mut st.items, key, m.clone());
                Ok(old.is_none_or(|o| machine_moved(&o, &m)))
            }
            Kind::ClusterAutoscaler => {
                let ca = ClusterAutoscaler::from_json(value)?;
                let st = &mut self.cluster_autoscalers;
                st.table.upsert(&mut st.items, key, ca);
                Ok(true)
            }
            Kind::MachineAutoscaler => {
                let ma = MachineAutoscaler::from_json(value, p)?;
                let st = &mut self.machine_autoscalers;
                st.table.upsert(&mut st.items, key, ma);
                Ok(true)
            }
            other => Err(FieldError::new(
                "kind",
                format!("{} is not read as a dynamic object", other.describe()),
            )),
        }
    }
}

/// A machine change the autoscaler reacts to: it got a node, failed, or is going.
fn machine_moved(old: &Machine, new: &Machine) -> bool {
    old.phase != new.phase
        || old.node_ref != new.node_ref
        || old.failure != new.failure
        || old.deleting != new.deleting
}
