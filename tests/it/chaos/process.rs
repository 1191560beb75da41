//! A child process the nemesis can kill, pause and restart. Each one dies with the test
//! (`PR_SET_PDEATHSIG`), so a test killed by a timeout leaves no server behind.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// How a process is started again after a kill: the same command line.
pub struct Process {
    name: String,
    program: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
    log: PathBuf,
    child: Option<Child>,
    paused: bool,
}

impl Process {
    /// Starts `program args…`, appending its output to `log`.
    pub fn start(
        name: &str,
        program: impl Into<PathBuf>,
        args: Vec<String>,
        env: Vec<(String, String)>,
        log: PathBuf,
    ) -> Self {
        let mut process = Self {
            name: name.to_owned(),
            program: program.into(),
            args,
            env,
            log,
            child: None,
            paused: false,
        };
        process.restart();
        process
    }

    /// Whether it runs (started and not killed).
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Starts it again (after [`Process::kill`]).
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "{} still runs", self.name);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("process log");
        let mut command = Command::new(&self.program);
        command
            .args(&self.args)
            .envs(self.env.iter().cloned())
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log);
        // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", self.program.display()));
        self.child = Some(child);
        self.paused = false;
    }

    /// SIGKILL, then reap: a crash, nothing flushed or resigned.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.paused = false;
    }

    /// SIGSTOP (`true`) or SIGCONT (`false`): a process frozen by the scheduler or a VM pause.
    pub fn pause(&mut self, on: bool) {
        if let Some(child) = &self.child {
            let signal = if on { libc::SIGSTOP } else { libc::SIGCONT };
            let pid = i32::try_from(child.id()).expect("pid");
            // SAFETY: signalling our own child by its PID.
            let rc = unsafe { libc::kill(pid, signal) };
            assert_eq!(rc, 0, "signalling {}", self.name);
            self.paused = on;
        }
    }

    /// How many lines of its log contain `needle`.
    pub fn log_lines_with(&self, needle: &str) -> usize {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        log.lines().filter(|l| l.contains(needle)).count()
    }

    /// The last lines of its log, for failure messages.
    pub fn log_tail(&self, bytes: usize) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let mut start = log.len().saturating_sub(bytes);
        while !log.is_char_boundary(start) {
            start += 1;
        }
        format!("--- {} ---\n{}", self.name, &log[start..])
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if self.paused {
            self.pause(false);
        }
        self.kill();
    }
}
