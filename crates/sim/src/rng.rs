//! A small seeded random source (SplitMix64) for everything the simulation draws: names,
//! uids, fault rolls, wave phases. Seeded so that a `--seed` reproduces a fleet's shape;
//! not cryptographic, and it need not be.

/// SplitMix64: tiny, fast, and good enough for simulation choices.
#[derive(Clone, Debug)]
pub struct Rng {
    state: u64,
}

const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

impl Rng {
    /// A generator whose whole sequence is fixed by `seed`.
    pub fn new(seed: u64) -> Self {
        Rng { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A float in `[0, 1)`.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// An integer in `[0, n)`; `0` when `n` is `0`.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }

    /// A five-character suffix in the alphabet Kubernetes uses for `generateName`.
    pub fn name_suffix(&mut self) -> String {
        (0..5)
            .map(|_| NAME_ALPHABET[self.below(NAME_ALPHABET.len() as u64) as usize] as char)
            .collect()
    }

    /// A random (version 4 layout) UUID string for `metadata.uid`.
    pub fn uuid(&mut self) -> String {
        let a = self.next_u64();
        let b = self.next_u64();
        format!(
            "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0x0fff,
            ((b >> 48) & 0x3fff) | 0x8000,
            b & 0xffff_ffff_ffff
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        assert_eq!(a.next_u64(), b.next_u64());
        assert_eq!(a.name_suffix(), b.name_suffix());
    }

    #[test]
    fn uuid_has_the_canonical_layout() {
        let id = Rng::new(1).uuid();
        let parts: Vec<_> = id.split('-').map(str::len).collect();
        assert_eq!(parts, vec![8, 4, 4, 4, 12]);
    }

    #[test]
    fn floats_stay_in_unit_interval() {
        let mut r = Rng::new(3);
        assert!(
            (0..1000)
                .map(|_| r.next_f64())
                .all(|x| (0.0..1.0).contains(&x))
        );
    }
}
