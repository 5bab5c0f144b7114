//! Listing one kind, page by page, each page under the request deadline: the objects are
//! handed over as each page arrives, with their `apiVersion` and `kind` (a list's items come
//! without them, and a dump's objects need them) and without `managedFields` (the API
//! server's bookkeeping, often the larger part of an object, read by nothing here).

use std::time::Duration;

use kube::api::{DynamicObject, ListParams};
use kube::{Api, Client};
use serde_json::Value;

use super::kinds::Source;
use crate::cluster::error::{CallError, Category, call};

/// Objects per page: a few hundred pods is a few MiB, the most held at once.
const PAGE: u32 = 500;
/// A page the API server failed to give (a timeout, a 5xx, throttling) is asked again this
/// many times, after a second each: one hiccup should not cost a dump of a whole cluster.
const RETRIES: u32 = 2;
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// Why a kind could not be listed whole.
#[derive(Debug)]
pub(super) enum ListError {
    /// Not allowed (403) or gone (404) at its first page: nothing of it was handed over, so
    /// it can be left out whole.
    Skipped(CallError),
    /// Anything else, or a refusal after a page was handed over: the kind is incomplete.
    Failed(CallError),
    /// The object could not be handed over (written).
    Write(std::io::Error),
}

/// Lists `source`, handing each object to `each`; how many there were.
pub(super) async fn list(
    client: &Client,
    source: &Source,
    deadline: Duration,
    each: &mut dyn FnMut(Value) -> std::io::Result<()>,
) -> Result<usize, ListError> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &source.resource);
    let mut params = ListParams::default().limit(PAGE);
    if let Some(fields) = &source.fields {
        params = params.fields(fields);
    }
    let mut count = 0;
    loop {
        let page = match page(&api, &params, source, deadline).await {
            Ok(page) => page,
            Err(e) if count == 0 && skippable(&e) => return Err(ListError::Skipped(e)),
            Err(e) => return Err(ListError::Failed(e)),
        };
        for object in page.items {
            let value = with_type(object, source).map_err(ListError::Write)?;
            each(value).map_err(ListError::Write)?;
            count += 1;
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params.continue_token = Some(token),
            None => return Ok(count),
        }
    }
}

fn skippable(e: &CallError) -> bool {
    matches!(e.category(), Category::Forbidden | Category::NotFound)
}

/// One page, asked again after a passing failure.
async fn page(
    api: &Api<DynamicObject>,
    params: &ListParams,
    source: &Source,
    deadline: Duration,
) -> Result<kube::core::ObjectList<DynamicObject>, CallError> {
    let mut tries = 0;
    loop {
        let op = || format!("list {}", source.what);
        match call(op, deadline, api.list(params)).await {
            Err(e) if e.category().is_transient() && tries < RETRIES => {
                tries += 1;
                tokio::time::sleep(RETRY_AFTER).await;
            }
            done => return done,
        }
    }
}

/// The object as a dump holds it: typed, without `managedFields`.
fn with_type(mut object: DynamicObject, source: &Source) -> std::io::Result<Value> {
    object.metadata.managed_fields = None;
    object.types = Some(kube::core::TypeMeta {
        api_version: source.resource.api_version.clone(),
        kind: source.resource.kind.clone(),
    });
    serde_json::to_value(&object).map_err(std::io::Error::other)
}
