//! `GET /api/v1/what-if?set=KEY=VALUE[&set=...][&cluster=NAME...][&clusterAutoscaler=YAML]`:
//! a proposed change evaluated by every cluster's runner on its own cache (read only, no new
//! connection), as `fleetscaler what-if` does from outside. The JSON is documented in
//! docs/plan-format.md ("What-if").

use std::time::Duration;

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::Full;

use super::api::{json, text};
use crate::hub::FleetView;
use crate::hub::what_if::{Proposal, WhatIfError, read_cluster_autoscaler};

/// The longest a cluster is waited for.
const MAX_WAIT: Duration = Duration::from_secs(20);

/// The answer to a what-if, within `deadline` (the request's).
pub(super) async fn answer(
    view: &FleetView,
    query: Option<&str>,
    deadline: Duration,
) -> Response<Full<Bytes>> {
    let (proposal, clusters) = match read_query(query.unwrap_or_default()) {
        Ok(read) => read,
        Err(message) => return text(StatusCode::BAD_REQUEST, &format!("{message}\n")),
    };
    // A cluster that does not answer is reported as such before the request itself times out.
    let wait = deadline
        .saturating_sub(Duration::from_secs(2))
        .clamp(Duration::from_secs(1), MAX_WAIT);
    match view.what_if(proposal, &clusters, wait).await {
        Ok(answer) => json(&answer),
        Err(e @ WhatIfError::Busy) => text(StatusCode::TOO_MANY_REQUESTS, &format!("{e}\n")),
        Err(e @ WhatIfError::UnknownCluster { .. }) => {
            text(StatusCode::NOT_FOUND, &format!("{e}\n"))
        }
    }
}

/// The proposal and the clusters asked for, or what is wrong with the query.
fn read_query(query: &str) -> Result<(Proposal, Vec<String>), String> {
    let (mut sets, mut clusters, mut ca) = (Vec::new(), Vec::new(), None);
    for (key, value) in form_urlencoded::parse(query.as_bytes()) {
        match &*key {
            "set" => sets.push(value.into_owned()),
            "cluster" => clusters.push(value.into_owned()),
            "clusterAutoscaler" if !value.trim().is_empty() => {
                ca = Some(read_cluster_autoscaler(&value, "clusterAutoscaler")?);
            }
            "clusterAutoscaler" => {}
            other => {
                return Err(format!(
                    "unknown parameter {other:?}: use set=KEY=VALUE (repeatable), cluster=NAME and clusterAutoscaler=YAML"
                ));
            }
        }
    }
    let proposal = Proposal::from_assignments(&sets, ca).map_err(|e| format!("set={e}"))?;
    if proposal.is_empty() {
        return Err(
            "nothing proposed: give set=KEY=VALUE (e.g. set=max_nodes_total=30) or clusterAutoscaler=YAML"
                .into(),
        );
    }
    Ok((proposal, clusters))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_is_read_and_its_mistakes_named() {
        let (p, clusters) =
            read_query("set=max_nodes_total%3D30&set=defaults.seed=2&cluster=a&cluster=b").unwrap();
        assert_eq!(p.top.max_nodes_total, Some(30));
        assert_eq!(p.defaults.seed, Some(2));
        assert_eq!(clusters, ["a", "b"]);
        assert_eq!(p.asked, ["max_nodes_total=30", "defaults.seed=2"]);
        let e = read_query("set=max_nodes_totl=3").unwrap_err();
        assert!(e.starts_with("set=max_nodes_totl=3: "), "{e}");
        assert!(read_query("").unwrap_err().starts_with("nothing proposed"));
        assert!(
            read_query("sett=1")
                .unwrap_err()
                .contains("unknown parameter \"sett\"")
        );
        let ca = "apiVersion: autoscaling.openshift.io/v1\nkind: ClusterAutoscaler\nmetadata: {name: default}\nspec: {resourceLimits: {maxNodesTotal: 4}}\n";
        let q: String = form_urlencoded::Serializer::new(String::new())
            .append_pair("clusterAutoscaler", ca)
            .finish();
        let (p, _) = read_query(&q).unwrap();
        assert!(p.cluster_autoscaler.is_some());
        assert_eq!(p.asked.len(), 0);
    }
}
