//! Timing profiles: how long simulated work takes.
//!
//! `instant` makes every task finish at the next request (tests); `realistic` follows the
//! durations real PVE clusters show (reference §9), with ±20 % jitter.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::rng::Rng;

/// Seconds from a knob as a duration: negative or NaN is zero, huge values are capped
/// (a fault plan must never be able to crash the simulator).
pub fn seconds(value: f64) -> Duration {
    if value.is_nan() || value <= 0.0 {
        Duration::ZERO
    } else {
        Duration::from_secs_f64(value.min(1e9))
    }
}

/// A named timing profile.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// Zero durations: tasks complete at the next request, the agent answers at once.
    #[default]
    Instant,
    /// Short but non-zero durations, for demos that should show progress.
    Fast,
    /// Durations of a real cluster.
    Realistic,
}

impl std::str::FromStr for Profile {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "instant" => Ok(Self::Instant),
            "fast" => Ok(Self::Fast),
            "realistic" => Ok(Self::Realistic),
            other => Err(format!(
                "unknown profile {other:?} (instant, fast, realistic)"
            )),
        }
    }
}

/// What a duration is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Work {
    /// Any GET request.
    Read,
    /// The artificial delay of a 401.
    AuthFailure,
    /// A linked clone.
    CloneLinked,
    /// A full clone (copy time; only the allocation before it holds the storage lock).
    CloneFull,
    /// A config change (a `qmconfig` worker writes one file: milliseconds on a real node).
    Config,
    /// A disk resize.
    Resize,
    /// Copying an uploaded image into place.
    ImgCopy,
    /// Deleting a volume.
    ImgDel,
    /// Starting QEMU.
    Start,
    /// Stopping QEMU.
    Stop,
    /// A guest shutdown.
    Shutdown,
    /// Pause/resume/reset.
    Suspend,
    /// Destroying a VM.
    Destroy,
    /// Boot until the guest agent answers.
    AgentBoot,
    /// Agent ready until cloud-init is done.
    CloudInit,
    /// A guest command run by the agent.
    Exec,
    /// How long `/cluster/resources` lags behind for new VMs.
    RrdLag,
    /// How long an unreachable node takes to time out (596).
    ProxyTimeout,
}

impl Profile {
    /// Nominal seconds for `work` (before jitter).
    pub fn seconds(self, work: Work) -> f64 {
        use Work::*;
        let (fast, realistic) = match work {
            Read => (0.0, 0.03),
            AuthFailure => (0.0, 3.0),
            CloneLinked => (0.2, 2.0),
            CloneFull => (0.5, 20.0),
            Config => (0.02, 0.05),
            Resize => (0.1, 1.0),
            ImgCopy => (0.1, 0.5),
            ImgDel => (0.1, 0.3),
            Start => (0.2, 2.0),
            Stop => (0.1, 1.0),
            Shutdown => (0.2, 5.0),
            Suspend => (0.1, 0.5),
            Destroy => (0.2, 2.0),
            AgentBoot => (1.0, 30.0),
            CloudInit => (2.0, 90.0),
            Exec => (0.05, 0.3),
            RrdLag => (0.0, 10.0),
            ProxyTimeout => (0.5, 30.0),
        };
        match self {
            Self::Instant => 0.0,
            Self::Fast => fast,
            Self::Realistic => realistic,
        }
    }

    /// Nominal duration of `work` (no jitter).
    pub fn nominal(self, work: Work) -> Duration {
        seconds(self.seconds(work))
    }

    /// The duration of one piece of `work`, with jitter in the realistic profile.
    pub fn duration(self, work: Work, rng: &mut Rng) -> Duration {
        let base = self.seconds(work);
        let jitter = match self {
            Self::Realistic => 0.8 + 0.4 * rng.unit(),
            _ => 1.0,
        };
        seconds(base * jitter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knob_seconds_never_panic() {
        assert_eq!(seconds(f64::NAN), Duration::ZERO);
        assert_eq!(seconds(-3.0), Duration::ZERO);
        assert_eq!(seconds(f64::INFINITY), Duration::from_secs(1_000_000_000));
        assert_eq!(seconds(1.5), Duration::from_millis(1500));
    }

    #[test]
    fn instant_is_zero_and_realistic_jitters_around_the_nominal() {
        let mut rng = Rng::new(3);
        assert_eq!(
            Profile::Instant.duration(Work::CloneFull, &mut rng),
            Duration::ZERO
        );
        for _ in 0..50 {
            let d = Profile::Realistic
                .duration(Work::CloneFull, &mut rng)
                .as_secs_f64();
            assert!((16.0..=24.0).contains(&d), "{d}");
        }
        assert_eq!("realistic".parse::<Profile>(), Ok(Profile::Realistic));
        assert!("slow".parse::<Profile>().is_err());
    }
}
