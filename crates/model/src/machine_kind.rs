//! One descriptor per Machine API kind the hub reads ([`MachineKind`]): its name, its plural
//! (the resource in URLs), the API groups that serve it, whether a node group can be made of
//! it ([`ScalableKind`]), and the kind it controls in the ownership chain
//! (MachineDeployment → MachineSet → Machine, each object owned through its controller
//! `ownerReference`, in its owner's namespace and API group).
//!
//! Discovery, the cache, node groups and their bounds, templates, the executor, start-up
//! recovery and dumps ask this table instead of naming kinds, so adding a kind (Cluster API's
//! MachinePool, say) is a row in [`MachineKind::ALL`], a [`ScalableKind`] variant when it
//! scales, and the tests below. What really differs per kind (a wire shape the projections
//! read) says so where it is.

use serde::Serialize;

use super::machine_api::MachineApiGroup;

/// What the hub knows of one Machine API kind.
#[derive(Debug, PartialEq, Eq)]
pub struct MachineKind {
    /// The `kind` of its objects: `MachineSet`.
    pub name: &'static str,
    /// The resource in URLs: `machinesets`.
    pub plural: &'static str,
    /// The API groups that serve it (in every version the hub understands of each).
    pub groups: &'static [MachineApiGroup],
    /// What it scales as, when a node group can be made of it.
    pub scalable: Option<ScalableKind>,
    /// The kind it controls: objects of that kind whose controller `ownerReference` names
    /// one of its objects (same namespace, same API group) are its own.
    pub owns: Option<&'static MachineKind>,
}

const BOTH: &[MachineApiGroup] = &[MachineApiGroup::OpenShift, MachineApiGroup::ClusterApi];

/// Machines: what node groups are made of, one per node.
pub const MACHINE: MachineKind = MachineKind {
    name: "Machine",
    plural: "machines",
    groups: BOTH,
    scalable: None,
    owns: None,
};

pub const MACHINE_SET: MachineKind = MachineKind {
    name: "MachineSet",
    plural: "machinesets",
    groups: BOTH,
    scalable: Some(ScalableKind::MachineSet),
    owns: Some(&MACHINE),
};

/// Cluster API's alone: OpenShift's Machine API has no MachineDeployment.
pub const MACHINE_DEPLOYMENT: MachineKind = MachineKind {
    name: "MachineDeployment",
    plural: "machinedeployments",
    groups: &[MachineApiGroup::ClusterApi],
    scalable: Some(ScalableKind::MachineDeployment),
    owns: Some(&MACHINE_SET),
};

impl MachineKind {
    /// Every kind the hub reads, in the order discovery looks them up and messages name them.
    pub const ALL: [&'static MachineKind; 3] = [&MACHINE_SET, &MACHINE_DEPLOYMENT, &MACHINE];

    /// The kind named `name` (`MachineSet`).
    pub fn named(name: &str) -> Option<&'static MachineKind> {
        Self::ALL.into_iter().find(|k| k.name == name)
    }

    /// The kind whose resource is `plural` (`machinesets`).
    pub fn with_plural(plural: &str) -> Option<&'static MachineKind> {
        Self::ALL.into_iter().find(|k| k.plural == plural)
    }

    /// The kinds `group` serves.
    pub fn served_by(group: MachineApiGroup) -> impl Iterator<Item = &'static MachineKind> {
        Self::ALL
            .into_iter()
            .filter(move |k| k.groups.contains(&group))
    }

    /// The kinds that control objects of this kind.
    pub fn owners(&self) -> impl Iterator<Item = &'static MachineKind> + '_ {
        Self::ALL
            .into_iter()
            .filter(move |k| k.owns.is_some_and(|owned| owned == self))
    }

    /// Whether an object of this kind whose controller is of kind `owner` is part of it in
    /// the chain (a MachineSet controlled by a MachineDeployment).
    pub fn is_owned_by(&self, owner: &str) -> bool {
        self.owners().any(|k| k.name == owner)
    }

    /// Whether it controls Machines directly (a MachineSet).
    pub fn owns_machines(&self) -> bool {
        self.owns.is_some_and(|k| *k == MACHINE)
    }

    /// Whether it controls resources that scale (a MachineDeployment its MachineSets): their
    /// replicas are its to set, and they carry its machines' annotations as well as it does.
    pub fn owns_scalables(&self) -> bool {
        self.owns.is_some_and(|k| k.scalable.is_some())
    }
}

/// Names joined for a message, the last pair with `last`: `A, B or C`.
pub fn join_names<S: AsRef<str>>(names: &[S], last: &str) -> String {
    match names {
        [] => String::new(),
        [one] => one.as_ref().to_string(),
        [init @ .., end] => {
            let init: Vec<&str> = init.iter().map(AsRef::as_ref).collect();
            format!("{} {last} {}", init.join(", "), end.as_ref())
        }
    }
}

/// A Machine API kind a node group can be made of: what the group scales.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum ScalableKind {
    MachineSet,
    MachineDeployment,
}

impl ScalableKind {
    /// Its row in the table.
    pub fn descriptor(self) -> &'static MachineKind {
        match self {
            ScalableKind::MachineSet => &MACHINE_SET,
            ScalableKind::MachineDeployment => &MACHINE_DEPLOYMENT,
        }
    }

    pub fn as_str(self) -> &'static str {
        self.descriptor().name
    }

    /// The kind named `kind` (`MachineSet`, `MachineDeployment`).
    pub fn parse(kind: &str) -> Option<Self> {
        MachineKind::named(kind)?.scalable
    }

    /// The resource's plural, as in its URL.
    pub fn plural(self) -> &'static str {
        self.descriptor().plural
    }

    /// Every scalable kind, in the table's order.
    pub fn all() -> impl Iterator<Item = ScalableKind> {
        MachineKind::ALL.into_iter().filter_map(|k| k.scalable)
    }

    /// `MachineSet or MachineDeployment`: the kinds a node group can be, for messages.
    pub fn names() -> String {
        let names: Vec<&str> = Self::all().map(Self::as_str).collect();
        join_names(&names, "or")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPENSHIFT: MachineApiGroup = MachineApiGroup::OpenShift;
    const CAPI: MachineApiGroup = MachineApiGroup::ClusterApi;

    #[test]
    fn every_kind_is_found_by_its_name_and_its_plural() {
        for kind in MachineKind::ALL {
            assert_eq!(MachineKind::named(kind.name), Some(kind));
            assert_eq!(MachineKind::with_plural(kind.plural), Some(kind));
            assert_eq!(kind.plural, format!("{}s", kind.name.to_lowercase()));
        }
        assert_eq!(MachineKind::named("MachinePool"), None);
        assert_eq!(MachineKind::named("machineset"), None);
        assert_eq!(MachineKind::with_plural("MachineSets"), None);
    }

    #[test]
    fn names_and_plurals_are_unique() {
        for (i, a) in MachineKind::ALL.iter().enumerate() {
            for b in &MachineKind::ALL[i + 1..] {
                assert_ne!(a.name, b.name);
                assert_ne!(a.plural, b.plural);
            }
        }
    }

    #[test]
    fn every_scalable_kind_has_its_row_and_back() {
        for kind in ScalableKind::all() {
            assert_eq!(kind.descriptor().scalable, Some(kind));
            assert_eq!(ScalableKind::parse(kind.as_str()), Some(kind));
            assert_eq!(kind.plural(), kind.descriptor().plural);
        }
        for kind in [ScalableKind::MachineSet, ScalableKind::MachineDeployment] {
            assert!(ScalableKind::all().any(|k| k == kind), "{kind:?}");
        }
        assert_eq!(ScalableKind::parse("Machine"), None);
        assert_eq!(ScalableKind::names(), "MachineSet or MachineDeployment");
    }

    #[test]
    fn the_chain_is_consistent() {
        // Every owner and owned kind is in the table, served wherever its owner is, and
        // the chain ends (no kind owns itself, directly or not).
        for kind in MachineKind::ALL {
            let mut seen = vec![kind.name];
            let mut at = kind;
            while let Some(owned) = at.owns {
                assert!(
                    MachineKind::named(owned.name) == Some(owned),
                    "{}",
                    owned.name
                );
                for group in at.groups {
                    assert!(owned.groups.contains(group), "{} of {group}", owned.name);
                }
                assert!(!seen.contains(&owned.name), "{} loops", kind.name);
                seen.push(owned.name);
                at = owned;
            }
            // Owners scale: the chain is what a node group's replicas reach.
            for owner in kind.owners() {
                assert!(owner.scalable.is_some(), "{}", owner.name);
                assert!(kind.is_owned_by(owner.name));
            }
        }
        assert_eq!(MACHINE_DEPLOYMENT.owns, Some(&MACHINE_SET));
        assert_eq!(MACHINE_SET.owns, Some(&MACHINE));
        assert!(MACHINE_SET.is_owned_by("MachineDeployment"));
        assert!(MACHINE.is_owned_by("MachineSet"));
        assert!(!MACHINE.is_owned_by("MachineDeployment"));
        assert!(!MACHINE_DEPLOYMENT.is_owned_by("MachineDeployment"));
        assert!(MACHINE_SET.owns_machines() && !MACHINE_DEPLOYMENT.owns_machines());
        assert!(MACHINE_DEPLOYMENT.owns_scalables() && !MACHINE_SET.owns_scalables());
        assert!(!MACHINE.owns_machines() && !MACHINE.owns_scalables());
    }

    #[test]
    fn each_api_group_serves_its_kinds() {
        let names = |g| {
            MachineKind::served_by(g)
                .map(|k| k.name)
                .collect::<Vec<_>>()
        };
        assert_eq!(names(OPENSHIFT), ["MachineSet", "Machine"]);
        assert_eq!(names(CAPI), ["MachineSet", "MachineDeployment", "Machine"]);
        // Every group serves Machines and something that owns them.
        for group in MachineApiGroup::ALL {
            assert!(MachineKind::served_by(group).any(|k| *k == MACHINE));
            assert!(MachineKind::served_by(group).any(MachineKind::owns_machines));
        }
    }

    #[test]
    fn names_are_joined_for_messages() {
        assert_eq!(join_names::<&str>(&[], "or"), "");
        assert_eq!(join_names(&["a"], "or"), "a");
        assert_eq!(join_names(&["a", "b"], "or"), "a or b");
        assert_eq!(join_names(&["a", "b", "c"], "and"), "a, b and c");
    }
}
