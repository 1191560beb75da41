//! The concurrent load loop shared by the API benchmarks (`api`, `peer`).

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

/// Runs `ops` calls of `op(worker, i)` on `workers` concurrent tasks (worker `w` takes
/// `i = w, w + workers, …`); operations per second.
pub async fn rate<F, Fut>(workers: usize, ops: usize, op: F) -> f64
where
    F: Fn(usize, usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send,
{
    let op = Arc::new(op);
    let started = Instant::now();
    let tasks: Vec<_> = (0..workers)
        .map(|worker| {
            let op = op.clone();
            tokio::spawn(async move {
                for i in (worker..ops).step_by(workers) {
                    op(worker, i).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("benchmark task");
    }
    ops as f64 / started.elapsed().as_secs_f64()
}
