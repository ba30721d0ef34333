//! Read-only view of a distance matrix stored condensed (upper triangle, row by row) or square.

/// Distances between n objects: `data` is condensed (n(n−1)/2 values) or square (n·n, row-major).
#[derive(Clone, Copy)]
pub struct Distances<'a> {
    pub data: &'a [f64],
    pub n: usize,
    pub square: bool,
}

/// Condensed index of pair (i, i+1).
#[inline(always)]
pub fn row_start(i: usize, n: usize) -> usize {
    i * n - i * (i + 1) / 2
}

impl<'a> Distances<'a> {
    /// A view over `data`, or an error naming the length mismatch.
    pub fn new(data: &'a [f64], n: usize, square: bool) -> Result<Self, String> {
        let want = if square { n * n } else { n * n.saturating_sub(1) / 2 };
        if data.len() != want {
            return Err(format!("distances: expected {want} values for n = {n}, got {}", data.len()));
        }
        Ok(Self { data, n, square })
    }

    /// n inferred from a condensed length or a square side.
    pub fn from_flat(data: &'a [f64], shape: &[usize]) -> Result<Self, String> {
        match shape {
            [len] => {
                let n = ((1.0 + (1.0 + 8.0 * *len as f64).sqrt()) / 2.0).round() as usize;
                Self::new(data, n, false)
            }
            [r, c] if r == c => Self::new(data, *r, true),
            _ => Err(format!("distances: expected a condensed vector or a square matrix, got shape {shape:?}")),
        }
    }

    /// Distances from i to i+1, …, n−1 (contiguous in both layouts).
    #[inline(always)]
    pub fn row(&self, i: usize) -> &'a [f64] {
        let start = if self.square { i * self.n + i + 1 } else { row_start(i, self.n) };
        &self.data[start..start + self.n - i - 1]
    }
}

/// Tasks a one-pass reduction over the upper triangle is cut into: a constant, not the thread count, so the
/// partial sums — and their fixed-order total — are the same bits on 1, 2 or 64 threads.
pub const REDUCTION_PARTS: usize = 32;

/// Row ranges of the upper triangle split into about `parts` pieces with similar numbers of pairs.
pub fn balanced_row_ranges(n: usize, parts: usize) -> Vec<(usize, usize)> {
    let total = (n * n.saturating_sub(1) / 2).max(1);
    let target = total.div_ceil(parts.max(1)).max(1);
    let mut out = Vec::new();
    let (mut start, mut acc) = (0, 0);
    for i in 0..n.saturating_sub(1) {
        acc += n - i - 1;
        if acc >= target {
            out.push((start, i + 1));
            start = i + 1;
            acc = 0;
        }
    }
    if start < n.saturating_sub(1) {
        out.push((start, n - 1));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn condensed_and_square_rows_agree() {
        // n = 4; condensed order (0,1) (0,2) (0,3) (1,2) (1,3) (2,3)
        let condensed = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        #[rustfmt::skip]
        let square = [0.0, 1.0, 2.0, 3.0,  1.0, 0.0, 4.0, 5.0,  2.0, 4.0, 0.0, 6.0,  3.0, 5.0, 6.0, 0.0];
        let c = Distances::new(&condensed, 4, false).unwrap();
        let s = Distances::new(&square, 4, true).unwrap();
        for i in 0..3 {
            assert_eq!(c.row(i), s.row(i));
        }
        assert_eq!(c.row(1), &[4.0, 5.0]);
        assert!(Distances::new(&condensed, 5, false).is_err());
    }

    #[test]
    fn ranges_cover_every_row_once() {
        for n in [2, 3, 10, 101] {
            let r = balanced_row_ranges(n, 7);
            assert_eq!(r.first().unwrap().0, 0);
            assert_eq!(r.last().unwrap().1, n - 1);
            assert!(r.windows(2).all(|w| w[0].1 == w[1].0));
        }
    }
}
