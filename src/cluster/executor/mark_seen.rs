//! Waiting for a Machine's delete mark to reach the API server's watchers before its group
//! is lowered.
//!
//! The MachineSet controller chooses the machines to delete from its informer cache when it
//! sees the lower replica count. machine-api-operator's delete policies rank a marked
//! machine above every other one not already being deleted, but a mark its cache does not
//! hold yet is no mark: the controller deletes some other machine, one never drained. The
//! hub watches Machines on its own stream, as the controller does on its, so the lowering
//! and the mark reach the controller on two streams in no set order; the full bench at
//! 1,000 nodes saw the controller take an unmarked machine once in 27 decrements.
//!
//! The API server's watch cache sends a new version of an object to every watcher of its
//! kind at once. A watch at resourceVersion 0 is served from that cache: it starts with the
//! cached state of the machine, then its changes. Once it shows the mark, the cache has it,
//! and the controller's stream has been sent it; only the controller's own processing can
//! still be behind. (A watch from the version the mark was written on would be no good: that
//! is the machine's last change, often older than the cache's window of events, and the
//! server answers 410 Gone.) Upstream's clusterapi provider lowers at once
//! (`MarkMachineForDeletion`, then `SetSize`) and shares the race; this narrows it, for one
//! watch request per removal.

use std::time::Duration;

use futures::StreamExt;
use kube::Api;
use kube::api::{DynamicObject, WatchEvent, WatchParams};

use super::machines::is_marked;
use crate::model::MachineApiGroup;

/// How long a removal waits for its mark to be seen before lowering anyway (as upstream
/// does). The watch cache sends a new version within milliseconds; this is for a server
/// whose watch of Machines is failing.
pub(super) const MARK_SEEN: Duration = Duration::from_secs(10);

/// Whether a watch of machine `name` served from the API server's watch cache shows it
/// marked within `MARK_SEEN`. False when the machine is deleted or the watch fails: the
/// caller lowers anyway.
pub(super) async fn mark_seen(
    api: &Api<DynamicObject>,
    name: &str,
    group: MachineApiGroup,
) -> bool {
    let seconds = u32::try_from(MARK_SEEN.as_secs()).unwrap_or(u32::MAX);
    let params = WatchParams::default()
        .fields(&format!("metadata.name={name}"))
        .timeout(seconds);
    let seen = async {
        let events = api.watch(&params, "0").await.ok()?;
        let mut events = std::pin::pin!(events);
        while let Some(event) = events.next().await {
            match event.ok()? {
                WatchEvent::Added(o) | WatchEvent::Modified(o) if is_marked(&o, group) => {
                    return Some(());
                }
                WatchEvent::Deleted(_) | WatchEvent::Error(_) => return None,
                _ => {}
            }
        }
        None
    };
    matches!(tokio::time::timeout(MARK_SEEN, seen).await, Ok(Some(())))
}
