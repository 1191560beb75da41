//! Pairing the elements of a v1alpha1 list with the prior hub elements they
//! continue, so that hub-only data follows the element it belongs to rather
//! than its position (upstream restores by index, which mis-assigns data
//! when devices are removed or reordered).

/// For each new element, the index of the prior element it continues: the
/// first prior element not yet taken for which `same` holds (a key match for
/// keyed lists).
pub(crate) fn pair_by<S, H>(
    new: &[S],
    prior: &[H],
    same: impl Fn(&S, &H) -> bool,
) -> Vec<Option<usize>> {
    let mut taken = vec![false; prior.len()];
    new.iter()
        .map(|element| {
            let found = prior
                .iter()
                .enumerate()
                .position(|(i, candidate)| !taken[i] && same(element, candidate));
            if let Some(i) = found {
                taken[i] = true;
            }
            found
        })
        .collect()
}

/// Pairs the elements of an unkeyed list: first each new element with a prior
/// element that down-converts to exactly it (unchanged, wherever it moved);
/// then each element left over with the prior element left over at its
/// position, so that an element edited in place keeps its hub-only data.
pub(crate) fn pair_atomic<S, H>(
    new: &[S],
    prior: &[H],
    unchanged: impl Fn(&S, &H) -> bool,
) -> Vec<Option<usize>> {
    let mut pairs = pair_by(new, prior, unchanged);
    let mut taken = vec![false; prior.len()];
    for i in pairs.iter().flatten() {
        taken[*i] = true;
    }
    for (i, pair) in pairs.iter_mut().enumerate() {
        if pair.is_none() && taken.get(i) == Some(&false) {
            taken[i] = true;
            *pair = Some(i);
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
            pair_by(&new, &prior, |a, b| a == b),
            vec![Some(1), None, Some(2), None]
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
