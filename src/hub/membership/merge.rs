//! What the sources found, put together: each source's clusters (an object that turned
//! malformed keeps its last good cluster), the sources combined (one cluster per name, at
//! most [`MAX_CLUSTERS`]), and fleet.toml merged over them (its own clusters win by name).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Display;

use super::{MAX_CLUSTERS, Problem};
use crate::config::{ClusterConfig, FleetConfig};

/// One listing of one source: each object (`Secret fleet/east`) with the cluster read from
/// it, or why none could be (`E`: only its message is needed here).
#[derive(Debug, Default)]
pub(super) struct Listing<E> {
    pub objects: Vec<(String, Result<ClusterConfig, E>)>,
    /// Why the listing stopped short (more objects than the hub takes).
    pub cut: Option<String>,
}

/// A source's clusters by object after `listing`, and its problems. An object that can no
/// longer be read keeps the cluster it gave last time, as a fleet.toml that does not validate
/// leaves the running configuration: a typo in an annotation does not stop a cluster.
pub(super) fn settle<E: Display>(
    source: &str,
    listing: Listing<E>,
    previous: &BTreeMap<String, ClusterConfig>,
) -> (BTreeMap<String, ClusterConfig>, Vec<Problem>) {
    let mut good = BTreeMap::new();
    let mut problems = Vec::new();
    for (object, read) in listing.objects {
        match read {
            Ok(cluster) => {
                good.insert(object, cluster);
            }
            Err(error) => {
                let kept = previous.get(&object).cloned();
                let message = match &kept {
                    Some(_) => format!("{error}; its last good version is kept"),
                    None => error.to_string(),
                };
                if let Some(cluster) = kept {
                    good.insert(object.clone(), cluster);
                }
                problems.push(Problem { object, message });
            }
        }
    }
    if let Some(message) = listing.cut {
        problems.push(Problem {
            object: source.to_string(),
            message,
        });
    }
    (good, problems)
}

/// Every source's clusters, in the sources' order, one per name (the first object to claim
/// a name keeps it), at most [`MAX_CLUSTERS`].
pub(super) fn combine<'a>(
    sources: impl IntoIterator<Item = &'a BTreeMap<String, ClusterConfig>>,
) -> (Vec<ClusterConfig>, Vec<Problem>) {
    let mut clusters: Vec<ClusterConfig> = Vec::new();
    let mut taken: BTreeMap<String, String> = BTreeMap::new();
    let mut problems = Vec::new();
    for (object, cluster) in sources.into_iter().flatten() {
        if let Some(first) = taken.get(&*cluster.name) {
            problems.push(Problem {
                object: object.clone(),
                message: format!(
                    "cluster name {:?} is already taken by {first}: left out",
                    cluster.name
                ),
            });
            continue;
        }
        if clusters.len() == MAX_CLUSTERS {
            problems.push(Problem {
                object: object.clone(),
                message: format!(
                    "more than {MAX_CLUSTERS} clusters found: {:?} is left out",
                    cluster.name
                ),
            });
            continue;
        }
        taken.insert(cluster.name.to_string(), object.clone());
        clusters.push(cluster.clone());
    }
    (clusters, problems)
}

/// fleet.toml with the found clusters after its own; a found cluster named as one of
/// fleet.toml's is left out (fleet.toml wins), with a problem naming where it came from.
pub fn merge(file: &FleetConfig, found: &[ClusterConfig]) -> (FleetConfig, Vec<Problem>) {
    let own: BTreeSet<&str> = file.clusters.iter().map(|c| c.name.as_str()).collect();
    let mut merged = file.clone();
    let mut problems = Vec::new();
    for cluster in found {
        if own.contains(cluster.name.as_str()) {
            problems.push(Problem {
                object: cluster.source().to_string(),
                message: format!(
                    "cluster {:?} is in fleet.toml, which wins: left out",
                    cluster.name
                ),
            });
        } else {
            merged.clusters.push(cluster.clone());
        }
    }
    (merged, problems)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::membership::{Discovered, InlineKubeconfig};

    fn found(name: &str, object: &str) -> ClusterConfig {
        ClusterConfig {
            discovered: Some(Discovered {
                source: object.into(),
                kubeconfig: InlineKubeconfig::new(format!("{{\"{name}\": 1}}")),
            }),
            ..ClusterConfig::named(name)
        }
    }

    #[test]
    fn a_malformed_object_keeps_its_last_good_cluster() {
        let before: BTreeMap<_, _> = [("Secret a/x".to_string(), found("x", "Secret a/x"))].into();
        let listing = Listing {
            objects: vec![
                (
                    "Secret a/x".into(),
                    Err("annotation fleetscaler.io/dry-run: bad"),
                ),
                ("Secret a/y".into(), Err("holds no kubeconfig")),
                ("Secret a/z".into(), Ok(found("z", "Secret a/z"))),
            ],
            cut: Some("more than 1000 Secrets".into()),
        };
        let (good, problems) = settle("secrets", listing, &before);
        assert_eq!(
            good.keys().collect::<Vec<_>>(),
            ["Secret a/x", "Secret a/z"]
        );
        let told: Vec<(&str, &str)> = problems
            .iter()
            .map(|p| (p.object.as_str(), p.message.as_str()))
            .collect();
        assert_eq!(
            told,
            [
                (
                    "Secret a/x",
                    "annotation fleetscaler.io/dry-run: bad; its last good version is kept"
                ),
                ("Secret a/y", "holds no kubeconfig"),
                ("secrets", "more than 1000 Secrets"),
            ]
        );
        let (gone, _) = settle("secrets", Listing::<&str>::default(), &good);
        assert!(
            gone.is_empty(),
            "a deleted object takes its cluster with it"
        );
    }

    #[test]
    fn the_first_object_keeps_a_name_and_the_total_is_bounded() {
        let secrets: BTreeMap<_, _> = [("Secret a/x".to_string(), found("x", "Secret a/x"))].into();
        let profiles: BTreeMap<_, _> = [
            (
                "ClusterProfile a/x".to_string(),
                found("x", "ClusterProfile a/x"),
            ),
            (
                "ClusterProfile a/y".to_string(),
                found("y", "ClusterProfile a/y"),
            ),
        ]
        .into();
        let (clusters, problems) = combine([&secrets, &profiles]);
        let names: Vec<(&str, &str)> = clusters
            .iter()
            .map(|c| (c.name.as_str(), c.source()))
            .collect();
        assert_eq!(names, [("x", "Secret a/x"), ("y", "ClusterProfile a/y")]);
        assert_eq!(problems[0].object, "ClusterProfile a/x");
        assert!(problems[0].message.contains("already taken by Secret a/x"));

        let many: BTreeMap<_, _> = (0..MAX_CLUSTERS + 2)
            .map(|i| (format!("Secret a/{i:05}"), found(&format!("c{i}"), "s")))
            .collect();
        let (clusters, problems) = combine([&many]);
        assert_eq!(clusters.len(), MAX_CLUSTERS);
        assert_eq!(problems.len(), 2);
        assert!(problems[0].message.contains("more than 1000 clusters"));
    }

    #[test]
    fn fleet_toml_wins_by_name() {
        let file = FleetConfig::parse("[[clusters]]\nname = \"x\"\n", "f").unwrap();
        let (merged, problems) =
            merge(&file, &[found("x", "Secret a/x"), found("y", "Secret a/y")]);
        let names: Vec<(&str, &str)> = merged
            .clusters
            .iter()
            .map(|c| (c.name.as_str(), c.source()))
            .collect();
        assert_eq!(names, [("x", "fleet.toml"), ("y", "Secret a/y")]);
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].object, "Secret a/x");
        assert!(problems[0].message.contains("in fleet.toml, which wins"));
        assert!(merged.validate().is_empty());
    }
}
