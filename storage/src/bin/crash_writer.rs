//! Test helper for the crash-safety test (`tests/conformance/embedded/crash.rs`).
//!
//! `capmox-storage-crash-writer <data-dir> <run>` opens the embedded store in `data-dir` and lets
//! several tasks create, update and delete keys under `/r<run>/` until the process is killed.
//! Before each write it prints `begin <key> <op> <value>`; after the store acknowledged it,
//! `ack <key> <op> <revision>`. A line is printed only after the previous one was written out.

use std::io::Write;

use capmox_storage::{EmbeddedConfig, Revision, Store};

const WRITERS: usize = 8;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

#[tokio::main]
async fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(dir), Some(run)) = (args.next(), args.next()) else {
        return Err("usage: capmox-storage-crash-writer <data-dir> <run>".into());
    };
    let store = Store::open(EmbeddedConfig::new(dir)).await?;
    let writers = (0..WRITERS).map(|writer| {
        let store = store.clone();
        let prefix = format!("/r{run}/w{writer}/");
        tokio::spawn(async move { write_forever(store, prefix).await })
    });
    for writer in futures::future::join_all(writers).await {
        writer??;
    }
    Ok(())
}

fn report(line: String) -> Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(line.as_bytes())?;
    out.write_all(b"\n")?;
    out.flush()?;
    Ok(())
}

/// Creates key after key; updates the previous key every third step and deletes an older one
/// every fourth, always with the revision it last saw.
async fn write_forever(store: Store, prefix: String) -> Result<()> {
    let mut revisions: Vec<Option<Revision>> = Vec::new();
    for step in 0usize.. {
        let key = format!("{prefix}{step:06}");
        let value = format!("create-{step}");
        report(format!("begin {key} create {value}"))?;
        let revision = store.create(&key, value).await?;
        report(format!("ack {key} create {revision}"))?;
        revisions.push(Some(revision));

        if step % 3 == 2
            && let Some(Some(expected)) = revisions.get(step - 1).copied()
        {
            let key = format!("{prefix}{:06}", step - 1);
            let value = format!("update-{step}");
            report(format!("begin {key} update {value}"))?;
            let revision = store.update(&key, value, expected).await?;
            report(format!("ack {key} update {revision}"))?;
            revisions[step - 1] = Some(revision);
        }
        if step % 4 == 3
            && let Some(Some(expected)) = revisions.get(step - 2).copied()
        {
            let key = format!("{prefix}{:06}", step - 2);
            report(format!("begin {key} delete -"))?;
            let deleted = store.delete(&key, Some(expected)).await?;
            report(format!("ack {key} delete {}", deleted.revision))?;
            revisions[step - 2] = None;
        }
    }
    Ok(())
}
