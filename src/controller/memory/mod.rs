//! In-memory implementations of the controller's seams, for tests (and anything else that
//! needs the controller without an API server): [`MemoryInfraStore`] and
//! [`MemoryManagement`]. Both share one [`table::ObjectTable`] design (resourceVersion
//! preconditions, uid, generation, finalizers) and can inject failures: a request may fail
//! before it is applied, or be applied and still report failure (a lost response), which
//! is what a controller killed or cut off mid-write experiences.

mod management;
mod store;
pub mod table;

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
