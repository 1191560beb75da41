//! `perf record` of a side's processes while a phase of load runs (`PEER_BENCH_PROFILE=DIR`):
//! the sampled stacks of kube-apiserver and of our server, to account for what a request costs
//! each (docs/benchmarks.md, "What a request costs in the pair").
//!
//! The machines here have no hardware counters, so the samples come from the `cpu-clock`
//! software event. kube-apiserver is Go, whose frame pointers perf follows; our release build
//! keeps no frame pointers, so its stacks are unwound from a copy of the stack (`dwarf`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// Samples per second and process: enough for a phase of a few seconds to have thousands.
const FREQUENCY: u32 = 1999;

/// Adds a phase to `DIR/phases.tsv` (side, phase, requests, samples per second), which
/// `tests/e2e/profile_report.py` reads to give each category's CPU per request.
pub fn note_phase(dir: &Path, side: &str, phase: &str, requests: usize) {
    use std::io::Write as _;
    let path = dir.join("phases.tsv");
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    writeln!(file, "{side}\t{phase}\t{requests}\t{FREQUENCY}")
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// The recordings of one phase, running until [`Recording::finish`].
pub struct Recording {
    perfs: Vec<(PathBuf, Child)>,
}

/// Starts `perf record` on each of `processes` (name, pid) but etcd, into
/// `DIR/<phase>-<name>.data`.
pub fn record(dir: &Path, phase: &str, processes: &[(String, u32)]) -> Recording {
    std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let perfs = processes
        .iter()
        .filter(|(name, _)| name != "etcd")
        .map(|(name, pid)| {
            let output = dir.join(format!("{phase}-{name}.data"));
            let call_graph = if name == "kube-apiserver" {
                "fp"
            } else {
                "dwarf,16384"
            };
            let perf = Command::new("perf")
                .args([
                    "record",
                    "--quiet",
                    "-e",
                    "cpu-clock",
                    "-F",
                    &FREQUENCY.to_string(),
                ])
                .args(["--call-graph", call_graph, "-p", &pid.to_string(), "-o"])
                .arg(&output)
                .stdout(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("perf record (PEER_BENCH_PROFILE needs perf): {e}"));
            (output, perf)
        })
        .collect();
    // perf attaches to each thread asynchronously, slower on a busy machine (300 ms once left
    // a phase of one second without a sample).
    std::thread::sleep(std::time::Duration::from_secs(1));
    Recording { perfs }
}

impl Recording {
    /// Stops each perf as Ctrl-C would (it writes its file then) and waits for it; the files'
    /// paths.
    pub fn finish(self) -> Vec<PathBuf> {
        self.perfs
            .into_iter()
            .map(|(output, mut perf)| {
                // SIGINT: perf's own way to end a recording cleanly.
                let signalled = Command::new("kill")
                    .args(["-INT", &perf.id().to_string()])
                    .status()
                    .expect("kill");
                assert!(signalled.success(), "kill -INT perf: {signalled}");
                let status = perf.wait().expect("wait for perf");
                assert!(
                    output.exists(),
                    "perf record ended ({status}) without writing {}",
                    output.display()
                );
                output
            })
            .collect()
    }
}
