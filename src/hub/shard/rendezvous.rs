//! Which replica runs which cluster: rendezvous (highest random weight) hashing. Every
//! replica computes the same answer from the same set of live replicas, without talking to
//! the others; when a replica joins, it takes about 1/N of the clusters and nothing else
//! moves; when one leaves, only its clusters move, spread over the rest.
//!
//! The hash must be the same in every replica, whatever its build (a rolling upgrade runs two
//! versions side by side): FNV-1a with a SplitMix64 finish, written out here rather than
//! `std`'s hasher, whose algorithm is not promised across Rust versions.

/// FNV-1a over `parts`, each followed by a separator byte, then mixed.
pub fn stable_hash(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for b in part.bytes().chain(std::iter::once(0xff)) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    mix(h)
}

/// SplitMix64's finaliser: FNV alone weighs the last bytes too little for a fair spread.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The replica that runs `cluster` among `replicas` (none when there is none). Ties, which
/// would need equal 64-bit weights, go to the smaller identity so every replica agrees.
pub fn owner<'a>(cluster: &str, replicas: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    replicas
        .into_iter()
        .map(|r| (stable_hash(&[cluster, r]), r))
        .max_by(|(wa, ra), (wb, rb)| wa.cmp(wb).then_with(|| rb.cmp(ra)))
        .map(|(_, r)| r)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn assign<'a>(clusters: &[String], replicas: &[&'a str]) -> BTreeMap<String, &'a str> {
        clusters
            .iter()
            .map(|c| (c.clone(), owner(c, replicas.iter().copied()).unwrap()))
            .collect()
    }

    fn clusters(n: usize) -> Vec<String> {
        (1..=n).map(|i| format!("cluster-{i}")).collect()
    }

    #[test]
    fn the_hash_is_fixed() {
        // Golden values: a replica of another build must compute the same.
        assert_eq!(stable_hash(&["cluster-1", "hub-a"]), 0x249d_a486_9454_005a);
        assert_eq!(stable_hash(&[]), 0xf52a_15e9_a9b5_e89b);
        assert_ne!(stable_hash(&["ab", ""]), stable_hash(&["a", "b"]));
    }

    #[test]
    fn clusters_spread_evenly() {
        let all = clusters(3000);
        let owners = assign(&all, &["hub-a", "hub-b", "hub-c"]);
        let mut count: BTreeMap<&str, usize> = BTreeMap::new();
        for r in owners.values() {
            *count.entry(r).or_default() += 1;
        }
        for (r, n) in &count {
            assert!((850..=1150).contains(n), "{r} runs {n} of 3000");
        }
        assert_eq!(owner("x", std::iter::empty()), None);
    }

    #[test]
    fn a_replica_leaving_moves_only_its_clusters() {
        let all = clusters(1000);
        let before = assign(&all, &["hub-a", "hub-b", "hub-c"]);
        let after = assign(&all, &["hub-a", "hub-c"]);
        for c in &all {
            if before[c] != "hub-b" {
                assert_eq!(before[c], after[c], "{c} moved though its replica stayed");
            }
        }
    }

    #[test]
    fn a_replica_joining_takes_about_its_share_and_nothing_else_moves() {
        let all = clusters(1000);
        let before = assign(&all, &["hub-a", "hub-b"]);
        let after = assign(&all, &["hub-a", "hub-b", "hub-c"]);
        let moved: Vec<&String> = all.iter().filter(|c| before[*c] != after[*c]).collect();
        assert!(
            moved.iter().all(|c| after[*c] == "hub-c"),
            "only to the new replica"
        );
        assert!((280..=390).contains(&moved.len()), "{} moved", moved.len());
    }
}
