//! The cloud beside Cluster API's real controllers: the infrastructure provider of the test
//! bed's AWSMachines. Cluster API's MachineSet controller clones an AWSMachineTemplate into
//! an AWSMachine per Machine, and its Machine controller takes ownership of it. This
//! provider, as Cluster API's AWS provider does, puts its finalizer on the AWSMachine, waits
//! for the owning Machine, launches the instance after the provisioning delay (a Node that
//! kwok runs) and reports it (`spec.providerID`, `status.initialization.provisioned`,
//! `status.addresses`), or reports the cloud's refusal (`status.failureReason` /
//! `failureMessage`, which Cluster API copies to the Machine, whose phase turns Failed).
//!
//! Cluster API does the rest itself: it links the Node (`status.nodeRef`), and on deletion
//! drains it, deletes the AWSMachine, waits for it to be gone and deletes the Node. A deleted
//! AWSMachine keeps this provider's finalizer for the deprovisioning delay (the instance
//! terminating).

use serde_json::{Value, json};
use tokio::time::Instant;

use super::objects::{Launch, infrastructure_template, launch_instance};
use super::world::MachineWorld;
use super::{MachineController, WireMeta, WireOwner, or_default};
use crate::api::resources::Resource;
use crate::machine_api::{FAILURE_MODE_ANNOTATION, Profile};
use crate::settings::Timing;
use crate::store::Key;

/// The finalizer Cluster API's AWS provider puts on its AWSMachines.
pub const INFRA_FINALIZER: &str = "awsmachine.infrastructure.cluster.x-k8s.io";

/// What the provider reads of an AWSMachine.
#[derive(Default, serde::Deserialize)]
#[serde(default)]
struct InfraWire {
    #[serde(deserialize_with = "or_default")]
    metadata: WireMeta,
    #[serde(deserialize_with = "or_default")]
    spec: InfraSpec,
    #[serde(deserialize_with = "or_default")]
    status: InfraStatus,
}

#[derive(Default, serde::Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct InfraSpec {
    #[serde(rename = "providerID")]
    provider_id: Option<String>,
}

#[derive(Default, serde::Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct InfraStatus {
    #[serde(deserialize_with = "or_default")]
    initialization: InfraInitialization,
    failure_reason: Option<String>,
}

#[derive(Default, serde::Deserialize)]
#[serde(default)]
struct InfraInitialization {
    provisioned: Option<bool>,
}

/// An AWSMachine as the provider sees it.
struct InfraView {
    key: Key,
    /// The Machine that owns it, once Cluster API has adopted it.
    machine: Option<String>,
    deleting: bool,
    finalized: bool,
    provider_id: Option<String>,
    /// Provisioned or failed: nothing more to do until it is deleted.
    settled: bool,
}

impl InfraWire {
    fn view(self, key: Key) -> InfraView {
        let machine = self
            .metadata
            .owner_references
            .into_iter()
            .find(|o: &WireOwner| o.controller == Some(true) && o.kind == "Machine")
            .map(|o| o.name);
        InfraView {
            key,
            machine,
            deleting: self.metadata.deletion_timestamp.is_some(),
            finalized: self
                .metadata
                .finalizers
                .iter()
                .any(|f| f == INFRA_FINALIZER),
            provider_id: self.spec.provider_id.filter(|p| !p.is_empty()),
            settled: self.status.initialization.provisioned == Some(true)
                || self.status.failure_reason.is_some(),
        }
    }
}

impl MachineController {
    /// One pass of the infrastructure provider over every AWSMachine.
    pub(super) fn sync_infra<W: MachineWorld>(
        &mut self,
        world: &mut W,
        timing: &Timing,
        now: Instant,
    ) {
        let machines: Vec<InfraView> = world
            .list_as::<InfraWire>(Resource::AwsMachines)
            .into_iter()
            .map(|(key, m)| m.view(key))
            .collect();
        self.timers
            .retain(|name, _| machines.iter().any(|m| *m.key.name == **name));
        for m in &machines {
            if m.deleting {
                self.terminate(world, m, timing, now);
                continue;
            }
            if !m.finalized {
                let _ = world.modify(Resource::AwsMachines, &m.key, add_finalizer);
            }
            let Some(machine) = m.machine.as_deref().filter(|_| !m.settled) else {
                self.timers.remove(&*m.key.name);
                continue;
            };
            if m.provider_id.is_some() {
                // Launched, but the status write was lost: report it, never launch again.
                let _ = world.modify(Resource::AwsMachines, &m.key, |v| {
                    v["status"]["initialization"]["provisioned"] = json!(true)
                });
                continue;
            }
            let since = *self.timers.entry(m.key.name.to_string()).or_insert(now);
            if now.saturating_duration_since(since) >= timing.machine_provision {
                self.launch_infra(world, &m.key, machine);
                self.timers.remove(&*m.key.name);
            }
        }
    }

    /// A deleted AWSMachine: its instance terminates for the deprovisioning delay, then the
    /// finalizer goes and Cluster API sees it gone.
    fn terminate<W: MachineWorld>(
        &mut self,
        world: &mut W,
        m: &InfraView,
        timing: &Timing,
        now: Instant,
    ) {
        if !m.finalized {
            self.timers.remove(&*m.key.name);
            return;
        }
        let since = *self.timers.entry(m.key.name.to_string()).or_insert(now);
        if now.saturating_duration_since(since) >= timing.machine_deprovision {
            let _ = world.modify(Resource::AwsMachines, &m.key, |v| {
                if let Some(f) = v["metadata"]["finalizers"].as_array_mut() {
                    f.retain(|x| x != INFRA_FINALIZER);
                }
            });
            self.timers.remove(&*m.key.name);
        }
    }

    /// Launches the instance of the AWSMachine at `key`, owned by Machine `machine`: the
    /// profile and failure mode are its MachineSet's (Cluster API copies a
    /// MachineDeployment's annotations to its MachineSets).
    fn launch_infra<W: MachineWorld>(&self, world: &mut W, key: &Key, machine: &str) {
        let ns: &str = &key.namespace;
        let Some(machine) = world.get(self.api.machines, &Key::new(ns, machine)) else {
            return;
        };
        let set_name = machine["metadata"]["labels"]["cluster.x-k8s.io/set-name"]
            .as_str()
            .unwrap_or_default();
        let set = world
            .get(self.api.machine_sets, &Key::new(ns, set_name))
            .unwrap_or(Value::Null);
        let template = infrastructure_template(world, &set, ns);
        let profile = match Profile::of(&set, &self.api, template.as_ref()) {
            Ok(p) => p,
            Err(e) => return report_failure(world, key, "InvalidConfiguration", &e.to_string()),
        };
        let mode = set["metadata"]["annotations"][FAILURE_MODE_ANNOTATION].as_str();
        let launch = Launch {
            mode,
            capacity: &self.capacity,
            link: super::Link::Elsewhere,
        };
        match launch_instance(world, &launch, &profile, key, json!({})) {
            Ok(Ok(instance)) => {
                let _ = world.modify(Resource::AwsMachines, key, |v| {
                    v["spec"]["providerID"] = json!(instance.provider_id);
                    v["spec"]["instanceID"] = json!(instance.instance_id);
                    v["status"]["initialization"]["provisioned"] = json!(true);
                    v["status"]["addresses"] = instance.addresses;
                    if !profile.zone.is_empty() {
                        v["status"]["failureDomain"] = json!(profile.zone);
                    }
                });
            }
            Ok(Err(message)) => report_failure(world, key, "CreateError", &message),
            Err(_) => {} // logged by the world; the next pass tries again
        }
    }
}

fn add_finalizer(v: &mut Value) {
    match v["metadata"]["finalizers"].as_array_mut() {
        Some(f) => f.push(json!(INFRA_FINALIZER)),
        None => v["metadata"]["finalizers"] = json!([INFRA_FINALIZER]),
    }
}

/// The cloud's refusal, where Cluster API reads a provider's terminal failure.
fn report_failure<W: MachineWorld>(world: &mut W, key: &Key, reason: &str, message: &str) {
    let _ = world.modify(Resource::AwsMachines, key, |v| {
        v["status"]["failureReason"] = json!(reason);
        v["status"]["failureMessage"] = json!(message);
    });
}
