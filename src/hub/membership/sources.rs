//! Listing each source on the management cluster into a [`Listing`]: the objects and what
//! each reads as, with the watches that tell when to list again. Every call has a deadline,
//! and a source reads at most [`MAX_CLUSTERS`] objects.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};

use super::list::{self, ListError, Query};
use super::managed::TokenError;
use super::merge::Listing;
use super::task::Watch;
use super::{MAX_CLUSTERS, ReadError};
use super::{managed, profiles, secrets};
use crate::cluster::error::call;
use crate::config::membership::MembershipConfig;

/// Token Secrets of ManagedClusters read at once.
const TOKEN_READS: usize = 8;

type Listed = Result<(Listing<ReadError>, Vec<Watch>), ListError>;

/// One API per namespace of `[membership] namespaces`, or one for all; with its name.
fn apis<K>(client: &kube::Client, namespaces: &[String]) -> Vec<(Api<K>, String)>
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>,
{
    if namespaces.is_empty() {
        return vec![(Api::all(client.clone()), "every namespace".into())];
    }
    namespaces
        .iter()
        .map(|ns| {
            (
                Api::namespaced(client.clone(), ns),
                format!("namespace {ns}"),
            )
        })
        .collect()
}

/// The same for a custom resource.
fn dynamic_apis(
    client: &kube::Client,
    namespaces: &[String],
    ar: &ApiResource,
) -> Vec<(Api<DynamicObject>, String)> {
    if namespaces.is_empty() {
        return vec![(Api::all_with(client.clone(), ar), "every namespace".into())];
    }
    namespaces
        .iter()
        .map(|ns| {
            (
                Api::namespaced_with(client.clone(), ns, ar),
                format!("namespace {ns}"),
            )
        })
        .collect()
}

fn follow(config: &MembershipConfig, timeout: Duration) -> list::Follow {
    list::Follow {
        resync: config.resync,
        timeout,
    }
}

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// Secrets carrying the membership label, and Argo CD's cluster Secrets when asked.
pub(super) async fn secrets(
    client: &kube::Client,
    config: &MembershipConfig,
    timeout: Duration,
) -> Listed {
    let source = &config.secrets;
    let mut selectors = vec![source.label.clone()];
    if source.argocd {
        selectors.push(format!(
            "{}={}",
            secrets::ARGOCD_LABEL,
            secrets::ARGOCD_CLUSTER
        ));
    }
    let mut found: BTreeMap<String, Secret> = BTreeMap::new();
    let mut watches = Vec::new();
    let mut cut = None;
    for (api, place) in apis::<Secret>(client, &config.namespaces) {
        for selector in &selectors {
            let query = Query {
                labels: Some(selector.clone()),
                fields: None,
            };
            let what = format!("Secrets labelled {selector} in {place}");
            let budget = MAX_CLUSTERS.saturating_sub(found.len());
            let listed = list::all(&api, &query, &what, timeout, budget).await?;
            if listed.more {
                cut = Some(format!(
                    "more than {MAX_CLUSTERS} Secrets: the rest are not read"
                ));
            }
            for secret in listed.items {
                found.insert(secrets::object(&secret), secret);
            }
            watches.push(list::first_change(
                api.clone(),
                query,
                listed.version,
                follow(config, timeout),
            ));
        }
    }
    let objects = found
        .into_iter()
        .map(|(object, secret)| (object, secrets::read(&secret, source).map_err(Into::into)))
        .collect();
    Ok((Listing { objects, cut }, watches))
}

/// ClusterProfiles, through the access providers fleet.toml has plugins for.
pub(super) async fn profiles(
    client: &kube::Client,
    config: &MembershipConfig,
    timeout: Duration,
) -> Listed {
    let ar = resource(
        profiles::GROUP,
        profiles::VERSION,
        profiles::KIND,
        profiles::PLURAL,
    );
    let mut objects = Vec::new();
    let mut watches = Vec::new();
    let mut cut = None;
    for (api, place) in dynamic_apis(client, &config.namespaces, &ar) {
        let what = format!("{}.{} in {place}", profiles::PLURAL, profiles::GROUP);
        let budget = MAX_CLUSTERS.saturating_sub(objects.len());
        let listed = list::all(&api, &Query::default(), &what, timeout, budget).await?;
        if listed.more {
            cut = Some(format!(
                "more than {MAX_CLUSTERS} ClusterProfiles: the rest are not read"
            ));
        }
        for profile in &listed.items {
            objects.push((
                profiles::object(profile),
                profiles::read(profile, &config.cluster_profiles).map_err(Into::into),
            ));
        }
        watches.push(list::first_change(
            api,
            Query::default(),
            listed.version,
            follow(config, timeout),
        ));
    }
    Ok((Listing { objects, cut }, watches))
}

/// ManagedClusters, each with its ManagedServiceAccount's token Secret.
pub(super) async fn managed(
    client: &kube::Client,
    config: &MembershipConfig,
    timeout: Duration,
) -> Listed {
    let clusters_ar = resource(
        managed::CLUSTER_GROUP,
        managed::CLUSTER_VERSION,
        managed::CLUSTER_KIND,
        managed::CLUSTER_PLURAL,
    );
    let msa_ar = resource(
        managed::MSA_GROUP,
        managed::MSA_VERSION,
        managed::MSA_KIND,
        managed::MSA_PLURAL,
    );
    let clusters_api: Api<DynamicObject> = Api::all_with(client.clone(), &clusters_ar);
    let what = format!("{}.{}", managed::CLUSTER_PLURAL, managed::CLUSTER_GROUP);
    let clusters = list::all(
        &clusters_api,
        &Query::default(),
        &what,
        timeout,
        MAX_CLUSTERS,
    )
    .await?;
    let sa = &config.managed_clusters.service_account;
    let msa_api: Api<DynamicObject> = Api::all_with(client.clone(), &msa_ar);
    let msa_query = Query {
        labels: None,
        fields: Some(format!("metadata.name={sa}")),
    };
    let what = format!("{}.{} named {sa}", managed::MSA_PLURAL, managed::MSA_GROUP);
    let accounts = list::all(&msa_api, &msa_query, &what, timeout, MAX_CLUSTERS).await?;
    let by_namespace: BTreeMap<String, DynamicObject> = accounts
        .items
        .into_iter()
        .filter_map(|a| Some((a.metadata.namespace.clone()?, a)))
        .collect();
    // Collected first: a lazy map's closure in the task's future trips the compiler's
    // check that the future is Send for every lifetime.
    let mut reads = Vec::with_capacity(clusters.items.len());
    for cluster in &clusters.items {
        let name = cluster.metadata.name.as_deref().unwrap_or_default();
        reads.push(read_managed(
            client,
            cluster,
            by_namespace.get(name),
            sa,
            timeout,
        ));
    }
    let objects = futures::stream::iter(reads)
        .buffered(TOKEN_READS)
        .collect::<Vec<_>>()
        .await;
    let cut = clusters
        .more
        .then(|| format!("more than {MAX_CLUSTERS} ManagedClusters: the rest are not read"));
    let watches = vec![
        list::first_change(
            clusters_api,
            Query::default(),
            clusters.version,
            follow(config, timeout),
        ),
        list::first_change(
            msa_api,
            msa_query,
            accounts.version,
            follow(config, timeout),
        ),
    ];
    Ok((Listing { objects, cut }, watches))
}

async fn read_managed(
    client: &kube::Client,
    cluster: &DynamicObject,
    msa: Option<&DynamicObject>,
    sa: &str,
    timeout: Duration,
) -> (String, Result<crate::config::ClusterConfig, ReadError>) {
    let name = cluster.metadata.name.clone().unwrap_or_default();
    let read = match token(client, msa, &name, sa, timeout).await {
        Ok(secret) => managed::read(cluster, Ok(&secret)),
        Err(e) => managed::read(cluster, Err(e)),
    };
    (managed::object(cluster), read.map_err(Into::into))
}

/// The token Secret of the ManagedServiceAccount `sa` in `namespace`, or why there is none.
async fn token(
    client: &kube::Client,
    msa: Option<&DynamicObject>,
    namespace: &str,
    sa: &str,
    timeout: Duration,
) -> Result<Secret, TokenError> {
    let name = managed::token_secret_name(msa, namespace, sa)?;
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let op = || format!("get Secret {namespace}/{name}");
    call(op, timeout, api.get_opt(&name))
        .await?
        .ok_or_else(|| TokenError::NoSecret {
            namespace: namespace.to_string(),
            name,
            account: sa.to_string(),
        })
}
