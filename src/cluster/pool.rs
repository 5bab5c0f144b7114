//! The fleet's engine passes share a bounded pool of turns, sized to the cores: a pass is CPU
//! work, so running more at once than there are cores only makes every one of them slower.
//! Turns are given first come, first served (tokio's semaphore is fair), so one large
//! cluster's long pass holds one turn while the other clusters' passes take the rest, and a
//! cluster that keeps waking cannot starve the others. How long a pass waited for its turn
//! is measured (`fleetscaler_pass_queue_seconds`).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

#[derive(Clone, Debug)]
pub struct PassPool {
    turns: Arc<Semaphore>,
    size: usize,
}

/// A pass's turn; the next waiting pass gets it when this is dropped.
#[derive(Debug)]
pub struct Turn {
    _permit: Option<OwnedSemaphorePermit>,
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
        PassPool {
            turns: Arc::new(Semaphore::new(size)),
            size,
        }
    }

    pub fn size(&self) -> usize {
        self.size
    }

    /// Waits for a turn.
    pub async fn turn(&self) -> Turn {
        let asked = Instant::now();
        // The semaphore is never closed; were it, the pass would run unqueued.
        let permit = self.turns.clone().acquire_owned().await.ok();
        Turn {
            _permit: permit,
            waited: asked.elapsed(),
        }
    }
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

    #[tokio::test]
    async fn turns_are_bounded_and_given_in_order() {
        let pool = PassPool::new(1);
        assert_eq!(pool.size(), 1);
        let first = pool.turn().await;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        for i in 0..3 {
            let (pool, tx) = (pool.clone(), tx.clone());
            tokio::spawn(async move {
                let turn = pool.turn().await;
                tx.send(i).unwrap();
                drop(turn);
            });
            // One thread: yielding runs the task up to its wait, before the next asks.
            tokio::task::yield_now().await;
        }
        assert!(
            rx.try_recv().is_err(),
            "nobody runs while the one turn is held"
        );
        drop(first);
        let order: Vec<i32> = vec![
            rx.recv().await.unwrap(),
            rx.recv().await.unwrap(),
            rx.recv().await.unwrap(),
        ];
        assert_eq!(order, [0, 1, 2], "first come, first served");
        assert!(PassPool::new(0).size() >= 1);
    }
}
