//! Request dispatch and the plain verbs: get, list, create, update, patch, delete and
//! delete-collection. Subresources live in `subresources`, watches in `watch`. Every path
//! returns a `Reply`; every failure is an `ApiError`, so a malformed request gets a
//! `Status`, never a panic.

use std::sync::Arc;

use bytes::Bytes;
use http::Method;
use serde_json::Value;

use super::patch::{self, PatchType};
use super::query::{Query, encode_continue};
use super::resources::Resource;
use super::router::{Route, route};
use super::selector::{FieldSelector, LabelSelector, labels_of};
use super::status::{ApiError, success_status};
use super::{discovery, openapi, subresources, table, watch};
use crate::cluster::Cluster;
use crate::registry::{DeleteOptions, WriteMode, key_for};
use crate::store::Stored;

/// A request as the handlers see it: already authenticated, body read.
#[derive(Debug)]
pub struct ApiRequest {
    pub method: Method,
    pub path: String,
    pub query: String,
    pub content_type: String,
    /// The `Accept` header: kubectl asks for server-side printed Tables.
    pub accept: String,
    pub body: Bytes,
    /// `host:port` clients reach this server at (for `/api`'s address list).
    pub server_address: String,
    /// The client's `User-Agent`.
    pub agent: String,
}

/// What to send back.
pub enum Reply {
    Json(u16, Value),
    Raw(u16, Bytes),
    Watch(watch::WatchStream),
}

impl From<ApiError> for Reply {
    fn from(e: ApiError) -> Self {
        Reply::Json(e.code, e.to_status())
    }
}

fn object(code: u16, stored: &Stored) -> Reply {
    Reply::Raw(code, Bytes::copy_from_slice(&stored.bytes))
}

/// Handles one API request against `cluster`.
pub fn handle(cluster: &Arc<Cluster>, req: ApiRequest) -> Reply {
    cluster.requests.record(&req.method, &req.path, &req.query);
    cluster.writes.record(&req.method, &req.path, &req.agent);
    dispatch(cluster, &req).unwrap_or_else(Reply::from)
}

fn dispatch(cluster: &Arc<Cluster>, req: &ApiRequest) -> Result<Reply, ApiError> {
    let read_only = |v: Result<Value, ApiError>| -> Result<Reply, ApiError> {
        if req.method != Method::GET {
            return Err(ApiError::method_not_allowed(format!(
                "the server does not allow this method on the requested resource: {}",
                req.method
            )));
        }
        v.map(|v| Reply::Json(200, v))
    };
    match route(&req.path) {
        Route::Version => read_only(Ok(discovery::version())),
        Route::Health => Ok(Reply::Raw(200, Bytes::from_static(b"ok"))),
        Route::OpenApiIndex => read_only(Ok(openapi::index())),
        Route::OpenApi(path) => read_only(openapi::document(&path)),
        Route::CoreVersions => read_only(Ok(discovery::core_versions(&req.server_address))),
        Route::Groups => read_only(Ok(discovery::groups())),
        Route::Group(g) => read_only(discovery::group(&g)),
        Route::ResourceList { group, version } => {
            read_only(discovery::resource_list(&group, &version))
        }
        Route::UnknownResource(_) | Route::NotFound => Err(discovery::not_found()),
        Route::Collection {
            resource,
            namespace,
        } => {
            check_scope(resource, namespace.as_deref(), false)?;
            let query = Query::parse(&req.query)?;
            match req.method {
                Method::GET if query.watch => watch::start(
                    cluster,
                    resource,
                    namespace,
                    &query,
                    table::wanted(&req.accept),
                )
                .map(Reply::Watch),
                Method::GET => list(
                    cluster,
                    resource,
                    namespace.as_deref(),
                    &query,
                    table::wanted(&req.accept),
                ),
                Method::POST => create(cluster, resource, namespace.as_deref(), &query, &req.body),
                Method::DELETE => {
                    delete_collection(cluster, resource, namespace.as_deref(), &query, &req.body)
                }
                _ => Err(ApiError::method_not_allowed(format!(
                    "{} is not allowed on a collection",
                    req.method
                ))),
            }
        }
        Route::Object {
            resource,
            namespace,
            name,
        } => {
            check_scope(resource, namespace.as_deref(), true)?;
            let query = Query::parse(&req.query)?;
            let key = key_for(resource, namespace.as_deref().unwrap_or_default(), &name);
            match req.method {
                Method::GET => get(cluster, resource, &key, table::wanted(&req.accept)),
                Method::PUT => update(cluster, resource, &key, &query, &req.body, WriteMode::Main),
                Method::PATCH => patch(cluster, resource, &key, req, &query, WriteMode::Main),
                Method::DELETE => delete(cluster, resource, &key, &query, &req.body),
                _ => Err(ApiError::method_not_allowed(format!(
                    "{} is not allowed on an object",
                    req.method
                ))),
            }
        }
        Route::Subresource {
            resource,
            namespace,
            name,
            sub,
        } => {
            check_scope(resource, namespace.as_deref(), true)?;
            let query = Query::parse(&req.query)?;
            let key = key_for(resource, namespace.as_deref().unwrap_or_default(), &name);
            let def = resource.def();
            match (sub.as_str(), &req.method) {
                ("status", &Method::GET) if def.status => get(cluster, resource, &key, false),
                ("status", &Method::PUT) if def.status => update(
                    cluster,
                    resource,
                    &key,
                    &query,
                    &req.body,
                    WriteMode::Status,
                ),
                ("status", &Method::PATCH) if def.status => {
                    patch(cluster, resource, &key, req, &query, WriteMode::Status)
                }
                ("scale", _) if def.scale => subresources::scale(cluster, resource, &key, req),
                ("binding", &Method::POST) if resource == Resource::Pods => {
                    subresources::bind(cluster, &key, &req.body)
                }
                ("eviction", &Method::POST) if resource == Resource::Pods => {
                    subresources::evict(cluster, &key, &req.body)
                }
                _ => Err(discovery::not_found()),
            }
        }
    }
}

/// Namespaced resources need a namespace for single objects, cluster-scoped ones refuse one.
fn check_scope(resource: Resource, namespace: Option<&str>, single: bool) -> Result<(), ApiError> {
    let namespaced = resource.def().namespaced;
    if (!namespaced && namespace.is_some()) || (namespaced && single && namespace.is_none()) {
        return Err(discovery::not_found());
    }
    Ok(())
}

fn refuse_dry_run(query: &Query) -> Result<(), ApiError> {
    if query.dry_run {
        return Err(ApiError::bad_request(
            "dryRun is not supported by the simulated API server",
        ));
    }
    Ok(())
}

/// Parses a JSON request body.
pub fn parse_body(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(format!(
            "the body of the request could not be decoded as JSON: {e}"
        ))
    })
}

fn get(
    cluster: &Arc<Cluster>,
    resource: Resource,
    key: &crate::store::Key,
    as_table: bool,
) -> Result<Reply, ApiError> {
    let def = resource.def();
    let Some(stored) = cluster.lock().store.get(resource, key).cloned() else {
        return Err(ApiError::not_found(def.group, def.plural, &key.name));
    };
    if as_table {
        let meta = serde_json::json!({"resourceVersion": stored.rv.to_string()});
        return Ok(Reply::Json(
            200,
            table::render(resource, &[&stored.bytes[..]], meta),
        ));
    }
    Ok(object(200, &stored))
}

/// The objects a list or delete-collection selects, and the current resourceVersion.
/// The objects of one list request (one page of it, with `limit`).
struct Selected {
    items: Vec<Arc<Stored>>,
    rv: u64,
    /// More objects follow the page.
    more: bool,
    /// How many: the API server counts them only for a list with no selector
    /// (`remainingItemCount`).
    remaining: Option<usize>,
}

fn select(
    cluster: &Arc<Cluster>,
    resource: Resource,
    namespace: Option<&str>,
    query: &Query,
) -> Result<Selected, ApiError> {
    let labels = LabelSelector::parse(&query.label_selector)?;
    let fields = FieldSelector::parse(&query.field_selector, resource)?;
    let counted = query.limit.is_some() && labels.is_empty() && fields.is_empty();
    // Field values are indexed, so field filtering happens under the lock; labels need the
    // object parsed and are checked after it is released.
    let (candidates, rv, from_here) = {
        let state = cluster.lock();
        let candidates: Vec<Arc<Stored>> = match fields.required("metadata.name") {
            Some(name)
                if query.continue_after.is_none()
                    && (namespace.is_some() || !resource.def().namespaced) =>
            {
                let key = key_for(resource, namespace.unwrap_or_default(), name);
                state
                    .store
                    .get(resource, &key)
                    .filter(|o| fields.matches(resource, o))
                    .cloned()
                    .into_iter()
                    .collect()
            }
            // A page needs one object past its limit (to know there is more), unless labels
            // are still to be checked: a list in pages then costs what it returns.
            _ => {
                let enough = match (query.limit, labels.is_empty()) {
                    (Some(limit), true) => limit.saturating_add(1),
                    _ => usize::MAX,
                };
                state
                    .store
                    .range(resource, namespace, query.continue_after.as_ref())
                    .filter(|o| fields.matches(resource, o))
                    .take(enough)
                    .cloned()
                    .collect()
            }
        };
        let from_here = counted.then(|| {
            let after = query.continue_after.as_ref();
            state.store.range(resource, namespace, after).count()
        });
        (candidates, state.store.rv(), from_here)
    };
    let mut items = Vec::new();
    let mut more = false;
    for o in candidates {
        if !labels.is_empty() && !labels.matches(&labels_of(&o.bytes)) {
            continue;
        }
        if query.limit.is_some_and(|limit| items.len() == limit) {
            more = true;
            break;
        }
        items.push(o);
    }
    let remaining = from_here
        .filter(|_| more)
        .map(|n| n.saturating_sub(items.len()));
    Ok(Selected {
        items,
        rv,
        more,
        remaining,
    })
}

fn list(
    cluster: &Arc<Cluster>,
    resource: Resource,
    namespace: Option<&str>,
    query: &Query,
    as_table: bool,
) -> Result<Reply, ApiError> {
    let Selected {
        items,
        rv,
        more,
        remaining,
    } = select(cluster, resource, namespace, query)?;
    let def = resource.def();
    let mut meta = serde_json::json!({"resourceVersion": rv.to_string()});
    if more && let Some(last) = items.last() {
        meta["continue"] = Value::String(encode_continue(&last.key));
    }
    if let Some(remaining) = remaining {
        meta["remainingItemCount"] = remaining.into();
    }
    if as_table {
        let objects: Vec<&[u8]> = items.iter().map(|o| &o.bytes[..]).collect();
        return Ok(Reply::Json(200, table::render(resource, &objects, meta)));
    }
    let head = format!(
        r#"{{"kind":"{}List","apiVersion":"{}","metadata":{},"items":["#,
        def.kind,
        resource.api_version(),
        meta
    );
    let size = head.len() + items.iter().map(|o| o.bytes.len() + 1).sum::<usize>() + 2;
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(head.as_bytes());
    for (i, o) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(&o.bytes);
    }
    out.extend_from_slice(b"]}");
    Ok(Reply::Raw(200, Bytes::from(out)))
}

fn create(
    cluster: &Arc<Cluster>,
    resource: Resource,
    namespace: Option<&str>,
    query: &Query,
    body: &[u8],
) -> Result<Reply, ApiError> {
    refuse_dry_run(query)?;
    let value = parse_body(body)?;
    strict(resource, query, &value)?;
    let namespace = namespace
        .map(str::to_string)
        .or_else(|| value["metadata"]["namespace"].as_str().map(str::to_string))
        .unwrap_or_else(|| "default".to_string());
    let stored = cluster.lock().create(resource, &namespace, value)?;
    Ok(object(201, &stored))
}

fn update(
    cluster: &Arc<Cluster>,
    resource: Resource,
    key: &crate::store::Key,
    query: &Query,
    body: &[u8],
    mode: WriteMode,
) -> Result<Reply, ApiError> {
    refuse_dry_run(query)?;
    let value = parse_body(body)?;
    strict(resource, query, &value)?;
    let stored = cluster.lock().update(resource, key, value, mode)?;
    Ok(object(200, &stored))
}

fn patch(
    cluster: &Arc<Cluster>,
    resource: Resource,
    key: &crate::store::Key,
    req: &ApiRequest,
    query: &Query,
    mode: WriteMode,
) -> Result<Reply, ApiError> {
    refuse_dry_run(query)?;
    let patch_type = PatchType::from_content_type(&req.content_type)?;
    let mut state = cluster.lock();
    let def = resource.def();
    let current = match state.store.get(resource, key) {
        Some(o) => o.value(),
        None if patch_type == PatchType::Apply && mode == WriteMode::Main => {
            // Server-side apply creates what does not exist yet.
            let created =
                patch::apply(&serde_json::json!({"metadata": {}}), patch_type, &req.body)?;
            let stored = state.create(resource, &key.namespace, created)?;
            return Ok(object(201, &stored));
        }
        None => return Err(ApiError::not_found(def.group, def.plural, &key.name)),
    };
    let patched = patch::apply(&current, patch_type, &req.body)?;
    strict(resource, query, &patched)?;
    let stored = state.update(resource, key, patched, mode)?;
    Ok(object(200, &stored))
}

/// Under `fieldValidation=Strict`, a field the type does not have is refused.
fn strict(resource: Resource, query: &Query, value: &serde_json::Value) -> Result<(), ApiError> {
    if query.strict {
        super::validation::check_strict(resource, value)?;
    }
    Ok(())
}

fn delete_options(query: &Query, body: &[u8]) -> Result<DeleteOptions, ApiError> {
    let mut opts: DeleteOptions = if body.iter().all(u8::is_ascii_whitespace) {
        DeleteOptions::default()
    } else {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("invalid DeleteOptions: {e}")))?
    };
    if opts.grace_period_seconds.is_none() {
        opts.grace_period_seconds = query.grace_period_seconds;
    }
    Ok(opts)
}

fn delete(
    cluster: &Arc<Cluster>,
    resource: Resource,
    key: &crate::store::Key,
    query: &Query,
    body: &[u8],
) -> Result<Reply, ApiError> {
    refuse_dry_run(query)?;
    let opts = delete_options(query, body)?;
    let stored = cluster.lock().delete(resource, key, &opts)?;
    Ok(object(200, &stored))
}

fn delete_collection(
    cluster: &Arc<Cluster>,
    resource: Resource,
    namespace: Option<&str>,
    query: &Query,
    body: &[u8],
) -> Result<Reply, ApiError> {
    refuse_dry_run(query)?;
    let opts = delete_options(query, body)?;
    let Selected { items, .. } = select(
        cluster,
        resource,
        namespace,
        &Query {
            limit: None,
            ..query.clone()
        },
    )?;
    let mut state = cluster.lock();
    for o in items {
        // Objects deleted meanwhile are simply skipped.
        let _ = state.delete(resource, &o.key, &opts);
    }
    Ok(Reply::Json(200, success_status(200)))
}
