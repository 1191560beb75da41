//! Chains a CA bundle has verified, remembered so that a client certificate is verified once
//! rather than on every request (the chain's signatures are the costly part of a request).
//!
//! Each [`super::x509::CaBundle`] owns its own cache: a CA rotation installs new bundles whose
//! caches start empty, so nothing verified under the old trust is believed under the new one.
//! An entry is keyed by the SHA-256 of the whole chain and records when all of the chain's
//! certificates are valid (and the leaf's subject, so the identity is read once too); a hit
//! outside that window is no hit, so an expired certificate is verified again (and refused)
//! exactly as without the cache. Only successes are remembered.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls_pki_types::{CertificateDer, UnixTime};

use super::x509::Subject;
use crate::server::ttl_cache::TtlCache;

/// Distinct chains remembered per bundle (clients usually share a few certificates).
const CAPACITY: usize = 1024;

/// The longest an entry lives, whatever the certificates' validity: bounds how long memory is
/// held for a client that went away.
const MAX_AGE: Duration = Duration::from_secs(300);

/// SHA-256 over each certificate's length and bytes, in chain order.
pub type Fingerprint = [u8; 32];

/// When every certificate of a chain is valid, in seconds since the epoch (both inclusive,
/// as webpki checks them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Validity {
    not_before: u64,
    not_after: u64,
}

impl Validity {
    fn contains(&self, now: UnixTime) -> bool {
        (self.not_before..=self.not_after).contains(&now.as_secs())
    }
}

/// A verified chain: when it is valid, and its leaf's subject.
#[derive(Debug, Clone)]
struct Verified {
    validity: Validity,
    subject: Arc<Subject>,
}

impl Verified {
    /// The intersection of the validity periods of `chain`'s certificates, and the first
    /// one's subject; `None` if one of them cannot be read.
    fn of(chain: &[CertificateDer<'_>]) -> Option<Self> {
        let mut subject = None;
        let validity = chain.iter().try_fold(
            Validity {
                not_before: 0,
                not_after: u64::MAX,
            },
            |window, der| {
                let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
                subject.get_or_insert_with(|| Subject::of(&cert));
                let validity = cert.validity();
                let seconds = |t: i64| u64::try_from(t).unwrap_or(0);
                Some(Validity {
                    not_before: window
                        .not_before
                        .max(seconds(validity.not_before.timestamp())),
                    not_after: window
                        .not_after
                        .min(seconds(validity.not_after.timestamp())),
                })
            },
        )?;
        Some(Self {
            validity,
            subject: Arc::new(subject?),
        })
    }
}

/// The verified chains of one bundle.
#[derive(Debug)]
pub struct VerifiedChains {
    entries: TtlCache<Fingerprint, Verified>,
}

impl Default for VerifiedChains {
    fn default() -> Self {
        Self {
            entries: TtlCache::new(CAPACITY),
        }
    }
}

impl VerifiedChains {
    pub fn fingerprint(chain: &[CertificateDer<'_>]) -> Fingerprint {
        let mut context = ring::digest::Context::new(&ring::digest::SHA256);
        for certificate in chain {
            context.update(&(certificate.len() as u64).to_be_bytes());
            context.update(certificate);
        }
        let mut fingerprint = [0; 32];
        fingerprint.copy_from_slice(context.finish().as_ref());
        fingerprint
    }

    /// The leaf's subject of a chain that was verified and whose certificates are all valid
    /// at `now`.
    pub fn get(&self, fingerprint: &Fingerprint, now: UnixTime) -> Option<Arc<Subject>> {
        self.entries
            .get(fingerprint)
            .filter(|verified| verified.validity.contains(now))
            .map(|verified| verified.subject)
    }

    /// Remembers `chain`, just verified at `now`, until its first certificate expires (at most
    /// `MAX_AGE`); its leaf's subject, unless the chain cannot be read or is not valid now.
    pub fn insert(
        &self,
        fingerprint: Fingerprint,
        chain: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Option<Arc<Subject>> {
        let verified = Verified::of(chain).filter(|v| v.validity.contains(now))?;
        let subject = Arc::clone(&verified.subject);
        let remaining = Duration::from_secs(verified.validity.not_after - now.as_secs());
        self.entries.insert_at(
            fingerprint,
            verified,
            remaining.min(MAX_AGE),
            Instant::now(),
        );
        Some(subject)
    }

    /// The number of remembered chains.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::authn::test_support::{authority, client_der};

    fn at(seconds: u64) -> UnixTime {
        UnixTime::since_unix_epoch(Duration::from_secs(seconds))
    }

    #[test]
    fn fingerprints_cover_every_certificate_in_order() {
        let ca = authority("ca");
        let (a, b) = (client_der(&ca, "a", &[]), client_der(&ca, "b", &[]));
        let fp = VerifiedChains::fingerprint;
        let (one_a, one_b) = (std::slice::from_ref(&a), std::slice::from_ref(&b));
        let (ab, ba) = ([a.clone(), b.clone()], [b.clone(), a.clone()]);
        assert_eq!(fp(&ab), fp(&[a.clone(), b.clone()]));
        assert_ne!(fp(one_a), fp(one_b));
        assert_ne!(fp(&ab), fp(&ba));
        assert_ne!(fp(one_a), fp(&ab));
    }

    #[test]
    fn entries_hold_only_while_every_certificate_is_valid() {
        let ca = authority("ca");
        let chain = [client_der(&ca, "alice", &[])];
        let Verified { validity, subject } = Verified::of(&chain).expect("validity");
        assert_eq!(subject.common_name, "alice");
        let fingerprint = VerifiedChains::fingerprint(&chain);
        let now = UnixTime::now();
        let verified = VerifiedChains::default();
        assert_eq!(verified.get(&fingerprint, now), None);
        let inserted = verified.insert(fingerprint, &chain, now).expect("inserted");
        assert_eq!(inserted, subject);
        assert_eq!(verified.len(), 1);
        assert_eq!(verified.get(&fingerprint, now), Some(inserted.clone()));
        assert_eq!(
            verified.get(&fingerprint, at(validity.not_after)),
            Some(inserted)
        );
        assert_eq!(verified.get(&fingerprint, at(validity.not_after + 1)), None);
        assert_eq!(
            verified.get(&fingerprint, at(validity.not_before - 1)),
            None
        );

        // Nothing is remembered for a chain outside its validity, or one that cannot be read.
        let late = VerifiedChains::default();
        assert_eq!(
            late.insert(fingerprint, &chain, at(validity.not_after + 1)),
            None
        );
        let junk = [CertificateDer::from(b"junk".to_vec())];
        assert_eq!(
            late.insert(VerifiedChains::fingerprint(&junk), &junk, now),
            None
        );
        assert!(late.is_empty());
    }

    #[test]
    fn a_chain_is_valid_while_all_its_certificates_are() {
        let ca = authority("ca");
        let leaf = client_der(&ca, "alice", &[]);
        let ca_der = ca.pair.certificates().expect("CA").remove(0);
        let (one, two) = (
            Verified::of(std::slice::from_ref(&leaf))
                .expect("leaf")
                .validity,
            Verified::of(std::slice::from_ref(&ca_der))
                .expect("CA")
                .validity,
        );
        let Verified {
            validity: both,
            subject,
        } = Verified::of(&[leaf, ca_der]).expect("both");
        assert_eq!(subject.common_name, "alice", "the leaf's subject");
        assert_eq!(both.not_before, one.not_before.max(two.not_before));
        assert_eq!(both.not_after, one.not_after.min(two.not_after));
    }
}
