//! Condensed pairwise distances between the rows of an (n, k) matrix, as `scipy.spatial.distance.pdist`.
//!
//! Vectorised across partner rows rather than features: X is transposed once to feature-major, and row i
//! is compared with LANES partners at a time, each accumulating its features in order — so every
//! distance is summed exactly as a scalar loop over features would (scipy's order), and the compiler can
//! use full-width vectors without reassociating. Rows are distributed over threads with rayon.
use rayon::prelude::*;
use std::mem::MaybeUninit;

use crate::matrix::row_start;

const LANES: usize = 8;

/// Metric codes shared with the Python side (`pdist(x, metric)` passes the name).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Metric {
    Euclidean,
    SqEuclidean,
    Cityblock,
    Chebyshev,
    BrayCurtis,
    Cosine,
}

impl Metric {
    pub fn parse(name: &str) -> Result<Self, String> {
        Ok(match name {
            "euclidean" => Metric::Euclidean,
            "sqeuclidean" => Metric::SqEuclidean,
            "cityblock" => Metric::Cityblock,
            "chebyshev" => Metric::Chebyshev,
            "braycurtis" => Metric::BrayCurtis,
            "cosine" => Metric::Cosine,
            other => return Err(format!("metric: unknown metric {other:?}")),
        })
    }
}

/// Accumulators a, b, c per partner; `step` folds in one feature pair (u from row i, v from the partner).
/// With `NORMS`, b and c are the norms ‖u‖ of row i and ‖v‖ of the partner, computed once per row beforehand
/// (feature order, one sqrt), so a pair costs one product per feature and one division — scipy's formula.
trait Kernel {
    const NORMS: bool = false;
    fn step(a: &mut f64, b: &mut f64, c: &mut f64, u: f64, v: f64);
    fn finish(a: f64, b: f64, c: f64) -> f64;
}

struct Euclid;
struct SqEuclid;
struct City;
struct Cheb;
struct Bray;
struct Cos;

impl Kernel for Euclid {
    #[inline(always)]
    fn step(a: &mut f64, _: &mut f64, _: &mut f64, u: f64, v: f64) {
        let t = u - v;
        *a += t * t;
    }
    #[inline(always)]
    fn finish(a: f64, _: f64, _: f64) -> f64 {
        a.sqrt()
    }
}
impl Kernel for SqEuclid {
    #[inline(always)]
    fn step(a: &mut f64, b: &mut f64, c: &mut f64, u: f64, v: f64) {
        Euclid::step(a, b, c, u, v)
    }
    #[inline(always)]
    fn finish(a: f64, _: f64, _: f64) -> f64 {
        a
    }
}
impl Kernel for City {
    #[inline(always)]
    fn step(a: &mut f64, _: &mut f64, _: &mut f64, u: f64, v: f64) {
        *a += (u - v).abs();
    }
    #[inline(always)]
    fn finish(a: f64, _: f64, _: f64) -> f64 {
        a
    }
}
impl Kernel for Cheb {
    #[inline(always)]
    fn step(a: &mut f64, _: &mut f64, _: &mut f64, u: f64, v: f64) {
        let t = (u - v).abs();
        *a = if t > *a { t } else { *a };
    }
    #[inline(always)]
    fn finish(a: f64, _: f64, _: f64) -> f64 {
        a
    }
}
impl Kernel for Bray {
    #[inline(always)]
    fn step(a: &mut f64, b: &mut f64, _: &mut f64, u: f64, v: f64) {
        *a += (u - v).abs();
        *b += (u + v).abs();
    }
    #[inline(always)]
    fn finish(a: f64, b: f64, _: f64) -> f64 {
        a / b
    }
}
impl Kernel for Cos {
    const NORMS: bool = true;
    #[inline(always)]
    fn step(a: &mut f64, _: &mut f64, _: &mut f64, u: f64, v: f64) {
        *a += u * v;
    }
    #[inline(always)]
    fn finish(a: f64, b: f64, c: f64) -> f64 {
        // scipy: 1 − u·v / (‖u‖‖v‖), the cosine clipped to [−1, 1]; a zero norm gives 0/0 = NaN, kept by clamp
        (1.0 - a / (b * c)).clamp(0.0, 2.0)
    }
}

/// Distances from row i (features `u`, norm `norm_u`) to partners j0..j1 (feature-major `xt`, n columns; their
/// norms in `norms`, empty unless K::NORMS) into `out`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn row<K: Kernel>(
    u: &[f64],
    norm_u: f64,
    norms: &[f64],
    xt: &[f64],
    n: usize,
    j0: usize,
    j1: usize,
    out: &mut [MaybeUninit<f64>],
) {
    let mut j = j0;
    let mut o = 0;
    while j + LANES <= j1 {
        let (mut a, mut b, mut c) = ([0.0f64; LANES], [0.0f64; LANES], [0.0f64; LANES]);
        if K::NORMS {
            b = [norm_u; LANES];
            c.copy_from_slice(&norms[j..j + LANES]);
        }
        for (f, &uf) in u.iter().enumerate() {
            let v: &[f64; LANES] = xt[f * n + j..][..LANES].try_into().unwrap();
            for l in 0..LANES {
                K::step(&mut a[l], &mut b[l], &mut c[l], uf, v[l]);
            }
        }
        for l in 0..LANES {
            out[o + l].write(K::finish(a[l], b[l], c[l]));
        }
        j += LANES;
        o += LANES;
    }
    while j < j1 {
        let (mut a, mut b, mut c) = if K::NORMS { (0.0, norm_u, norms[j]) } else { (0.0, 0.0, 0.0) };
        for (f, &uf) in u.iter().enumerate() {
            K::step(&mut a, &mut b, &mut c, uf, xt[f * n + j]);
        }
        out[o].write(K::finish(a, b, c));
        j += 1;
        o += 1;
    }
}

/// Rows i0..i1 (their condensed entries in `out`), swept in column tiles of COLS partners so the
/// tile of `xt` (COLS · k values) is reused from L1/L2 by every row of the block instead of being
/// streamed from L3 once per row.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn block<K: Kernel>(
    x: &[f64],
    norms: &[f64],
    xt: &[f64],
    n: usize,
    k: usize,
    i0: usize,
    i1: usize,
    out: &mut [MaybeUninit<f64>],
) {
    let base = row_start(i0, n);
    let mut c0 = i0 + 1;
    while c0 < n {
        let c1 = (c0 + COLS).min(n);
        for i in i0..i1.min(c1 - 1) {
            let j0 = c0.max(i + 1);
            let at = row_start(i, n) - base + (j0 - i - 1);
            let norm_u = if K::NORMS { norms[i] } else { 0.0 };
            row::<K>(&x[i * k..(i + 1) * k], norm_u, norms, xt, n, j0, c1, &mut out[at..at + (c1 - j0)]);
        }
        c0 = c1;
    }
}

const ROWS: usize = 16;
const COLS: usize = 256;

macro_rules! block_fn {
    ($name:ident, $mv:ident, $kernel:ty) => {
        #[inline(always)]
        #[allow(clippy::too_many_arguments)]
        fn $name(x: &[f64], norms: &[f64], xt: &[f64], n: usize, k: usize, i0: usize, i1: usize, out: &mut [MaybeUninit<f64>]) {
            block::<$kernel>(x, norms, xt, n, k, i0, i1, out)
        }
        crate::multiversion!(#[allow(clippy::too_many_arguments)] fn $mv(x: &[f64], norms: &[f64], xt: &[f64], n: usize, k: usize, i0: usize, i1: usize, out: &mut [MaybeUninit<f64>]) => $name);
    };
}
block_fn!(block_euclid, mv_euclid, Euclid);
block_fn!(block_sqeuclid, mv_sqeuclid, SqEuclid);
block_fn!(block_city, mv_city, City);
block_fn!(block_cheb, mv_cheb, Cheb);
block_fn!(block_bray, mv_bray, Bray);
block_fn!(block_cos, mv_cos, Cos);

/// Asks Linux for transparent huge pages under a large buffer: first-touch page faults, which otherwise
/// cost more than computing the distances, drop 512-fold (a hint only; harmless if refused).
fn advise_huge_pages<T>(buffer: &mut Vec<T>) {
    #[cfg(target_os = "linux")]
    {
        const MADV_HUGEPAGE: i32 = 14;
        const HUGE: usize = 2 << 20;
        extern "C" {
            fn madvise(addr: *mut std::ffi::c_void, len: usize, advice: i32) -> i32;
        }
        let start = buffer.as_mut_ptr() as usize;
        let end = start + buffer.capacity() * std::mem::size_of::<T>();
        let (lo, hi) = (start.div_ceil(HUGE) * HUGE, end / HUGE * HUGE);
        if hi > lo {
            // SAFETY: [lo, hi) lies inside this Vec's allocation; MADV_HUGEPAGE changes no contents.
            unsafe {
                madvise(lo as *mut std::ffi::c_void, hi - lo, MADV_HUGEPAGE);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = buffer;
}

/// Condensed distances of the rows of `x` (n × k, row-major).
pub fn pdist(x: &[f64], n: usize, k: usize, metric: Metric) -> Vec<f64> {
    let m = n * n.saturating_sub(1) / 2;
    if n < 2 {
        return vec![0.0; m];
    }
    let mut out: Vec<f64> = Vec::with_capacity(m);
    advise_huge_pages(&mut out);
    let mut xt = vec![0.0f64; n * k];
    for i in 0..n {
        for f in 0..k {
            xt[f * n + i] = x[i * k + f];
        }
    }
    // Cosine: each row's norm once (feature order, then one sqrt), instead of its Σx² once per pair.
    let norms: Vec<f64> = if metric == Metric::Cosine {
        (0..n).map(|i| x[i * k..(i + 1) * k].iter().fold(0.0, |s, &v| s + v * v).sqrt()).collect()
    } else {
        Vec::new()
    };
    let f = match metric {
        Metric::Euclidean => mv_euclid,
        Metric::SqEuclidean => mv_sqeuclid,
        Metric::Cityblock => mv_city,
        Metric::Chebyshev => mv_cheb,
        Metric::BrayCurtis => mv_bray,
        Metric::Cosine => mv_cos,
    };
    let mut blocks: Vec<(usize, usize, &mut [MaybeUninit<f64>])> = Vec::with_capacity(n / ROWS + 1);
    let mut rest = &mut out.spare_capacity_mut()[..m];
    for i0 in (0..n - 1).step_by(ROWS) {
        let i1 = (i0 + ROWS).min(n - 1);
        let (head, tail) = rest.split_at_mut(row_start(i1, n) - row_start(i0, n));
        blocks.push((i0, i1, head));
        rest = tail;
    }
    blocks.into_par_iter().for_each(|(i0, i1, slot)| f(x, &norms, &xt, n, k, i0, i1, slot));
    // SAFETY: the block slices partition out[..m] and `block` writes every entry of its rows.
    unsafe { out.set_len(m) };
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_worked_metrics() {
        // rows u = (1, 2), v = (4, 6), w = (1, 2): pairs (u,v) (u,w) (v,w)
        let x = [1.0, 2.0, 4.0, 6.0, 1.0, 2.0];
        assert_eq!(pdist(&x, 3, 2, Metric::Euclidean), vec![5.0, 0.0, 5.0]);
        assert_eq!(pdist(&x, 3, 2, Metric::SqEuclidean), vec![25.0, 0.0, 25.0]);
        assert_eq!(pdist(&x, 3, 2, Metric::Cityblock), vec![7.0, 0.0, 7.0]);
        assert_eq!(pdist(&x, 3, 2, Metric::Chebyshev), vec![4.0, 0.0, 4.0]);
        assert_eq!(pdist(&x, 3, 2, Metric::BrayCurtis), vec![7.0 / 13.0, 0.0, 7.0 / 13.0]);
        let cos = pdist(&x, 3, 2, Metric::Cosine);
        assert!((cos[0] - (1.0 - 16.0 / (5.0f64 * 52.0).sqrt())).abs() < 1e-15 && cos[1].abs() < 1e-15);
    }

    #[test]
    fn cosine_is_scipys_formula_bit_for_bit() {
        // n = 21: full LANES blocks and the scalar tail; one zero row (0/0 = NaN, as scipy)
        let (n, k) = (21, 7);
        let mut x: Vec<f64> = (0..n * k).map(|t| ((t * 53) % 17) as f64 * 0.37 - 2.9).collect();
        x[4 * k..5 * k].fill(0.0);
        let d = pdist(&x, n, k, Metric::Cosine);
        let mut idx = 0;
        for i in 0..n {
            for j in i + 1..n {
                let (mut a, mut b, mut c) = (0.0f64, 0.0f64, 0.0f64);
                for f in 0..k {
                    let (u, v) = (x[i * k + f], x[j * k + f]);
                    a += u * v;
                    b += u * u;
                    c += v * v;
                }
                let want = (1.0 - a / (b.sqrt() * c.sqrt())).clamp(0.0, 2.0);
                assert!(d[idx] == want || (d[idx].is_nan() && want.is_nan()), "{i} {j}");
                idx += 1;
            }
        }
    }

    #[test]
    fn vector_and_scalar_paths_agree() {
        // n = 21 exercises full LANES blocks and the scalar tail for every row.
        let (n, k) = (21, 5);
        let x: Vec<f64> = (0..n * k).map(|t| ((t * 37) % 11) as f64 - 3.5).collect();
        let d = pdist(&x, n, k, Metric::Euclidean);
        let mut idx = 0;
        for i in 0..n {
            for j in i + 1..n {
                let want: f64 = (0..k).map(|f| (x[i * k + f] - x[j * k + f]).powi(2)).sum::<f64>().sqrt();
                assert_eq!(d[idx], want);
                idx += 1;
            }
        }
    }
}
