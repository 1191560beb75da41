//! How writes wake the writer thread while it gathers a group commit: only the write that
//! completes the batch it waits for (or a stop) wakes it. Were the writer waiting on the queue
//! itself, each of a batch's writes would wake it on arrival, and at 16 writers a batch costs
//! 16 thread wake-ups where one does.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering::SeqCst};
use std::thread::{self, Thread};
use std::time::Instant;

#[derive(Default)]
pub(super) struct Arrivals {
    /// Commands queued and not yet taken by the writer. Briefly negative: the writer may take
    /// a command before its sender has counted it.
    queued: AtomicIsize,
    /// While the writer waits: how many queued commands complete its batch; 0 otherwise.
    wanted: AtomicIsize,
    /// A stop was queued.
    stopping: AtomicBool,
    /// The writer's thread, once it runs.
    writer: OnceLock<Thread>,
}

impl Arrivals {
    /// Called on the writer's thread before it takes any command.
    pub(super) fn register_writer(&self) {
        let _ = self.writer.set(thread::current());
    }

    /// A command was queued: wakes the writer if that completes the batch it waits for.
    pub(super) fn arrived(&self) {
        let queued = self.queued.fetch_add(1, SeqCst) + 1;
        let wanted = self.wanted.load(SeqCst);
        if wanted > 0 && queued >= wanted {
            self.wake();
        }
    }

    /// A stop was queued: wakes the writer whatever it waits for.
    pub(super) fn stop_arrived(&self) {
        self.queued.fetch_add(1, SeqCst);
        self.stopping.store(true, SeqCst);
        self.wake();
    }

    /// The writer took one queued command.
    pub(super) fn taken(&self) {
        self.queued.fetch_sub(1, SeqCst);
    }

    /// On the writer's thread: waits until `wanted` commands are queued, a stop arrives or
    /// `deadline` passes.
    pub(super) fn wait_for(&self, wanted: usize, deadline: Instant) {
        let wanted = isize::try_from(wanted).unwrap_or(isize::MAX);
        // Published before the queue is read: a sender that counts itself after this read
        // sees `wanted` and wakes us (both sides are sequentially consistent).
        self.wanted.store(wanted, SeqCst);
        while self.queued.load(SeqCst) < wanted && !self.stopping.load(SeqCst) {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                break;
            };
            // Also returns early (a wake meant for an earlier wait, or spuriously): look again.
            thread::park_timeout(left);
        }
        self.wanted.store(0, SeqCst);
    }

    fn wake(&self) {
        if let Some(writer) = self.writer.get() {
            writer.unpark();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    /// A waiting writer on its own thread; answers how long its wait took.
    fn waiting_writer(
        arrivals: &Arc<Arrivals>,
        wanted: usize,
        delay: Duration,
    ) -> thread::JoinHandle<Duration> {
        let arrivals = arrivals.clone();
        let (registered, is_registered) = std::sync::mpsc::channel();
        let writer = thread::spawn(move || {
            arrivals.register_writer();
            registered.send(()).unwrap();
            let started = Instant::now();
            arrivals.wait_for(wanted, started + delay);
            started.elapsed()
        });
        is_registered.recv().unwrap();
        writer
    }

    #[test]
    fn the_write_that_completes_the_batch_wakes_the_writer() {
        let arrivals = Arc::new(Arrivals::default());
        let writer = waiting_writer(&arrivals, 3, Duration::from_secs(30));
        for _ in 0..3 {
            thread::sleep(Duration::from_millis(20));
            arrivals.arrived();
        }
        assert!(writer.join().unwrap() < Duration::from_secs(10));
    }

    #[test]
    fn fewer_writes_than_wanted_leave_the_writer_waiting_until_the_deadline() {
        let arrivals = Arc::new(Arrivals::default());
        let delay = Duration::from_millis(300);
        let writer = waiting_writer(&arrivals, 3, delay);
        arrivals.arrived();
        arrivals.arrived();
        let waited = writer.join().unwrap();
        assert!(waited >= delay, "woke after {waited:?}");
    }

    #[test]
    fn writes_taken_before_the_wait_do_not_count_towards_it() {
        let arrivals = Arc::new(Arrivals::default());
        arrivals.arrived();
        arrivals.taken();
        let delay = Duration::from_millis(300);
        let waited = waiting_writer(&arrivals, 1, delay).join().unwrap();
        assert!(waited >= delay, "woke after {waited:?}");
    }

    #[test]
    fn a_stop_wakes_the_writer_whatever_it_waits_for() {
        let arrivals = Arc::new(Arrivals::default());
        let writer = waiting_writer(&arrivals, 16, Duration::from_secs(30));
        thread::sleep(Duration::from_millis(20));
        arrivals.stop_arrived();
        assert!(writer.join().unwrap() < Duration::from_secs(10));
    }
}
