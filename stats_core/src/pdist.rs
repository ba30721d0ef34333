//! Condensed pairwise distances between the rows of an (n, k) matrix, as `scipy.spatial.distance.pdist`.
//!
//! Vectorised across partner rows rather than features: X is transposed once to feature-major, and row i
//! is compared with LANES partners at a time, each accumulating its features in order — so every
//! distance is summed exactly as a scalar loop over features would (scipy's order), and the compiler can
//! use full-width vectors without reassociating. Rows are distributed over threads with rayon.
use rayon::prelude::*;

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
trait Kernel {
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
    #[inline(always)]
    fn step(a: &mut f64, b: &mut f64, c: &mut f64, u: f64, v: f64) {
        *a += u * v;
        *b += u * u;
        *c += v * v;
    }
    #[inline(always)]
    fn finish(a: f64, b: f64, c: f64) -> f64 {
        (1.0 - a / (b * c).sqrt()).clamp(0.0, 2.0)
    }
}

/// Distances from row i (features `u`) to rows i+1.. (feature-major `xt`, n columns) into `out`.
#[inline(always)]
fn row<K: Kernel>(u: &[f64], xt: &[f64], n: usize, i: usize, out: &mut [f64]) {
    let mut j = i + 1;
    let mut o = 0;
    while j + LANES <= n {
        let (mut a, mut b, mut c) = ([0.0f64; LANES], [0.0f64; LANES], [0.0f64; LANES]);
        for (f, &uf) in u.iter().enumerate() {
            let v = &xt[f * n + j..f * n + j + LANES];
            for l in 0..LANES {
                K::step(&mut a[l], &mut b[l], &mut c[l], uf, v[l]);
            }
        }
        for l in 0..LANES {
            out[o + l] = K::finish(a[l], b[l], c[l]);
        }
        j += LANES;
        o += LANES;
    }
    while j < n {
        let (mut a, mut b, mut c) = (0.0, 0.0, 0.0);
        for (f, &uf) in u.iter().enumerate() {
            K::step(&mut a, &mut b, &mut c, uf, xt[f * n + j]);
        }
        out[o] = K::finish(a, b, c);
        j += 1;
        o += 1;
    }
}

macro_rules! row_fn {
    ($name:ident, $kernel:ty) => {
        #[inline(always)]
        fn $name(u: &[f64], xt: &[f64], n: usize, i: usize, out: &mut [f64]) {
            row::<$kernel>(u, xt, n, i, out)
        }
    };
}
row_fn!(row_euclid, Euclid);
row_fn!(row_sqeuclid, SqEuclid);
row_fn!(row_city, City);
row_fn!(row_cheb, Cheb);
row_fn!(row_bray, Bray);
row_fn!(row_cos, Cos);
crate::multiversion!(fn mv_euclid(u: &[f64], xt: &[f64], n: usize, i: usize, out: &mut [f64]) => row_euclid);
crate::multiversion!(fn mv_sqeuclid(u: &[f64], xt: &[f64], n: usize, i: usize, out: &mut [f64]) => row_sqeuclid);
crate::multiversion!(fn mv_city(u: &[f64], xt: &[f64], n: usize, i: usize, out: &mut [f64]) => row_city);
crate::multiversion!(fn mv_cheb(u: &[f64], xt: &[f64], n: usize, i: usize, out: &mut [f64]) => row_cheb);
crate::multiversion!(fn mv_bray(u: &[f64], xt: &[f64], n: usize, i: usize, out: &mut [f64]) => row_bray);
crate::multiversion!(fn mv_cos(u: &[f64], xt: &[f64], n: usize, i: usize, out: &mut [f64]) => row_cos);

/// Condensed distances of the rows of `x` (n × k, row-major).
pub fn pdist(x: &[f64], n: usize, k: usize, metric: Metric) -> Vec<f64> {
    let m = n * n.saturating_sub(1) / 2;
    let mut out = vec![0.0f64; m];
    if n < 2 {
        return out;
    }
    let mut xt = vec![0.0f64; n * k];
    for i in 0..n {
        for f in 0..k {
            xt[f * n + i] = x[i * k + f];
        }
    }
    let f = match metric {
        Metric::Euclidean => mv_euclid,
        Metric::SqEuclidean => mv_sqeuclid,
        Metric::Cityblock => mv_city,
        Metric::Chebyshev => mv_cheb,
        Metric::BrayCurtis => mv_bray,
        Metric::Cosine => mv_cos,
    };
    let mut rows: Vec<(usize, &mut [f64])> = Vec::with_capacity(n - 1);
    let mut rest = out.as_mut_slice();
    for i in 0..n - 1 {
        let (head, tail) = rest.split_at_mut(n - i - 1);
        rows.push((i, head));
        rest = tail;
    }
    rows.into_par_iter().for_each(|(i, slot)| f(&x[i * k..(i + 1) * k], &xt, n, i, slot));
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
