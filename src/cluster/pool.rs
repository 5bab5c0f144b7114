//! The fleet's engine passes share a bounded pool of turns, sized to the cores: a pass is CPU
//! work, so running more at once than there are cores only makes every one of them slower.
//!
//! Passes that answer a pod just turned unschedulable go first (`Urgency::NewPending`): that
//! wait is the one a user sees, the time from a pending pod to its nodes being bought. The
//! others (a node turned ready, a machine's progress, the scan interval) decide what
//! changed a little later, and a cluster whose pass waits for its turn gathers what happens
//! meanwhile into that one pass. Within each class turns go first come, first served, so a
//! cluster that keeps waking cannot starve the others, and a pass that has waited
//! `OVERDUE` goes first whatever it answers, so a fleet busy with pending pods still looks
//! at everything else. How long a pass waited for its turn is measured
//! (`fleetscaler_pass_queue_seconds`).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

/// The longest a pass waits behind passes for pending pods before it goes first.
const OVERDUE: Duration = Duration::from_secs(2);

/// What a pass answers, for its place in the queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Urgency {
    /// A pod turned unschedulable since the cluster's last pass.
    NewPending,
    /// Anything else.
    Other,
}

#[derive(Clone, Debug)]
pub struct PassPool {
    queue: Arc<Mutex<Queue>>,
    size: usize,
}

#[derive(Debug)]
struct Queue {
    free: usize,
    new_pending: VecDeque<Waiter>,
    other: VecDeque<Waiter>,
}

#[derive(Debug)]
struct Waiter {
    since: Instant,
    give: oneshot::Sender<Grant>,
}

/// A turn held; it goes to the next waiting pass when dropped, wherever it is dropped (a
/// waiter that gave up with its turn already sent drops it unopened).
#[derive(Debug)]
struct Grant {
    queue: Option<Arc<Mutex<Queue>>>,
}

impl Drop for Grant {
    fn drop(&mut self) {
        if let Some(queue) = self.queue.take() {
            hand_on(&queue);
        }
    }
}

/// A pass's turn; the next waiting pass gets it when this is dropped.
#[derive(Debug)]
pub struct Turn {
    _grant: Option<Grant>,
    /// How long the pass waited for it.
    pub waited: Duration,
}

impl PassPool {
    /// A pool of `size` turns; 0 means the number of cores.
    pub fn new(size: usize) -> Self {
        let size = match size {
            0 => std::thread::available_parallelism().map_or(2, usize::from),
            n => n,
        };
        let queue = Queue {
            free: size,
            new_pending: VecDeque::new(),
            other: VecDeque::new(),
        };
        PassPool {
            queue: Arc::new(Mutex::new(queue)),
            size,
        }
    }

    pub fn size(&self) -> usize {
        self.size
    }

    /// Waits for a turn. Dropping the wait gives up its place (and a turn already sent to it).
    pub async fn turn(&self, urgency: Urgency) -> Turn {
        let asked = Instant::now();
        let given = {
            let mut q = lock(&self.queue);
            if q.free > 0 {
                q.free -= 1;
                None
            } else {
                let (give, given) = oneshot::channel();
                let waiter = Waiter { since: asked, give };
                match urgency {
                    Urgency::NewPending => q.new_pending.push_back(waiter),
                    Urgency::Other => q.other.push_back(waiter),
                }
                Some(given)
            }
        };
        let grant = match given {
            None => Some(Grant {
                queue: Some(self.queue.clone()),
            }),
            // Err only if the pool itself is gone: the pass then runs unqueued.
            Some(given) => given.await.ok(),
        };
        Turn {
            _grant: grant,
            waited: asked.elapsed(),
        }
    }
}

impl Queue {
    /// The waiter that gets the next turn.
    fn next(&mut self, now: Instant) -> Option<Waiter> {
        let overdue = self
            .other
            .front()
            .is_some_and(|w| now.saturating_duration_since(w.since) >= OVERDUE);
        if overdue || self.new_pending.is_empty() {
            self.other.pop_front()
        } else {
            self.new_pending.pop_front()
        }
    }
}

/// A turn came back: to the next waiter still waiting, else to the pool.
fn hand_on(queue: &Arc<Mutex<Queue>>) {
    let mut q = lock(queue);
    let now = Instant::now();
    while let Some(waiter) = q.next(now) {
        let grant = Grant {
            queue: Some(queue.clone()),
        };
        match waiter.give.send(grant) {
            Ok(()) => return,
            // The waiter gave up: its turn, unsent, must not hand itself on under this lock.
            Err(mut unsent) => unsent.queue = None,
        }
    }
    q.free += 1;
}

/// The queue stays consistent whatever panicked while holding it (nothing there panics).
fn lock(queue: &Mutex<Queue>) -> MutexGuard<'_, Queue> {
    queue
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Default for PassPool {
    /// A pool for one cluster on its own (tests, tools): one turn per core.
    fn default() -> Self {
        PassPool::new(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::mpsc;

    /// Starts a pass asking for a turn; it reports `id` once it has it, and holds the turn
    /// until told to end.
    fn pass(
        pool: &PassPool,
        id: &'static str,
        urgency: Urgency,
        got: &mpsc::UnboundedSender<&'static str>,
    ) -> oneshot::Sender<()> {
        let (end, ended) = oneshot::channel::<()>();
        let (pool, got) = (pool.clone(), got.clone());
        tokio::spawn(async move {
            let turn = pool.turn(urgency).await;
            let _ = got.send(id);
            let _ = ended.await;
            drop(turn);
        });
        end
    }

    #[tokio::test(flavor = "current_thread")]
    async fn turns_are_bounded_and_given_in_order() {
        let pool = PassPool::new(1);
        assert_eq!(pool.size(), 1);
        let first = pool.turn(Urgency::Other).await;
        let (tx, mut rx) = mpsc::unbounded_channel();
        let mut ends = Vec::new();
        for id in ["a", "b", "c"] {
            ends.push(pass(&pool, id, Urgency::Other, &tx));
            // One thread: yielding runs the task up to its wait, before the next asks.
            tokio::task::yield_now().await;
        }
        assert!(
            rx.try_recv().is_err(),
            "nobody runs while the one turn is held"
        );
        drop(first);
        let mut order = Vec::new();
        for end in ends {
            order.push(rx.recv().await.unwrap());
            let _ = end.send(());
        }
        assert_eq!(order, ["a", "b", "c"], "first come, first served");
        assert!(PassPool::new(0).size() >= 1);
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_new_pending_pod_goes_first_until_the_others_are_overdue() {
        let pool = PassPool::new(1);
        let held = pool.turn(Urgency::Other).await;
        let (tx, mut rx) = mpsc::unbounded_channel();
        let scan = pass(&pool, "scan", Urgency::Other, &tx);
        tokio::task::yield_now().await;
        let pod = pass(&pool, "pod", Urgency::NewPending, &tx);
        tokio::task::yield_now().await;
        drop(held);
        assert_eq!(rx.recv().await, Some("pod"), "the pending pod's pass first");
        // The scan has now waited past OVERDUE: it goes before a pod that came later.
        tokio::time::advance(OVERDUE).await;
        let later = pass(&pool, "later pod", Urgency::NewPending, &tx);
        tokio::task::yield_now().await;
        let _ = pod.send(());
        assert_eq!(rx.recv().await, Some("scan"), "overdue goes first");
        let _ = scan.send(());
        assert_eq!(rx.recv().await, Some("later pod"));
        let _ = later.send(());
    }

    /// A pass that gives up its wait (cancelled, its runner stopped) loses no turn, even
    /// when the turn was already on its way to it.
    #[tokio::test(flavor = "current_thread")]
    async fn a_wait_given_up_loses_no_turn() {
        let pool = PassPool::new(1);
        let held = pool.turn(Urgency::Other).await;
        let gave_up = tokio::spawn({
            let pool = pool.clone();
            async move { pool.turn(Urgency::NewPending).await }
        });
        tokio::task::yield_now().await;
        gave_up.abort();
        drop(held);
        let _ = gave_up.await;
        let again = tokio::time::timeout(Duration::from_secs(5), pool.turn(Urgency::Other)).await;
        assert!(again.is_ok(), "the turn came back to the pool");
        // The turn sent and dropped unopened comes back too.
        let (give, given) = oneshot::channel();
        drop(given);
        let queue = pool.queue.clone();
        lock(&queue).other.push_back(Waiter {
            since: Instant::now(),
            give,
        });
        drop(again);
        assert_eq!(
            lock(&queue).free,
            1,
            "handed past the gone waiter to the pool"
        );
    }
}
