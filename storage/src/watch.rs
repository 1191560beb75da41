//! The stream a watch hands out, shared by both backends.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use tokio::sync::Notify;
use tokio::time::{Instant, Interval, MissedTickBehavior};

use crate::error::Result;
use crate::types::Event;

/// Events with revisions above the watch's start, in revision order.
///
/// An `Err` item is terminal: the stream ends after it. `Expired` means the watcher fell
/// behind the retained history (relist); `Unavailable` means the backend stayed unreachable.
pub struct WatchStream {
    events: Pin<Box<dyn Stream<Item = Result<Event>> + Send>>,
    progress: Arc<Notify>,
    ended: bool,
}

impl WatchStream {
    pub(crate) fn new(
        events: impl Stream<Item = Result<Event>> + Send + 'static,
        progress: Arc<Notify>,
    ) -> Self {
        Self {
            events: Box::pin(events),
            progress,
            ended: false,
        }
    }

    /// Ask for an [`Event::Progress`] mark as soon as every event up to the store's current
    /// revision has been delivered.
    pub fn request_progress(&self) {
        self.progress.notify_one();
    }
}

impl Stream for WatchStream {
    type Item = Result<Event>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.ended {
            return Poll::Ready(None);
        }
        let next = self.events.as_mut().poll_next(cx);
        if matches!(next, Poll::Ready(Some(Err(_)) | None)) {
            self.ended = true;
        }
        next
    }
}

/// The periodic progress tick of a watch; never fires when no interval is configured.
pub(crate) struct ProgressTimer(Option<Interval>);

impl ProgressTimer {
    pub(crate) fn new(period: Option<Duration>) -> Self {
        Self(period.map(|period| {
            let mut interval = tokio::time::interval_at(Instant::now() + period, period);
            interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
            interval
        }))
    }

    pub(crate) async fn tick(&mut self) {
        match &mut self.0 {
            Some(interval) => {
                interval.tick().await;
            }
            None => std::future::pending().await,
        }
    }
}
