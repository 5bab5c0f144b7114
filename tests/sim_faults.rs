#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Fault injection, switched at run time through the cluster handle: injected errors
//! (500/429), latency, cut watches, refused and hung connections — and the other clusters of
//! the fleet unaffected.

mod sim_support;

use std::time::{Duration, Instant};

use fleetscaler::sim::faults::{Faults, Outage};
use fleetscaler::sim::fleet::Fleet;
use fleetscaler::sim::settings::{FleetSettings, Shape, Timing};
use futures::TryStreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{ListParams, WatchParams};
use kube::{Api, Error};
use sim_support::client;

async fn two_clusters() -> Fleet {
    Fleet::start(FleetSettings {
        clusters: 2,
        shape: Shape {
            nodes_per_group: 1,
            workloads: false,
            ..Shape::default()
        },
        timing: Timing::fast(),
        ..FleetSettings::default()
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn injected_errors_and_latency() {
    let fleet = two_clusters().await;
    let sim1 = fleet.cluster(1).unwrap();
    let ns: Api<Namespace> = Api::all(client(sim1).await);
    sim1.faults().set(Faults {
        error_rate: 1.0,
        error_code: 500,
        ..Faults::default()
    });
    match ns.get("default").await.unwrap_err() {
        Error::Api(s) => assert_eq!((s.code, s.reason.as_str()), (500, "InternalError")),
        other => panic!("expected 500, got {other:?}"),
    }
    sim1.faults().set(Faults {
        error_rate: 1.0,
        error_code: 429,
        ..Faults::default()
    });
    match ns.get("default").await.unwrap_err() {
        Error::Api(s) => assert_eq!((s.code, s.reason.as_str()), (429, "TooManyRequests")),
        other => panic!("expected 429, got {other:?}"),
    }
    // Half the requests fail, half succeed (the draws are seeded).
    sim1.faults().set(Faults {
        error_rate: 0.5,
        error_code: 500,
        ..Faults::default()
    });
    let mut failures = 0;
    for _ in 0..40 {
        if ns.get("default").await.is_err() {
            failures += 1;
        }
    }
    assert!((5..35).contains(&failures), "{failures} of 40 failed");
    // The other cluster never noticed.
    let other: Api<Namespace> = Api::all(client(fleet.cluster(2).unwrap()).await);
    for _ in 0..10 {
        other.get("default").await.unwrap();
    }
    sim1.faults().set(Faults {
        latency_ms: 300,
        ..Faults::default()
    });
    let start = Instant::now();
    ns.get("default").await.unwrap();
    assert!(start.elapsed() >= Duration::from_millis(300));
    sim1.faults().clear();
    ns.get("default").await.unwrap();
    fleet.shutdown().await;
}

#[tokio::test]
async fn outages_refuse_or_hang_and_recover() {
    let fleet = two_clusters().await;
    let sim1 = fleet.cluster(1).unwrap();
    let ns: Api<Namespace> = Api::all(client(sim1).await);
    ns.get("default").await.unwrap();
    sim1.faults().set(Faults {
        outage: Some(Outage::Refuse),
        ..Faults::default()
    });
    let refused = tokio::time::timeout(Duration::from_secs(10), ns.get("default"))
        .await
        .unwrap();
    assert!(
        !matches!(refused, Ok(_) | Err(Error::Api(_))),
        "{refused:?}"
    );
    sim1.faults().set(Faults {
        outage: Some(Outage::Hang),
        ..Faults::default()
    });
    let hung = tokio::time::timeout(Duration::from_millis(500), ns.get("default")).await;
    assert!(hung.is_err(), "a hung server answered: {hung:?}");
    let other: Api<Namespace> = Api::all(client(fleet.cluster(2).unwrap()).await);
    other.get("default").await.unwrap();
    sim1.faults().clear();
    // The client recovers by itself (hung connections are closed when the outage ends).
    let mut ok = false;
    for _ in 0..20 {
        if ns.get("default").await.is_ok() {
            ok = true;
            break;
        }
    }
    assert!(ok, "no request succeeded after the outage ended");
    fleet.shutdown().await;
}

#[tokio::test]
async fn dropped_watches_end_streams() {
    let fleet = two_clusters().await;
    let sim1 = fleet.cluster(1).unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client(sim1).await, "default");
    let rv = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = Box::pin(
        cms.watch(&WatchParams::default().timeout(60), &rv)
            .await
            .unwrap(),
    );
    sim1.faults().set(Faults {
        drop_watches: true,
        ..Faults::default()
    });
    let next = tokio::time::timeout(Duration::from_secs(5), stream.try_next())
        .await
        .unwrap();
    assert!(matches!(next, Ok(None)), "{next:?}");
    fleet.shutdown().await;
}
