use clap::Parser;

// Every request builds and drops many small JSON nodes; mimalloc's thread-local free lists
// cost a fraction of glibc's malloc/free there (docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    capmox_apiserver::cli::run(capmox_apiserver::cli::Cli::parse())
}
