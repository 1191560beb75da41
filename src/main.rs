// Every request builds and drops many small JSON nodes; mimalloc's thread-local free lists
// cost a fraction of glibc's malloc/free there (docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (its index in `mimalloc.h`, v2 and v3 alike; the
/// bindings name only some options).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

fn main() -> anyhow::Result<()> {
    // Give freed memory back to the OS at once rather than after 10 ms of further allocator
    // activity on the same thread: an idle server otherwise keeps the peak of its last large
    // LIST (at 10,000 machines, 180 instead of 100 MiB RSS); creates measured no slower.
    // `MIMALLOC_PURGE_DELAY` in the environment (mimalloc's own variable, in ms) still wins: a
    // LIST-heavy installation may trade idle RSS for fewer page faults (docs/benchmarks.md).
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: sets a process-wide option before any thread is started; mimalloc reads it
        // atomically.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0) };
    }
    capmox_apiserver::cli::run(capmox_apiserver::cli::Cli::from_env())
}
