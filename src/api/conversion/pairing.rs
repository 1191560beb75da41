//! Pairing the elements of a v1alpha1 list with the prior hub elements they
//! continue, so that hub-only data follows the element it belongs to rather
//! than its position (upstream restores by index, which mis-assigns data
//! when devices are removed or reordered).

/// For each new element of a keyed list, the index of the prior element it
/// continues: one with the same key, not yet taken. When keys repeat (as
/// they should not), an unchanged element is preferred, then one at the
/// same position.
pub(crate) fn pair_keyed<S, H>(
    new: &[S],
    prior: &[H],
    same_key: impl Fn(&S, &H) -> bool,
    unchanged: impl Fn(&S, &H) -> bool,
) -> Vec<Option<usize>> {
    const PASSES: [Pass; 4] = [
        Pass::UNCHANGED_IN_PLACE,
        Pass::UNCHANGED,
        Pass::IN_PLACE,
        Pass {
            unchanged: false,
            in_place: false,
        },
    ];
    pair_in_passes(new, prior, &PASSES, same_key, unchanged)
}

/// Pairs the elements of an unkeyed list: an element unchanged at its
/// position first, then an unchanged element wherever it moved, then each
/// element left over with the prior element left over at its position (so
/// that an element edited in place keeps its hub-only data).
pub(crate) fn pair_atomic<S, H>(
    new: &[S],
    prior: &[H],
    unchanged: impl Fn(&S, &H) -> bool,
) -> Vec<Option<usize>> {
    const PASSES: [Pass; 3] = [Pass::UNCHANGED_IN_PLACE, Pass::UNCHANGED, Pass::IN_PLACE];
    pair_in_passes(new, prior, &PASSES, |_, _| true, unchanged)
}

/// What a pairing pass requires beyond a free prior element with the key.
struct Pass {
    unchanged: bool,
    in_place: bool,
}

impl Pass {
    const UNCHANGED_IN_PLACE: Pass = Pass {
        unchanged: true,
        in_place: true,
    };
    const UNCHANGED: Pass = Pass {
        unchanged: true,
        in_place: false,
    };
    const IN_PLACE: Pass = Pass {
        unchanged: false,
        in_place: true,
    };
}

fn pair_in_passes<S, H>(
    new: &[S],
    prior: &[H],
    passes: &[Pass],
    same_key: impl Fn(&S, &H) -> bool,
    unchanged: impl Fn(&S, &H) -> bool,
) -> Vec<Option<usize>> {
    let mut taken = vec![false; prior.len()];
    let mut pairs = vec![None; new.len()];
    for pass in passes {
        for (at, (element, pair)) in new.iter().zip(pairs.iter_mut()).enumerate() {
            if pair.is_some() {
                continue;
            }
            *pair = (0..prior.len()).find(|&i| {
                !taken[i]
                    && (!pass.in_place || i == at)
                    && same_key(element, &prior[i])
                    && (!pass.unchanged || unchanged(element, &prior[i]))
            });
            if let Some(i) = *pair {
                taken[i] = true;
            }
        }
    }
    pairs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyed_pairs_follow_the_key_and_take_each_prior_once() {
        let prior = ["net0", "net1", "net1"];
        let new = ["net1", "net2", "net1", "net1"];
        assert_eq!(
            pair_keyed(&new, &prior, |a, b| a == b, |_, _| false),
            vec![Some(1), None, Some(2), None]
        );
    }

    #[test]
    fn repeated_keys_prefer_the_element_edited_in_place() {
        // The same machine listed twice; the first location was edited.
        let prior = [("m1", "pve1"), ("m1", "pve2")];
        let new = [("m1", "pve2"), ("m1", "pve2")];
        assert_eq!(
            pair_keyed(&new, &prior, |n, p| n.0 == p.0, |n, p| n == p),
            vec![Some(0), Some(1)]
        );
    }

    #[test]
    fn repeated_keys_prefer_the_unchanged_element() {
        // Two devices named net1; the first was removed.
        let prior = [("net1", 'a'), ("net1", 'b')];
        let new = [("net1", 'b')];
        assert_eq!(
            pair_keyed(&new, &prior, |n, p| n.0 == p.0, |n, p| n == p),
            vec![Some(1)]
        );
    }

    #[test]
    fn atomic_pairs_keep_equal_elements_in_place() {
        // Both prior elements look the same in v1alpha1; the first was edited.
        let prior = [(1, 'a'), (1, 'b')];
        let new = [2, 1];
        assert_eq!(
            pair_atomic(&new, &prior, |n, p| *n == p.0),
            vec![Some(0), Some(1)]
        );
    }

    #[test]
    fn atomic_pairs_prefer_unchanged_elements_then_positions() {
        let prior = [10, 20, 30];
        // 30 moved to the front, 20 was edited into 25 in place, 40 is new.
        let new = [30, 25, 10, 40];
        assert_eq!(
            pair_atomic(&new, &prior, |a, b| a == b),
            vec![Some(2), Some(1), Some(0), None]
        );
    }
}
