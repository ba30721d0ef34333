//! Condensed pairwise distances between the rows of an (n, k) matrix, as `scipy.spatial.distance.pdist`.
//!
//! Register-blocked like a matrix product: partners are packed once in panels of W (feature-major inside a
//! panel), and a tile of R rows × W partners accumulates in registers while the features stream past. Every
//! pair still sums its features in order on its own (scipy's scalar loop; no FMA), so each distance is the
//! same whatever the tiling, the task split or the number of threads. Row blocks are distributed over threads
//! with rayon, each writing its own slice of the output.
use rayon::prelude::*;
use std::mem::MaybeUninit;

use crate::matrix::row_start;

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

/// Accumulators a, b per pair; `step` folds in one feature pair (u from row i, v from the partner), features in
/// order — scipy's scalar loop. `finish` gets both rows' norms ‖u‖, ‖v‖ (computed once per row beforehand,
/// feature order then one sqrt) when `NORMS`, so a cosine pair costs one product per feature and one division —
/// scipy's formula — instead of three sums and a sqrt.
trait Kernel {
    const NORMS: bool = false;
    fn step(a: &mut f64, b: &mut f64, u: f64, v: f64);
    fn finish(a: f64, b: f64, norm_u: f64, norm_v: f64) -> f64;
}

struct Euclid;
struct SqEuclid;
struct City;
struct Cheb;
struct Bray;
struct Cos;

impl Kernel for Euclid {
    #[inline(always)]
    fn step(a: &mut f64, _: &mut f64, u: f64, v: f64) {
        let t = u - v;
        *a += t * t;
    }
    #[inline(always)]
    fn finish(a: f64, _: f64, _: f64, _: f64) -> f64 {
        a.sqrt()
    }
}
impl Kernel for SqEuclid {
    #[inline(always)]
    fn step(a: &mut f64, b: &mut f64, u: f64, v: f64) {
        Euclid::step(a, b, u, v)
    }
    #[inline(always)]
    fn finish(a: f64, _: f64, _: f64, _: f64) -> f64 {
        a
    }
}
impl Kernel for City {
    #[inline(always)]
    fn step(a: &mut f64, _: &mut f64, u: f64, v: f64) {
        *a += (u - v).abs();
    }
    #[inline(always)]
    fn finish(a: f64, _: f64, _: f64, _: f64) -> f64 {
        a
    }
}
impl Kernel for Cheb {
    #[inline(always)]
    fn step(a: &mut f64, _: &mut f64, u: f64, v: f64) {
        let t = (u - v).abs();
        *a = if t > *a { t } else { *a };
    }
    #[inline(always)]
    fn finish(a: f64, _: f64, _: f64, _: f64) -> f64 {
        a
    }
}
impl Kernel for Bray {
    #[inline(always)]
    fn step(a: &mut f64, b: &mut f64, u: f64, v: f64) {
        *a += (u - v).abs();
        *b += (u + v).abs();
    }
    #[inline(always)]
    fn finish(a: f64, b: f64, _: f64, _: f64) -> f64 {
        a / b
    }
}
impl Kernel for Cos {
    const NORMS: bool = true;
    #[inline(always)]
    fn step(a: &mut f64, _: &mut f64, u: f64, v: f64) {
        *a += u * v;
    }
    #[inline(always)]
    fn finish(a: f64, _: f64, norm_u: f64, norm_v: f64) -> f64 {
        // scipy: 1 − u·v / (‖u‖‖v‖), the cosine clipped to [−1, 1]; a zero norm gives 0/0 = NaN, kept by clamp
        (1.0 - a / (norm_u * norm_v)).clamp(0.0, 2.0)
    }
}

/// Partners per panel: one tile is R rows × W partners, R·W/4 AVX2 accumulators.
const W: usize = 8;
/// Rows per parallel task (a multiple of every kernel's R).
const ROWS: usize = 16;
/// Bytes of packed partners one column sweep reuses from L2 across the task's rows.
const SWEEP_BYTES: usize = 256 << 10;

/// The rows of `x` packed in panels of W, feature-major inside a panel: (panel p, feature f, lane l) at
/// (p·k + f)·W + l, lanes past the last row zero — so a tile reads W partners' feature f as one contiguous
/// vector and a panel streams from memory in order.
fn pack_panels(x: &[f64], n: usize, k: usize) -> Vec<f64> {
    let mut out = vec![0.0f64; n.div_ceil(W) * k * W];
    if k == 0 {
        return out;
    }
    for (j, row) in x.chunks_exact(k).enumerate().take(n) {
        let (p, l) = (j / W, j % W);
        for (f, &v) in row.iter().enumerate() {
            out[(p * k + f) * W + l] = v;
        }
    }
    out
}

/// Rows i0..i1 (their condensed entries in `out`) against every later partner.
///
/// Register-blocked as a matrix product: a tile of R rows × W partners keeps its R·W accumulators in registers
/// while the features stream past, so each loaded partner vector serves R rows and the R·W/4 independent
/// dependency chains hide the add latency. Each pair is still summed feature by feature on its own, so a
/// distance does not depend on the tile, the task or the thread count (and equals the numba kernel's). Tiles
/// that straddle the diagonal or the end compute whole and store only their pairs j > i, j < n.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn block<K: Kernel, const R: usize>(
    x: &[f64],
    norms: &[f64],
    panels: &[f64],
    n: usize,
    k: usize,
    i0: usize,
    i1: usize,
    out: &mut [MaybeUninit<f64>],
) {
    let base = row_start(i0, n);
    // the task's rows, R per tile, feature-major within a tile (rows past n − 1 repeat the last; never stored)
    let tiles = (i1 - i0).div_ceil(R);
    let mut us = vec![0.0f64; tiles * k * R];
    for t in 0..tiles {
        for r in 0..R {
            let i = (i0 + t * R + r).min(n - 1);
            for f in 0..k {
                us[(t * k + f) * R + r] = x[i * k + f];
            }
        }
    }
    let sweep = (SWEEP_BYTES / (k.max(1) * W * 8)).max(1);
    let (first, last) = ((i0 + 1) / W, n.div_ceil(W));
    let mut s0 = first;
    while s0 < last {
        let s1 = (s0 + sweep).min(last);
        for t in 0..tiles {
            let t0 = i0 + t * R;
            let u = &us[t * k * R..(t + 1) * k * R];
            for p in s0.max((t0 + 1) / W)..s1 {
                let panel = &panels[p * k * W..(p + 1) * k * W];
                let (mut a, mut b) = ([[0.0f64; W]; R], [[0.0f64; W]; R]);
                for (v, uf) in panel.chunks_exact(W).zip(u.chunks_exact(R)) {
                    for r in 0..R {
                        for l in 0..W {
                            K::step(&mut a[r][l], &mut b[r][l], uf[r], v[l]);
                        }
                    }
                }
                let j0 = p * W;
                let nv: [f64; W] = if K::NORMS { norms[j0..j0 + W].try_into().unwrap() } else { [0.0; W] };
                if t0 + R <= j0 && t0 + R <= i1 && j0 + W <= n {
                    // the common tile: every row before every partner, all stored — no per-row checks, and
                    // W stores the compiler writes as vectors
                    for r in 0..R {
                        let i = t0 + r;
                        let nu = if K::NORMS { norms[i] } else { 0.0 };
                        let at = row_start(i, n) - base + (j0 - i - 1);
                        let o: &mut [MaybeUninit<f64>; W] = (&mut out[at..at + W]).try_into().unwrap();
                        for l in 0..W {
                            o[l].write(K::finish(a[r][l], b[r][l], nu, nv[l]));
                        }
                    }
                    continue;
                }
                for r in 0..R {
                    let i = t0 + r;
                    let (lo, hi) = ((i + 1).max(j0), (j0 + W).min(n));
                    if i >= i1 || lo >= hi {
                        continue;
                    }
                    let nu = if K::NORMS { norms[i] } else { 0.0 };
                    let at = row_start(i, n) - base + (lo - i - 1);
                    for (o, l) in out[at..at + (hi - lo)].iter_mut().zip(lo - j0..hi - j0) {
                        o.write(K::finish(a[r][l], b[r][l], nu, nv[l]));
                    }
                }
            }
        }
        s0 = s1;
    }
}

macro_rules! block_fn {
    ($name:ident, $mv:ident, $kernel:ty, $rows:literal) => {
        #[inline(always)]
        #[allow(clippy::too_many_arguments)]
        fn $name(x: &[f64], norms: &[f64], panels: &[f64], n: usize, k: usize, i0: usize, i1: usize, out: &mut [MaybeUninit<f64>]) {
            block::<$kernel, $rows>(x, norms, panels, n, k, i0, i1, out)
        }
        crate::multiversion!(#[allow(clippy::too_many_arguments)] fn $mv(x: &[f64], norms: &[f64], panels: &[f64], n: usize, k: usize, i0: usize, i1: usize, out: &mut [MaybeUninit<f64>]) => $name);
    };
}
// R rows per tile: 4 × 8 partners = 8 AVX2 accumulators (16 for Bray–Curtis's two sums: 2 rows).
block_fn!(block_euclid, mv_euclid, Euclid, 4);
block_fn!(block_sqeuclid, mv_sqeuclid, SqEuclid, 4);
block_fn!(block_city, mv_city, City, 4);
block_fn!(block_cheb, mv_cheb, Cheb, 4);
block_fn!(block_bray, mv_bray, Bray, 2);
block_fn!(block_cos, mv_cos, Cos, 4);

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
    let panels = pack_panels(x, n, k);
    // Cosine: each row's norm once (feature order, then one sqrt), padded with zeros to whole panels.
    let norms: Vec<f64> = if metric == Metric::Cosine {
        let mut norms: Vec<f64> =
            x.chunks_exact(k.max(1)).take(n).map(|r| r.iter().fold(0.0, |s, &v| s + v * v).sqrt()).collect();
        norms.resize(n.div_ceil(W) * W, 0.0);
        norms
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
    blocks.into_par_iter().for_each(|(i0, i1, slot)| f(x, &norms, &panels, n, k, i0, i1, slot));
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
        // n = 21: whole tiles, a partial last panel and tiles across the diagonal; one zero row (0/0 = NaN, as scipy)
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
        // n = 21 exercises whole tiles, the partial last panel and the diagonal tiles for every row.
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

    #[test]
    fn every_metric_equals_the_scalar_loop_across_sweeps_and_tiles() {
        // k = 600 makes a column sweep 6 panels, so n = 61 (8 panels) takes two sweeps; 61 rows leave a partial
        // last panel and a partial last row tile. Each distance must be the feature-order scalar loop's, bit for bit.
        let (n, k) = (61, 600);
        let x: Vec<f64> = (0..n * k).map(|t| ((t * 7919) % 23) as f64 * 0.21 - 1.7).collect();
        for metric in ["euclidean", "sqeuclidean", "cityblock", "chebyshev", "braycurtis", "cosine"] {
            let d = pdist(&x, n, k, Metric::parse(metric).unwrap());
            let norm = |i: usize| x[i * k..(i + 1) * k].iter().fold(0.0, |s, &v| s + v * v).sqrt();
            let mut idx = 0;
            for i in 0..n {
                for j in i + 1..n {
                    let (mut a, mut b) = (0.0f64, 0.0f64);
                    for f in 0..k {
                        let (u, v) = (x[i * k + f], x[j * k + f]);
                        match metric {
                            "euclidean" | "sqeuclidean" => a += (u - v) * (u - v),
                            "cityblock" => a += (u - v).abs(),
                            "chebyshev" => a = a.max((u - v).abs()),
                            "braycurtis" => {
                                a += (u - v).abs();
                                b += (u + v).abs();
                            }
                            _ => a += u * v,
                        }
                    }
                    let want = match metric {
                        "euclidean" => a.sqrt(),
                        "braycurtis" => a / b,
                        "cosine" => (1.0 - a / (norm(i) * norm(j))).clamp(0.0, 2.0),
                        _ => a,
                    };
                    assert_eq!(d[idx].to_bits(), want.to_bits(), "{metric} {i} {j}");
                    idx += 1;
                }
            }
        }
    }
}
