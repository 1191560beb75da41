use clap::Parser;

fn main() -> anyhow::Result<()> {
    capmox_apiserver::cli::run(capmox_apiserver::cli::Cli::parse())
}
