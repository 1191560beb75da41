//! In-memory implementations of the controller's seams, for tests (and anything else that
//! needs the controller without an API server): [`MemoryInfraStore`] and
//! [`MemoryManagement`]. Both share one [`table::ObjectTable`] design (resourceVersion
//! preconditions, uid, generation, finalizers) and can inject failures: a request may fail
//! before it is applied, or be applied and still report failure (a lost response), which
//! is what a controller killed or cut off mid-write experiences.

mod management;
mod store;
pub mod table;

use std::sync::{Arc, Mutex, MutexGuard};

use table::ObjectTable;

pub use management::MemoryManagement;
pub use store::MemoryInfraStore;

/// Failure injection for the in-memory seams.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Faults {
    /// Probability that a call fails without effect.
    pub error_rate: f64,
    /// Probability that a write is applied but reported as failed.
    pub lost_write_rate: f64,
}

/// A tiny deterministic generator for the fault dice (xorshift64*).
#[derive(Clone, Debug)]
struct Dice(u64);

impl Dice {
    fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    /// True with probability `p`.
    fn roll(&mut self, p: f64) -> bool {
        if p <= 0.0 {
            return false;
        }
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let r = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11;
        (r as f64 / (1u64 << 53) as f64) < p
    }
}

/// What both in-memory seams hold: the objects, the failure dice, and `extra` state.
struct State<X> {
    table: ObjectTable,
    faults: Faults,
    dice: Dice,
    extra: X,
}

/// Shared, lockable [`State`]; clones share it.
#[derive(Clone)]
struct Backend<X> {
    state: Arc<Mutex<State<X>>>,
}

impl<X> Backend<X> {
    fn new(seed: u64, extra: X) -> Self {
        Self {
            state: Arc::new(Mutex::new(State {
                table: ObjectTable::default(),
                faults: Faults::default(),
                dice: Dice::new(seed),
                extra,
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<X>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Replaces the failure injection (seeded for reproducibility).
    fn set_faults(&self, faults: Faults, seed: u64) {
        let mut s = self.lock();
        s.faults = faults;
        s.dice = Dice::new(seed);
    }

    /// Every call is an await point (as real I/O is), then may fail without effect.
    async fn before(&self, what: &str) -> Result<(), String> {
        tokio::task::yield_now().await;
        let mut s = self.lock();
        let p = s.faults.error_rate;
        if s.dice.roll(p) {
            return Err(format!("injected failure ({what})"));
        }
        Ok(())
    }

    /// After a write was applied: may still report a failure (a lost response).
    fn after_write(&self, what: &str) -> Result<(), String> {
        let mut s = self.lock();
        let p = s.faults.lost_write_rate;
        if s.dice.roll(p) {
            return Err(format!("injected lost response ({what})"));
        }
        Ok(())
    }
}
