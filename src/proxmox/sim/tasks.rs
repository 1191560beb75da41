//! The task engine: PVE workers as programs of steps run in simulated time.
//!
//! A task is a queue of [`Step`]s — take a lock, sleep, run an effect on the world. The
//! world advances lazily: before each request it runs every step that is due by "now",
//! in time order (a small discrete-event simulation). That keeps the simulator
//! deterministic for a given clock and free of background threads: nothing happens that
//! a request could not observe.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use super::clock::SimTime;
use super::locks::{LockKey, LockMode, LockTable};
use super::profile::seconds;
use super::world::World;
use crate::proxmox::upid::Upid;

/// A change to the world made by a task; `Err` fails the task with that text.
pub type Effect = Box<dyn FnOnce(&mut World, &mut TaskCtx) -> Result<(), String> + Send>;

/// One step of a task's program.
pub enum Step {
    /// Take a lock, queueing up to `timeout`; on timeout the task fails with `message`.
    Lock {
        /// The lock.
        key: LockKey,
        /// Shared or exclusive.
        mode: LockMode,
        /// How long to queue.
        timeout: Duration,
        /// Failure text (defaults to PVE's lock-timeout message).
        message: Option<String>,
    },
    /// Release a lock early (all locks are released when the task ends).
    Unlock(LockKey),
    /// Let simulated time pass.
    Sleep(Duration),
    /// Change the world.
    Run(Effect),
    /// Never continue (a stuck worker).
    Hang,
}

impl Step {
    /// Runs `f` as a step.
    pub fn run(
        f: impl FnOnce(&mut World, &mut TaskCtx) -> Result<(), String> + Send + 'static,
    ) -> Self {
        Self::Run(Box::new(f))
    }

    /// An exclusive lock with PVE's default message.
    pub fn lock(key: LockKey, timeout: Duration) -> Self {
        Self::Lock {
            key,
            mode: LockMode::Exclusive,
            timeout,
            message: None,
        }
    }
}

/// What an effect can write to its task.
#[derive(Debug, Default)]
pub struct TaskCtx {
    lines: Vec<String>,
    warnings: u32,
}

impl TaskCtx {
    /// Appends a log line.
    pub fn log(&mut self, line: impl Into<String>) {
        self.lines.push(line.into());
    }
    /// Appends `WARN: ...` and counts it (the task then ends `WARNINGS: n`).
    pub fn warn(&mut self, line: impl AsRef<str>) {
        self.lines.push(format!("WARN: {}", line.as_ref()));
        self.warnings += 1;
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Wake {
    At(SimTime),
    Lock { deadline: SimTime, message: String },
    Never,
}

/// A task as `GET .../tasks/{upid}/status` and `/log` show it.
pub struct Task {
    /// Its id.
    pub upid: Upid,
    /// Start time (Unix).
    pub starttime: i64,
    /// Log lines so far.
    pub log: Vec<String>,
    /// `None` while running, then `OK`, `WARNINGS: n` or the error.
    pub exitstatus: Option<String>,
    /// End time (Unix) once stopped.
    pub endtime: Option<i64>,
    /// Internal helper tasks (lock holders) are not listed.
    pub hidden: bool,
    warnings: u32,
    program: VecDeque<Step>,
    wake: Wake,
    on_failure: Option<Effect>,
}

/// What to start.
pub struct TaskSpec {
    /// Node the worker runs on.
    pub node: String,
    /// Worker type (`qmclone`...).
    pub task_type: &'static str,
    /// Object id (vmid, `<vmid>@<storage>`, or empty).
    pub id: String,
    /// The VM a task-failure fault may target.
    pub vmid: Option<u32>,
    /// The steps.
    pub program: Vec<Step>,
    /// Cleanup when the task fails.
    pub on_failure: Option<Effect>,
}

/// All tasks and the locks they hold.
#[derive(Default)]
pub struct TaskEngine {
    tasks: BTreeMap<u64, Task>,
    by_upid: BTreeMap<String, u64>,
    active: BTreeSet<u64>,
    next_seq: u64,
    next_pid: u32,
    /// The file locks.
    pub locks: LockTable,
}

impl TaskEngine {
    /// A task by UPID string.
    pub fn get(&self, upid: &str) -> Option<&Task> {
        self.by_upid.get(upid).and_then(|seq| self.tasks.get(seq))
    }

    /// Visible tasks, oldest first.
    pub fn list(&self) -> impl Iterator<Item = &Task> {
        self.tasks.values().filter(|t| !t.hidden)
    }

    /// Number of running tasks.
    pub fn running(&self) -> usize {
        self.active.len()
    }

    /// The earliest due task: (time, sequence).
    fn next_due(&self) -> Option<(SimTime, u64)> {
        self.active
            .iter()
            .filter_map(|seq| {
                let due = match &self.tasks.get(seq)?.wake {
                    Wake::At(t) => *t,
                    Wake::Lock { deadline, .. } => *deadline,
                    Wake::Never => return None,
                };
                Some((due, *seq))
            })
            .min()
    }
}

impl World {
    /// Starts a task and returns its UPID. Fault knobs for its type apply here (extra
    /// delay, hang, failure). It makes progress from the next tick on.
    pub fn spawn_task(&mut self, spec: TaskSpec, hidden: bool) -> Upid {
        let TaskSpec {
            node,
            task_type,
            id,
            vmid,
            mut program,
            on_failure,
        } = spec;
        let extra = self
            .faults
            .task_delays
            .get(task_type)
            .copied()
            .unwrap_or(0.0);
        if extra > 0.0 {
            program.insert(0, Step::Sleep(seconds(extra)));
        }
        if !hidden {
            // A stuck or failing worker still takes its locks (and its first delay) first.
            let prefix = program
                .iter()
                .take_while(|s| matches!(s, Step::Lock { .. } | Step::Sleep(_)))
                .count();
            if self.faults.hang_tasks.contains(task_type) {
                program.truncate(prefix);
                program.push(Step::Hang);
            } else if let Some(message) = self.faults.take_task_failure(task_type, vmid) {
                program.truncate(prefix);
                program.push(Step::run(move |_, _| Err(message)));
            }
        }
        let starttime = self.unix_now();
        let pstart = 1_000_000 + self.now.as_millis() as u64 / 10;
        let engine = &mut self.tasks;
        engine.next_seq += 1;
        engine.next_pid = engine.next_pid.wrapping_add(1).max(1);
        let seq = engine.next_seq;
        let upid = Upid::new(
            &node,
            engine.next_pid + 40_000,
            pstart,
            starttime,
            task_type,
            &id,
            &self.current_user,
        )
        .unwrap_or_else(|_| {
            // Only reachable with a malformed node or user; keep the task addressable.
            Upid::new(
                "localhost",
                seq as u32,
                1,
                starttime,
                "unknown",
                "",
                "root@pam",
            )
            .expect("constant UPID is valid")
        });
        let task = Task {
            upid: upid.clone(),
            starttime,
            log: Vec::new(),
            exitstatus: None,
            endtime: None,
            hidden,
            warnings: 0,
            program: program.into(),
            wake: Wake::At(self.now),
            on_failure,
        };
        engine.by_upid.insert(upid.to_string(), seq);
        engine.tasks.insert(seq, task);
        engine.active.insert(seq);
        upid
    }

    /// Runs everything due up to `until`, in time order.
    pub fn run_until(&mut self, until: SimTime) {
        while let Some((due, seq)) = self.tasks.next_due() {
            if due > until {
                break;
            }
            self.now = self.now.max(due);
            self.step_task(seq);
        }
        self.now = self.now.max(until);
    }

    fn step_task(&mut self, seq: u64) {
        let Some(task) = self.tasks.tasks.get_mut(&seq) else {
            return;
        };
        if let Wake::Lock { message, .. } = &task.wake {
            // The deadline passed while still queued.
            let message = message.clone();
            self.finish_task(seq, Err(message));
            return;
        }
        loop {
            let Some(task) = self.tasks.tasks.get_mut(&seq) else {
                return;
            };
            let Some(step) = task.program.pop_front() else {
                self.finish_task(seq, Ok(()));
                return;
            };
            match step {
                Step::Sleep(d) if d.is_zero() => {}
                Step::Sleep(d) => {
                    task.wake = Wake::At(self.now + d);
                    return;
                }
                Step::Hang => {
                    task.wake = Wake::Never;
                    return;
                }
                Step::Lock {
                    key,
                    mode,
                    timeout,
                    message,
                } => {
                    if !self.tasks.locks.try_acquire(&key, seq, mode) {
                        self.tasks.locks.enqueue(&key, seq, mode);
                        let message = message.unwrap_or_else(|| key.timeout_message());
                        if let Some(task) = self.tasks.tasks.get_mut(&seq) {
                            task.wake = Wake::Lock {
                                deadline: self.now + timeout,
                                message,
                            };
                        }
                        return;
                    }
                }
                Step::Unlock(key) => {
                    let granted = self.tasks.locks.release(&key, seq);
                    self.wake_granted(granted);
                }
                Step::Run(effect) => {
                    let mut ctx = TaskCtx::default();
                    let result = effect(self, &mut ctx);
                    self.append_log(seq, ctx);
                    if let Err(message) = result {
                        self.finish_task(seq, Err(message));
                        return;
                    }
                }
            }
        }
    }

    fn append_log(&mut self, seq: u64, ctx: TaskCtx) {
        if let Some(task) = self.tasks.tasks.get_mut(&seq) {
            task.log.extend(ctx.lines);
            task.warnings += ctx.warnings;
        }
    }

    fn wake_granted(&mut self, granted: Vec<u64>) {
        for waiter in granted {
            if let Some(task) = self.tasks.tasks.get_mut(&waiter) {
                task.wake = Wake::At(self.now);
            }
        }
    }

    fn finish_task(&mut self, seq: u64, result: Result<(), String>) {
        let Some(task) = self.tasks.tasks.get_mut(&seq) else {
            return;
        };
        task.program.clear();
        let cleanup = task.on_failure.take();
        if let (Err(_), Some(cleanup)) = (&result, cleanup) {
            let mut ctx = TaskCtx::default();
            // A failing cleanup is logged; the task's own error stays the exit status.
            if let Err(e) = cleanup(self, &mut ctx) {
                ctx.log(format!("cleanup failed: {e}"));
            }
            self.append_log(seq, ctx);
        }
        let endtime = self.unix_now();
        let Some(task) = self.tasks.tasks.get_mut(&seq) else {
            return;
        };
        task.endtime = Some(endtime);
        let status = match result {
            Ok(()) if task.warnings > 0 => format!("WARNINGS: {}", task.warnings),
            Ok(()) => "OK".to_string(),
            Err(message) => {
                let first = message.lines().next().unwrap_or("").to_string();
                task.log.push(format!("TASK ERROR: {message}"));
                first
            }
        };
        if status.starts_with("WARNINGS") || status == "OK" {
            task.log.push(format!("TASK {status}"));
        }
        task.exitstatus = Some(status);
        self.tasks.active.remove(&seq);
        let granted: Vec<u64> = self
            .tasks
            .locks
            .release_all(seq)
            .into_iter()
            .map(|(owner, _)| owner)
            .collect();
        self.wake_granted(granted);
    }
}
