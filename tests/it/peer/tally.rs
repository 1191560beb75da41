//! The divergences of a differential run, by signature, and the report that tells which
//! docs/api.md lists.

use std::collections::BTreeMap;
use std::fmt;

use super::compare::Difference;
use super::documented::Documented;
use super::side::Request;

/// How often one signature was seen, and its first example.
struct Seen {
    count: usize,
    example: String,
}

/// Every divergence seen so far, against the signatures a section of docs/api.md lists.
pub struct Tally {
    documented: Documented,
    seen: BTreeMap<String, Seen>,
}

/// A run's outcome, printable.
pub struct Report {
    pub requests: usize,
    pub divergences: usize,
    pub documented: usize,
    pub undocumented: usize,
    text: String,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.text)?;
        write!(
            f,
            "differential: {} requests, {} divergences ({} documented, {} undocumented)",
            self.requests, self.divergences, self.documented, self.undocumented
        )
    }
}

impl Tally {
    pub fn new(documented: Documented) -> Self {
        Self {
            documented,
            seen: BTreeMap::new(),
        }
    }

    /// Counts each difference a request's answers showed; the first of a signature keeps the
    /// request, with `context` (what it was made from), as its example.
    pub fn record_request(&mut self, found: Vec<Difference>, context: &str, request: &Request) {
        self.record(found, |detail| {
            format!("{context}\n{} {}\n{detail}", request.method, request.path)
        });
    }

    /// Counts each difference; the first of a signature keeps `example()` as its example.
    pub fn record(&mut self, found: Vec<Difference>, example: impl Fn(&str) -> String) {
        for Difference { signature, detail } in found {
            let seen = self.seen.entry(signature).or_insert_with(|| Seen {
                count: 0,
                example: example(&detail),
            });
            seen.count += 1;
        }
    }

    pub fn report(&self, requests: usize) -> Report {
        let mut text = String::new();
        let (mut documented, mut undocumented) = (0, 0);
        for (signature, seen) in &self.seen {
            if self.documented.covers(signature) {
                documented += seen.count;
                text.push_str(&format!("documented ×{}: {signature}\n", seen.count));
            } else {
                undocumented += seen.count;
                text.push_str(&format!(
                    "UNDOCUMENTED ×{}: {signature}\n    {}\n",
                    seen.count,
                    seen.example.replace('\n', "\n    ")
                ));
            }
        }
        Report {
            requests,
            divergences: documented + undocumented,
            documented,
            undocumented,
            text,
        }
    }
}
