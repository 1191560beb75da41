//! Simulated time: real elapsed time plus whatever the admin endpoint advanced, or only
//! the advanced time (`manual`) for tests that must observe intermediate states.

use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

/// Time since the simulator started.
pub type SimTime = Duration;

/// Whether simulated time follows the wall clock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClockMode {
    /// Wall-clock time plus advances.
    #[default]
    Real,
    /// Only advances move time (deterministic tests).
    Manual,
}

/// The simulator's clock.
#[derive(Debug)]
pub struct SimClock {
    mode: ClockMode,
    started: Instant,
    advanced: Mutex<Duration>,
}

impl SimClock {
    /// A clock starting now.
    pub fn new(mode: ClockMode) -> Self {
        Self {
            mode,
            started: Instant::now(),
            advanced: Mutex::new(Duration::ZERO),
        }
    }

    /// The current simulated time.
    pub fn now(&self) -> SimTime {
        let advanced = *self.advanced.lock().unwrap_or_else(|e| e.into_inner());
        match self.mode {
            ClockMode::Real => self.started.elapsed() + advanced,
            ClockMode::Manual => advanced,
        }
    }

    /// Moves time forward by `by`.
    pub fn advance(&self, by: Duration) {
        let mut advanced = self.advanced.lock().unwrap_or_else(|e| e.into_inner());
        *advanced = advanced.saturating_add(by);
    }

    /// The clock's mode.
    pub fn mode(&self) -> ClockMode {
        self.mode
    }
}
