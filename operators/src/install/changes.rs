//! The loop every install operator runs: a pass over everything it owns now, then again on
//! each change its watches report and at least every resync period. A burst of changes (a
//! watch's initial listing, the pass's own writes) is folded into one pass.

use std::future::Future;
use std::time::Duration;

use futures_util::stream::BoxStream;
use futures_util::{FutureExt, Stream, StreamExt};
use kube::runtime::{WatchStreamExt, watcher};

/// How long a burst of changes is let settle before the next pass.
const SETTLE: Duration = Duration::from_millis(200);

/// The changes of what `api` lists under `config`, one `()` each, for [`run_on_changes`];
/// a failed watch is retried with backoff.
pub fn of<K>(api: kube::Api<K>, config: watcher::Config) -> BoxStream<'static, ()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    watcher(api, config).default_backoff().map(|_| ()).boxed()
}

/// Runs `pass` now, after each change in `changes`, and every `resync` without one.
pub async fn run_on_changes<S, F, Fut>(changes: S, resync: Duration, mut pass: F)
where
    S: Stream<Item = ()>,
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    let mut changes = std::pin::pin!(changes);
    loop {
        pass().await;
        tokio::select! {
            change = changes.next() => {
                if change.is_none() {
                    // The watches ended (they should not): fall back to the resync period.
                    tokio::time::sleep(resync).await;
                    continue;
                }
                tokio::time::sleep(SETTLE).await;
                while let Some(Some(())) = changes.next().now_or_never() {}
            }
            _ = tokio::time::sleep(resync) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn a_burst_of_changes_is_one_pass() {
        let passes = Arc::new(AtomicUsize::new(0));
        let counted = passes.clone();
        let burst = futures_util::stream::iter(vec![(); 50]).chain(futures_util::stream::pending());
        let running = tokio::spawn(run_on_changes(burst, Duration::from_secs(4), move || {
            let counted = counted.clone();
            async move {
                counted.fetch_add(1, Ordering::SeqCst);
            }
        }));
        tokio::time::sleep(Duration::from_millis(1500)).await;
        // The first pass, and one for the whole burst.
        assert_eq!(passes.load(Ordering::SeqCst), 2);
        tokio::time::sleep(Duration::from_secs(4)).await;
        assert_eq!(passes.load(Ordering::SeqCst), 3, "the resync pass");
        running.abort();
    }
}
