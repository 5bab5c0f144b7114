use serde_json::json;
use tokio::time::Instant;

use super::super::{Cache, Change, Kind, Object, Update, WatchError};

fn update(kind: Kind, change: Change) -> Update {
    Update { kind, change }
}

fn claim(name: &str, volume: &str) -> Object {
    Object::PersistentVolumeClaim(Box::new(
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "db"},
            "spec": {"volumeName": volume, "storageClassName": "gp3"},
            "status": {"phase": "Bound"}
        }))
        .unwrap(),
    ))
}

fn volume(name: &str, operator: &str) -> Object {
    Object::PersistentVolume(Box::new(
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-1"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "topology.ebs.csi.aws.com/zone", "operator": operator,
                     "values": ["us-east-1b"]}]}]}}},
            "status": {"phase": "Bound"}
        }))
        .unwrap(),
    ))
}

fn class(name: &str) -> Object {
    Object::StorageClass(Box::new(
        serde_json::from_value(json!({
            "metadata": {"name": name}, "provisioner": "ebs.csi.aws.com",
            "volumeBindingMode": "WaitForFirstConsumer"
        }))
        .unwrap(),
    ))
}

fn csi_node(name: &str) -> Object {
    Object::CsiNode(Box::new(
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"drivers": [{"name": "ebs.csi.aws.com", "nodeID": "i-1",
                "allocatable": {"count": 25}, "topologyKeys": ["topology.ebs.csi.aws.com/zone"]}]}
        }))
        .unwrap(),
    ))
}

fn list(c: &mut Cache, kind: Kind, objects: Vec<Object>) {
    let now = Instant::now();
    c.apply(update(kind, Change::Init), now);
    for o in objects {
        c.apply(update(kind, Change::InitApply(o)), now);
    }
    c.apply(update(kind, Change::InitDone), now);
}

/// Volumes are simulated from the moment claims, volumes and classes have all listed, with
/// or without CSINodes; each object reaches the snapshot's storage and leaves it.
#[tokio::test]
async fn storage_is_listed_once_claims_volumes_and_classes_are() {
    let mut c = Cache::new(
        &[
            Kind::Pod,
            Kind::PersistentVolumeClaim,
            Kind::PersistentVolume,
        ]
        .into_iter()
        .chain([Kind::StorageClass, Kind::CsiNode])
        .collect::<Vec<_>>(),
    );
    list(&mut c, Kind::Pod, vec![]);
    list(
        &mut c,
        Kind::PersistentVolumeClaim,
        vec![claim("data-0", "pv-0")],
    );
    list(&mut c, Kind::PersistentVolume, vec![volume("pv-0", "In")]);
    assert!(!c.snapshot().storage.listed, "classes have not listed yet");
    list(&mut c, Kind::StorageClass, vec![class("gp3")]);
    assert!(c.snapshot().storage.listed, "CSINodes are not waited for");
    assert!(!c.is_synced());
    list(&mut c, Kind::CsiNode, vec![csi_node("n1")]);
    assert!(c.is_synced());
    let s = &c.snapshot().storage;
    assert_eq!(
        (s.claims.len(), s.volumes.len(), s.classes.len()),
        (1, 1, 1)
    );
    assert_eq!(s.csi_nodes[0].drivers[0].attach_limit, Some(25));
    assert_eq!(s.claims[0].volume_name.as_deref(), Some("pv-0"));
    assert_eq!(c.stats().other, 4);

    // Storage changes wait for the scan: none wakes the runner.
    let now = Instant::now();
    assert!(!c.apply(update(Kind::StorageClass, Change::Apply(class("io2"))), now));
    assert!(!c.apply(
        update(Kind::PersistentVolume, Change::Delete(volume("pv-0", "In"))),
        now
    ));
    assert!(c.snapshot().storage.volumes.is_empty());
    // A relist forgets the claims deleted while the watch was down.
    list(
        &mut c,
        Kind::PersistentVolumeClaim,
        vec![claim("data-1", "pv-1")],
    );
    let names: Vec<&str> = c
        .snapshot()
        .storage
        .claims
        .iter()
        .map(|c| &*c.key.name)
        .collect();
    assert_eq!(names, ["data-1"]);
    assert_eq!(c.snapshot().storage.classes.len(), 2);
}

/// A cluster that does not serve classes (the cache was never told to wait for them)
/// leaves volumes unsimulated, whatever else listed.
#[tokio::test]
async fn storage_is_not_listed_without_a_served_kind() {
    let mut c = Cache::new(&[Kind::PersistentVolumeClaim, Kind::PersistentVolume]);
    list(
        &mut c,
        Kind::PersistentVolumeClaim,
        vec![claim("data-0", "pv-0")],
    );
    list(&mut c, Kind::PersistentVolume, vec![]);
    assert!(c.is_synced());
    assert!(!c.snapshot().storage.listed);
    assert_eq!(c.snapshot().storage.claims.len(), 1);
}

/// Claims the hub may not list: the cache is synced without them and volumes are not
/// simulated; the watch's refusals, repeated as it keeps trying, neither bring the kind back
/// as one to wait for nor make the cache stale.
#[tokio::test(start_paused = true)]
async fn a_refused_kind_stays_given_up_however_often_it_is_refused_again() {
    let kinds = [
        Kind::Pod,
        Kind::PersistentVolumeClaim,
        Kind::PersistentVolume,
    ];
    let mut c = Cache::new(&[&kinds[..], &[Kind::StorageClass]].concat());
    list(&mut c, Kind::Pod, vec![]);
    list(&mut c, Kind::PersistentVolume, vec![]);
    list(&mut c, Kind::StorageClass, vec![]);
    let refused = WatchError {
        message: "persistentvolumeclaims is forbidden".into(),
        forbidden: true,
    };
    let start = Instant::now();
    c.apply(
        update(Kind::PersistentVolumeClaim, Change::Error(refused.clone())),
        start,
    );
    c.give_up_on(Kind::PersistentVolumeClaim, &refused.message);
    assert!(c.is_synced());
    assert!(!c.snapshot().storage.listed);
    for _ in 0..5 {
        tokio::time::advance(std::time::Duration::from_secs(30)).await;
        let now = Instant::now();
        c.apply(
            update(Kind::PersistentVolumeClaim, Change::Error(refused.clone())),
            now,
        );
    }
    assert!(c.is_synced(), "{:?}", c.unsynced());
    assert!(!c.is_failing(Kind::PersistentVolumeClaim));
    assert_eq!(
        c.stale(Instant::now(), std::time::Duration::from_secs(60)),
        None
    );
    assert!(!c.snapshot().storage.listed);
}

/// A volume whose node affinity cannot be read is named in the problems and not kept as it
/// was: its claim's pods must not be placed by an affinity no longer true. It stays as an
/// unreadable placeholder (as a dump keeps it), so that they wait for it, named with why.
#[tokio::test]
async fn an_unreadable_volume_is_reported_and_kept_unreadable() {
    let mut c = Cache::new(&[Kind::PersistentVolume]);
    let now = Instant::now();
    c.apply(
        update(Kind::PersistentVolume, Change::Apply(volume("pv-0", "In"))),
        now,
    );
    assert_eq!(c.snapshot().storage.volumes.len(), 1);
    c.apply(
        update(
            Kind::PersistentVolume,
            Change::Apply(volume("pv-0", "Near")),
        ),
        now,
    );
    let volumes = &c.snapshot().storage.volumes;
    assert_eq!(volumes.len(), 1);
    let why = volumes[0].unreadable.as_deref().unwrap_or_default();
    assert!(why.starts_with("spec.nodeAffinity.required"), "{why}");
    let problems: Vec<String> = c.problems().collect();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].starts_with("persistentvolumes pv-0: spec.nodeAffinity.required"),
        "{problems:?}"
    );
    c.apply(
        update(Kind::PersistentVolume, Change::Apply(volume("pv-0", "In"))),
        now,
    );
    assert_eq!(c.problems().count(), 0);
    assert_eq!(c.snapshot().storage.volumes.len(), 1);
    assert!(c.snapshot().storage.volumes[0].unreadable.is_none());
}

/// A watch that delivers the wrong kind is a problem, never a panic or a misfiled object.
#[tokio::test]
async fn a_storage_watch_delivering_another_kind_is_a_problem() {
    let mut c = Cache::new(&[Kind::StorageClass]);
    c.apply(
        update(Kind::StorageClass, Change::Apply(csi_node("n1"))),
        Instant::now(),
    );
    assert!(c.snapshot().storage.csi_nodes.is_empty() && c.snapshot().storage.classes.is_empty());
    let problems: Vec<String> = c.problems().collect();
    assert!(
        problems[0].contains("delivered another kind"),
        "{problems:?}"
    );
}
