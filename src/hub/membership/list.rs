//! Reading the inventory: lists in pages, each page within a deadline, stopping at a budget
//! of objects; and a watch from a list's resourceVersion whose first change asks for a new
//! listing sooner than the resync.

use std::fmt::Debug;
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use kube::Api;
use kube::api::{ListParams, WatchEvent, WatchParams};
use serde::de::DeserializeOwned;

use crate::cluster::error::{CallError, call};

/// Objects per page: a Secret may be large (up to the API server's ~1.5 MiB), so pages stay
/// small enough that one page never holds much.
const PAGE: u32 = 50;
/// A watch is asked to end after this long at most (the API server's own limit is lower
/// than kube's check, 295 s); the resync starts a new one anyway.
const MAX_WATCH: Duration = Duration::from_secs(290);

/// Why a source could not be listed.
#[derive(Debug, thiserror::Error)]
pub(super) enum ListError {
    #[error(
        "the management cluster does not serve {what} (is its CustomResourceDefinition installed?)"
    )]
    NotServed { what: String },
    #[error(transparent)]
    Call(#[from] CallError),
}

/// Which objects of a kind: a label selector, a field selector, or both.
#[derive(Clone, Debug, Default)]
pub(super) struct Query {
    pub labels: Option<String>,
    pub fields: Option<String>,
}

/// What a listing returned.
pub(super) struct Listed<K> {
    pub items: Vec<K>,
    /// The list's resourceVersion, to watch from.
    pub version: String,
    /// More objects were there than the budget.
    pub more: bool,
}

/// Every object of `api` that `query` selects, at most `budget`, each page within `timeout`.
/// `what` names the objects in errors (`Secrets labelled fleetscaler.io/cluster`).
pub(super) async fn all<K>(
    api: &Api<K>,
    query: &Query,
    what: &str,
    timeout: Duration,
    budget: usize,
) -> Result<Listed<K>, ListError>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug,
{
    let mut params = ListParams::default().limit(PAGE);
    params.label_selector = query.labels.clone();
    params.field_selector = query.fields.clone();
    let mut listed = Listed {
        items: Vec::new(),
        version: String::new(),
        more: false,
    };
    loop {
        let page = call(|| format!("list {what}"), timeout, api.list(&params))
            .await
            .map_err(|e| match e.status_code() {
                Some(404) => ListError::NotServed {
                    what: what.to_string(),
                },
                _ => ListError::Call(e),
            })?;
        if listed.version.is_empty() {
            listed.version = page.metadata.resource_version.clone().unwrap_or_default();
        }
        let room = budget.saturating_sub(listed.items.len());
        let had = page.items.len();
        listed.items.extend(page.items.into_iter().take(room));
        let next = page.metadata.continue_.filter(|c| !c.is_empty());
        if had > room || (next.is_some() && listed.items.len() == budget) {
            listed.more = true;
            return Ok(listed);
        }
        match next {
            Some(token) => params.continue_token = Some(token),
            None => return Ok(listed),
        }
    }
}

/// How a listing is followed: from its resourceVersion, for at most a resync, the watch
/// accepted within the request timeout.
#[derive(Clone, Copy, Debug)]
pub(super) struct Follow {
    pub resync: Duration,
    pub timeout: Duration,
}

/// Resolves at the first object added, changed or deleted that `query` selects in `api`
/// after `version`. Never resolves if the watch cannot be had in time or ends without one:
/// the resync lists again anyway.
pub(super) fn first_change<K>(
    api: Api<K>,
    query: Query,
    version: String,
    follow: Follow,
) -> BoxFuture<'static, ()>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    Box::pin(async move {
        let secs = follow
            .resync
            .clamp(Duration::from_secs(1), MAX_WATCH)
            .as_secs();
        let mut params = WatchParams::default().timeout(u32::try_from(secs).unwrap_or(290));
        params.label_selector = query.labels;
        params.field_selector = query.fields;
        let started = tokio::time::timeout(follow.timeout, api.watch(&params, &version)).await;
        if let Ok(Ok(stream)) = started {
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                match event {
                    Ok(WatchEvent::Added(_) | WatchEvent::Modified(_) | WatchEvent::Deleted(_)) => {
                        return;
                    }
                    Ok(WatchEvent::Bookmark(_)) => continue,
                    Ok(WatchEvent::Error(_)) | Err(_) => break,
                }
            }
        }
        std::future::pending::<()>().await
    })
}
